package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
)

func init() {
	register(newApprovalsCmd)
	register(newApproveCmd)
	register(newRejectCmd)
}

func newApprovalsCmd() *cobra.Command {
	cmd := showCmd("approvals", "List the messages held until the node's operator approves or rejects them", func(c *apiclient.Client, ctx context.Context) (api.ApprovalsDoc, error) { return api.Approvals(ctx, c) }, func(tw *tabwriter.Writer, doc api.ApprovalsDoc) {
		if doc.Note != "" {
			fmt.Fprintln(tw, doc.Note)
			return
		}
		fmt.Fprintln(tw, "MESSAGE\tFROM\tTO\tINTENT\tAGE\tEXPIRES\tPAYLOAD")
		now := time.Now()
		for _, h := range doc.Held {
			intent := h.Type + "/" + h.Intent
			if h.ApprovedBy != "" {
				intent += " (approved by " + h.ApprovedBy + ", waiting for the outbox)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.MessageID, h.From, h.To, intent,
				now.Sub(h.HeldAt).Round(time.Second), h.ExpiresAt.Local().Format(time.RFC3339), h.Summary)
		}
	})
	cmd.Long = `approvals lists the messages this node's agent sent that require approval
(security.require_approval; ACP v2's requireApproval), oldest first: id, sender, recipient,
type/intent, how long each has waited, when it expires (then it is dropped and the agent gets
TIMEOUT), and its payload cut at 200 bytes (the whole of it is in the audit log's "held"
entry: 'iacp-node conversation ID'). Approve one with 'iacp-node approve ID', reject it with
'iacp-node reject ID'. Whoever holds the node's API token decides (docs/coordination.md).`
	return cmd
}

// defaultDecider is who decides when --by is not given: the user running the command.
func defaultDecider() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return api.DefaultApprovalBy
}

func newApproveCmd() *cobra.Command {
	return decisionCmd("approve MESSAGE_ID [--by NAME]", "Approve a held message: the node sends it",
		`approve approves a message held for approval ('iacp-node approvals' lists them): the node
sends it through its durable outbox with its own id, and the audit log records "approved" with
--by (default: the user running this command). It returns once the outbox has the message, or
with the recipient's refusal.`, false)
}

func newRejectCmd() *cobra.Command {
	return decisionCmd("reject MESSAGE_ID [--by NAME] [--reason R]", "Reject a held message: the node drops it and tells its sender",
		`reject rejects a message held for approval ('iacp-node approvals' lists them): the node
drops it unsent, the audit log records "rejected" with --by (default: the user running this
command) and --reason, and the sending agent gets a PERMISSION_DENIED error correlated to the
message that names who rejected it and why. A message approved already cannot be rejected.`, true)
}

// decisionCmd is approve (reject false) or reject.
func decisionCmd(use, short, long string, reject bool) *cobra.Command {
	var cf clientFlags
	var by, reason string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				var res api.DecisionResult
				var err error
				if reject {
					res, err = api.Reject(cmd.Context(), c, args[0], by, reason)
				} else {
					res, err = api.Approve(cmd.Context(), c, args[0], by)
				}
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\t%s\tby %s\n", res.Decision, res.MessageID, res.By)
				})
			})
		},
	}
	addClientFlags(cmd, &cf)
	cmd.Flags().StringVar(&by, "by", defaultDecider(), "who decides, as the audit log records it")
	if reject {
		cmd.Flags().StringVar(&reason, "reason", "", "why (at most 1 KiB); the sender's error carries it")
	}
	return cmd
}
