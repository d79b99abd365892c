package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newTailCmd) }

func newTailCmd() *cobra.Command {
	var cf clientFlags
	var f api.EventFilter
	cmd := &cobra.Command{
		Use:   "tail [--kinds event,group,heartbeat,transition,message,trust.conflict] [--agent A] [--group G] [-o json]",
		Short: "Follow the node's event stream: broadcasts, heartbeats, liveness, inbound messages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				out := cmd.OutOrStdout()
				err := api.Events(cmd.Context(), c, f, func(it api.EventItem) error {
					if cf.output != "table" {
						raw, err := json.Marshal(it)
						if err != nil {
							return err
						}
						if cf.output == "yaml" {
							return cf.print(out, it, nil)
						}
						_, err = fmt.Fprintf(out, "%s\n", raw)
						return err
					}
					_, err := fmt.Fprintf(out, "%s  %-10s  %s  %s\n", it.At.Format(time.RFC3339), it.Kind, orDash(it.AgentID), summary(it))
					return err
				})
				if cmd.Context().Err() != nil {
					return nil
				}
				return err
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringSliceVar(&f.Kinds, "kinds", nil, "kinds to show (default all)")
	cmd.Flags().StringVar(&f.AgentID, "agent", "", "only items from or about this agent")
	cmd.Flags().StringVar(&f.Group, "group", "", "only group messages of this capability")
	return cmd
}

func summary(it api.EventItem) string {
	switch {
	case it.Event != nil:
		return it.Event.EventType + " " + it.Event.Detail
	case it.Heartbeat != nil:
		return fmt.Sprintf("%s load %.2f", it.Heartbeat.Status, it.Heartbeat.Load)
	case it.Transition != nil:
		return fmt.Sprintf("%s -> %s %s", orDash(it.Transition.From), it.Transition.To, it.Transition.Reason)
	case it.Inbound != nil:
		return fmt.Sprintf("%s %s/%s", it.Inbound.MessageID, it.Inbound.Type, it.Inbound.Intent)
	case it.Group != "":
		return "group " + it.Group
	}
	return ""
}
