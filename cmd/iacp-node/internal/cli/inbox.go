package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newInboxCmd) }

func newInboxCmd() *cobra.Command {
	var cf clientFlags
	var follow, ack bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "inbox [--follow] [--ack] [-o json|yaml|table]",
		Short: "List (and with --ack take) the inbound messages waiting for the agent",
		Long: `inbox lists the messages the node holds for its agent, oldest first, all of them: it
asks for them page by page (a page holds up to 8 MiB of messages, or one larger message). With
--ack each printed message is acknowledged (taken), so it is not offered again. With --follow
it keeps waiting for new ones until interrupted. With -o json each message is one JSON line,
so that a shell script can be an agent: read lines, act, answer with 'iacp-node send -f -'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := fitLargestMessage(ctx, &cf); err != nil {
				return err
			}
			return cf.withClient(func(c *apiclient.Client) error {
				var after uint64
				for {
					var w time.Duration
					if follow {
						w = wait
					}
					doc, err := c.Inbox(ctx, after, w)
					if err != nil {
						if follow && ctx.Err() != nil {
							return nil
						}
						return err
					}
					for _, it := range doc.Messages {
						if err := printInboxItem(cmd, &cf, it); err != nil {
							return err
						}
						if ack {
							if err := c.Ack(ctx, it.Message.Envelope.MessageID); err != nil {
								return err
							}
						}
					}
					after = max(after, doc.NextAfter)
					if !doc.More && !follow {
						return nil
					}
				}
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().BoolVar(&follow, "follow", false, "keep waiting for new messages")
	cmd.Flags().BoolVar(&ack, "ack", false, "acknowledge (take) each message printed")
	cmd.Flags().DurationVar(&wait, "poll", 30*time.Second, "long-poll duration of each --follow request")
	return cmd
}

// fitLargestMessage raises the client's answer limit when the node's max_message_bytes is
// above the default, so that a page holding one message of that size can be read.
func fitLargestMessage(ctx context.Context, cf *clientFlags) error {
	return cf.withClient(func(c *apiclient.Client) error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if need := int64(st.MaxMessageBytes) + 1<<20; need > apiclient.DefaultAnswerLimit {
			cf.opts = append(cf.opts, apiclient.WithAnswerLimit(need))
		}
		return nil
	})
}

func printInboxItem(cmd *cobra.Command, cf *clientFlags, it apiclient.InboxItem) error {
	out := cmd.OutOrStdout()
	m := it.Message
	if cf.output == "table" {
		_, err := fmt.Fprintf(out, "%d\t%s\t%s\t%s/%s\tfrom %s\t%s\n", it.Seq, it.Received.Format(time.RFC3339), m.Envelope.MessageID,
			m.Message.Type, m.Message.Intent, m.Envelope.Sender.AgentID, m.Message.Payload)
		return err
	}
	if cf.output == "json" {
		raw, err := m.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", raw)
		return err
	}
	if err := cf.print(out, m, nil); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "---")
	return err
}
