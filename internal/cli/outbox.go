package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
)

func init() { register(newOutboxCmd) }

func newOutboxCmd() *cobra.Command {
	return showCmd("outbox", "List the messages waiting in the durable outbox for their receipt", (*api.Client).Outbox, func(tw *tabwriter.Writer, doc api.OutboxDoc) {
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
}
