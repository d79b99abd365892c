package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
)

func init() { register(newStatusCmd) }

func newStatusCmd() *cobra.Command {
	return showCmd("status", "Show the running node's status", (*api.Client).Status, func(tw *tabwriter.Writer, st api.StatusDoc) {
		fmt.Fprintf(tw, "AGENT\t%s\nPEER\t%s\nSTATUS\t%s (load %.2f, %d tasks)\nPEERS\t%d\nINBOX\t%d waiting\nADDRS\t%s\n",
			st.AgentID, st.PeerID, st.Status.Status, st.Status.Load, st.Status.ActiveTasks, st.Peers, st.InboxDepth, strings.Join(st.Addrs, " "))
		if d := st.Discovery; d != nil {
			fmt.Fprintf(tw, "DISCOVERY\t%s, bootstrapped %v, %d in routing table\n", d.Mode, d.Bootstrapped, d.RoutingTableSize)
		} else {
			fmt.Fprintf(tw, "DISCOVERY\toff\n")
		}
	})
}
