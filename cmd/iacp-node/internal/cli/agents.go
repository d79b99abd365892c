package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newAgentsCmd) }

func newAgentsCmd() *cobra.Command {
	return showCmd("agents", "List the agents heard through heartbeats, with their liveness, how stale each row may be, and circuit breaker", (*apiclient.Client).Agents, func(tw *tabwriter.Writer, doc apiclient.AgentsDoc) {
		if doc.Note != "" {
			fmt.Fprintln(tw, doc.Note)
			if len(doc.Breakers) > 0 {
				fmt.Fprintln(tw, "AGENT\tSTATE\tLOAD\tTASKS\tLAST SEEN\tSTALE AFTER\tCIRCUIT")
			}
		} else {
			fmt.Fprintln(tw, "AGENT\tSTATE\tLOAD\tTASKS\tLAST SEEN\tSTALE AFTER\tCIRCUIT")
			for _, a := range doc.Agents {
				stale := (time.Duration(a.StalenessSeconds) * time.Second).String()
				if a.Watched {
					stale += " (watched)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%.2f\t%d\t%s ago\t%s\t%s\n", a.AgentID, a.State, a.Load, a.ActiveTasks,
					time.Since(a.LastSeen).Round(time.Second), stale, orDash(a.Circuit))
			}
		}
		// Circuits of agents not in the liveness table (gossip off, or never heard).
		heard := map[string]bool{}
		for _, a := range doc.Agents {
			heard[a.AgentID] = true
		}
		for _, b := range doc.Breakers {
			if !heard[b.AgentID] {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t%s\n", b.AgentID, b.State)
			}
		}
	})
}
