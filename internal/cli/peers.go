package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { register(newPeersCmd) }

func newPeersCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the libp2p peers the node is connected to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			defer c.Close()
			doc, err := c.Peers(cmd.Context())
			if err != nil {
				return err
			}
			return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "PEER\tLATENCY\tADDRS")
				for _, p := range doc.Peers {
					lat := "-"
					if p.LatencyMs != nil {
						lat = fmt.Sprintf("%.1fms", *p.LatencyMs)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", p.PeerID, lat, strings.Join(p.Addrs, " "))
				}
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
