package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { register(newStatusCmd) }

func newStatusCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running node's status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := c.Status(cmd.Context())
			if err != nil {
				return err
			}
			return cf.print(cmd.OutOrStdout(), st, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "AGENT\t%s\nPEER\t%s\nSTATUS\t%s (load %.2f, %d tasks)\nPEERS\t%d\nINBOX\t%d waiting\nADDRS\t%s\n",
					st.AgentID, st.PeerID, st.Status.Status, st.Status.Load, st.Status.ActiveTasks, st.Peers, st.InboxDepth, strings.Join(st.Addrs, " "))
				if d := st.Discovery; d != nil {
					fmt.Fprintf(tw, "DISCOVERY\t%s, bootstrapped %v, %d in routing table\n", d.Mode, d.Bootstrapped, d.RoutingTableSize)
				} else {
					fmt.Fprintf(tw, "DISCOVERY\toff\n")
				}
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
