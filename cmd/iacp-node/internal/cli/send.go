package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"

	"github.com/iacp-node/iacp-node/protocol"
)

func init() { register(newSendCmd) }

func newSendCmd() *cobra.Command {
	var cf clientFlags
	var mf messageFlags
	cmd := &cobra.Command{
		Use:   "send --to AGENT --intent I [--payload JSON|@file] [--channel C] [--ttl D] | send -f DOC",
		Short: "Send a message through the running node: delivered, or queued for a known agent that is offline",
		Long: `send gives a message to the node running with --data-dir, through its local API. The
node fills in and signs what you leave out (message_id, timestamp, sender, signature) and returns
once the recipient's node has the message (status accepted), or once it is queued for a known
agent that cannot be reached now (status queued: the node retries until its TTL; 'iacp-node
outbox cancel ID' takes it back). An agent id nothing knows (a typo, most often) fails at once
with AGENT_NOT_FOUND, unless --queue-unknown queues it for an agent that will join later. Without --file the message is a request; a document
from --file may be of any type, and of another draft (IaCP 1.0, ElizaOS, ACP v2: named by
--dialect or recognised), which the node carries as IACP. A reply to a request arrives later in the inbox ('iacp-node
inbox'); use 'iacp-node request' to wait for it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := mf.foreignDocument(cmd.InOrStdin())
			if err != nil {
				return err
			}
			var m *protocol.Message
			if doc == nil {
				if m, err = mf.message(cmd.InOrStdin(), protocol.TypeRequest); err != nil {
					return err
				}
			}
			return cf.withClient(func(c *apiclient.Client) error {
				var res api.SendResult
				var err error
				if doc != nil {
					res, err = c.SendDocument(cmd.Context(), doc, mf.dialect)
				} else {
					am, werr := wire(m)
					if werr != nil {
						return werr
					}
					res, err = c.SendWith(cmd.Context(), am, apiclient.SendOptions{QueueUnknown: mf.queueUnknown})
				}
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
	addMessageFlags(cmd, &mf)
	return cmd
}
