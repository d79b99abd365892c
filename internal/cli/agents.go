package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func init() { register(newAgentsCmd) }

func newAgentsCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents heard through heartbeats, with their liveness",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			defer c.Close()
			doc, err := c.Agents(cmd.Context())
			if err != nil {
				return err
			}
			return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
				if doc.Note != "" {
					fmt.Fprintln(tw, doc.Note)
					return
				}
				fmt.Fprintln(tw, "AGENT\tSTATE\tLOAD\tTASKS\tLAST SEEN")
				for _, a := range doc.Agents {
					fmt.Fprintf(tw, "%s\t%s\t%.2f\t%d\t%s ago\n", a.AgentID, a.State, a.Load, a.ActiveTasks, time.Since(a.LastSeen).Round(time.Second))
				}
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
