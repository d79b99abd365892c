package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newDiscoverCmd) }

func newDiscoverCmd() *cobra.Command {
	var cf clientFlags
	var q protocol.CapabilityQuery
	cmd := &cobra.Command{
		Use:   "discover [--tool T]... [--model M]... [--domain D]... [--prefer-tool T]... [--locality L] [--max-latency-ms N]",
		Short: "Find agents by capability through the DHT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				aq, err := convert[apiclient.CapabilityQuery](q)
				if err != nil {
					return err
				}
				doc, err := c.Discover(cmd.Context(), aq)
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "AGENT\tPEER\tPREFERRED\tTOOLS")
					for _, m := range doc.Matches {
						fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", m.AgentID, m.PeerID, m.PreferredMatches, strings.Join(m.Manifest.Tools, ","))
					}
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	fl := cmd.Flags()
	fl.StringSliceVar(&q.Required.Tools, "tool", nil, "required tool (repeatable)")
	fl.StringSliceVar(&q.Required.Models, "model", nil, "required model (repeatable)")
	fl.StringSliceVar(&q.Required.Domains, "domain", nil, "required domain (repeatable)")
	fl.StringSliceVar(&q.Preferred.Tools, "prefer-tool", nil, "preferred tool (repeatable)")
	fl.StringSliceVar(&q.Preferred.Models, "prefer-model", nil, "preferred model (repeatable)")
	fl.StringSliceVar(&q.Preferred.Domains, "prefer-domain", nil, "preferred domain (repeatable)")
	fl.StringVar(&q.Constraints.Locality, "locality", "", "locality constraint")
	fl.IntVar(&q.Constraints.MaxLatencyMs, "max-latency-ms", 0, "latency bound in ms")
	return cmd
}
