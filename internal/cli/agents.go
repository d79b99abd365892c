package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
)

func init() { register(newAgentsCmd) }

func newAgentsCmd() *cobra.Command {
	return showCmd("agents", "List the agents heard through heartbeats, with their liveness", (*api.Client).Agents, func(tw *tabwriter.Writer, doc api.AgentsDoc) {
		if doc.Note != "" {
			fmt.Fprintln(tw, doc.Note)
			return
		}
		fmt.Fprintln(tw, "AGENT\tSTATE\tLOAD\tTASKS\tLAST SEEN")
		for _, a := range doc.Agents {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%d\t%s ago\n", a.AgentID, a.State, a.Load, a.ActiveTasks, time.Since(a.LastSeen).Round(time.Second))
		}
	})
}
