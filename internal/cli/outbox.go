package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func init() { register(newOutboxCmd) }

func newOutboxCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "List the messages waiting in the durable outbox for their receipt",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			defer c.Close()
			doc, err := c.Outbox(cmd.Context())
			if err != nil {
				return err
			}
			return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
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
		},
	}
	addClientFlags(cmd, &cf)
	return cmd
}
