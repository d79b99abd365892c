package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newStatusCmd) }

func newStatusCmd() *cobra.Command {
	return showCmd("status", "Show the running node's status", (*apiclient.Client).Status, func(tw *tabwriter.Writer, st apiclient.StatusDoc) {
		fmt.Fprintf(tw, "AGENT\t%s\nPEER\t%s\nSTATUS\t%s (load %.2f, %d tasks)\nPEERS\t%d\nINBOX\t%d waiting\nADDRS\t%s\n",
			st.AgentID, st.PeerID, st.Status.Status, st.Status.Load, st.Status.ActiveTasks, st.Peers, st.InboxDepth, strings.Join(st.Addrs, " "))
		if d := st.Discovery; d != nil {
			fmt.Fprintf(tw, "DISCOVERY\t%s, bootstrapped %v, %d in routing table\n", d.Mode, d.Bootstrapped, d.RoutingTableSize)
		} else {
			fmt.Fprintf(tw, "DISCOVERY\toff\n")
		}
		sf := st.Safety
		fmt.Fprintf(tw, "BOUNDS\treplay %d/%d ids (%d evicted), %d pins, %d agents, inbox %d/%d bytes, DHT store %d records\n",
			sf.ReplayIDs, sf.ReplayCapacity, sf.ReplayEvicted, sf.Pins, sf.Agents, sf.InboxBytes, sf.InboxMaxBytes, sf.DHTRecords)
		if sf.LocalHealth > 0 {
			fmt.Fprintf(tw, "HEALTH\tthis node finds itself slow (score %d): it waits %d times longer before it suspects others\n",
				sf.LocalHealth, sf.LocalHealth+1)
		}
		if sf.AuditBroken != "" {
			fmt.Fprintf(tw, "AUDIT\tWARNING: the audit log was damaged (%s); a new anchored segment was started. Run `iacp-node audit verify`.\n", sf.AuditBroken)
		}
	})
}
