package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newBroadcastCmd) }

func newBroadcastCmd() *cobra.Command {
	var cf clientFlags
	var ev protocol.EventPayload
	var data string
	cmd := &cobra.Command{
		Use:   "broadcast --event TYPE [--detail TEXT] [--severity info|warning|critical] [--data JSON]",
		Short: "Broadcast an event to every agent in the mesh",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ev.EventType == "" {
				return fmt.Errorf("name the event with --event TYPE")
			}
			if data != "" {
				if err := json.Unmarshal([]byte(data), &ev.Data); err != nil {
					return fmt.Errorf("--data must be JSON: %w", err)
				}
			}
			return cf.withClient(func(c *apiclient.Client) error {
				res, err := c.Broadcast(cmd.Context(), apiclient.EventPayload(ev))
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\t%s\n", res.Status, res.MessageID)
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringVar(&ev.EventType, "event", "", "event type, e.g. deploy.done")
	cmd.Flags().StringVar(&ev.Detail, "detail", "", "human-readable detail")
	cmd.Flags().StringVar(&ev.Severity, "severity", "", "info, warning or critical")
	cmd.Flags().StringVar(&data, "data", "", "structured data, JSON")
	return cmd
}
