package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newResolveCmd) }

func newResolveCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "resolve AGENT",
		Short: "Look up an agent's record (peer, addresses, manifest) in the DHT",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				rec, err := c.Resolve(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), rec, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "AGENT\t%s\nPEER\t%s\nADDRS\t%s\nTOOLS\t%s\nEXPIRES\t%s\n", rec.AgentID, rec.PeerID,
						strings.Join(rec.Addrs, " "), strings.Join(rec.Manifest.Tools, ","), rec.Expires.Format("2006-01-02T15:04:05Z07:00"))
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
