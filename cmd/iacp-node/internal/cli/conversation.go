package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
)

func init() { register(newConversationCmd) }

func newConversationCmd() *cobra.Command {
	var cf clientFlags
	var follow bool
	var poll time.Duration
	cmd := &cobra.Command{
		Use:   "conversation ID [--follow] [-o json|yaml|table]",
		Short: "List a conversation: every message of it this node sent or received, and what became of each",
		Long: `conversation lists, oldest first, what the node's audit log recorded of the conversation
ID: every message whose message_id or correlation_id is ID, then every message correlated to
one of those (the answers, and theirs), each with what happened to it here: sent, delivered,
received, acked (taken by the agent), refused, expired. ID may be an IACP correlation id, an
ElizaOS reply_with or conversation_id, an ACP v2 correlationId (or a command id that is a UUID), or the message
id of the request that began it. With --follow it keeps printing new entries until
interrupted. With -o json each entry is one JSON line. Needs the audit log (audit: true).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return cf.withClient(func(c *apiclient.Client) error {
				var after uint64
				for {
					doc, err := api.Conversation(ctx, c, args[0], after, 0)
					if err != nil {
						if follow && ctx.Err() != nil {
							return nil
						}
						return err
					}
					for _, e := range doc.Messages {
						if err := printConversationEntry(cmd.OutOrStdout(), &cf, e); err != nil {
							return err
						}
					}
					after = doc.NextAfter
					if doc.More {
						continue
					}
					if !follow {
						return nil
					}
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(poll):
					}
				}
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new entries until interrupted")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often --follow asks for new entries")
	return cmd
}

func printConversationEntry(w io.Writer, cf *clientFlags, e node.ConversationEntry) error {
	switch cf.output {
	case "table":
		what := e.Type
		if e.Intent != "" {
			what += "/" + e.Intent
		}
		_, err := fmt.Fprintf(w, "%-7d %-20s %-9s %-36s %-16s %-24s %-24s %s\n", e.Seq, e.Time.UTC().Format("2006-01-02T15:04:05Z"),
			e.Event, e.MessageID, dash(what), dash(e.From), dash(e.To), dash(string(e.Code)))
		return err
	case "json":
		raw, err := api.EncodeJSON(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	}
	if err := cf.print(w, e, nil); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "---")
	return err
}
