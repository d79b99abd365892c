package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newOutboxCmd) }

func newOutboxCmd() *cobra.Command {
	cmd := showCmd("outbox", "List the messages waiting in the durable outbox for their receipt", (*apiclient.Client).Outbox, func(tw *tabwriter.Writer, doc apiclient.OutboxDoc) {
		if doc.Note != "" {
			fmt.Fprintln(tw, doc.Note)
			return
		}
		fmt.Fprintln(tw, "MESSAGE\tRECIPIENT\tATTEMPTS\tNEXT\tEXPIRES\tLAST ERROR")
		for _, e := range doc.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", e.MessageID, e.Recipient, e.Attempts,
				e.NextAttemptAt.Format(time.RFC3339), e.ExpiresAt.Format(time.RFC3339), orDash(e.LastError))
		}
	})
	cmd.AddCommand(newOutboxCancelCmd())
	return cmd
}

func newOutboxCancelCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cancel MESSAGE_ID",
		Short: "Take a queued message out of the outbox: it is never delivered",
		Long: `cancel takes a message that 'send' answered queued out of the node's outbox (DELETE
/v1/outbox/{id}): the node stops trying to deliver it. An attempt on the wire at that moment
may still reach the recipient. A message the outbox does not hold (delivered, refused,
expired or cancelled already) is an error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				res, err := c.CancelOutbox(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "cancelled\t%s\n", res.Cancelled)
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
