package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newTrustCmd) }

func newTrustCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "List and forget who may speak for which agent id on the running node",
		Long: `trust shows the bindings of agent ids to peers that the node holds, and lets you forget them.

Under trust: open (trust on first use), the first peer whose message for an agent id the node
accepts is pinned to it; heartbeats never pin. A later claim by another peer is refused with
IDENTITY_INVALID and recorded as a conflict (the trust.conflict event and the
iacp_trust_conflicts_total metric). When an agent moved to a new key, or the first claim was an
attacker's, forget the pin: the next accepted message pins the id again. Pins no accepted
message used for pin_expiry (default 30 days) are forgotten by themselves.

With an allowlist file, the bindings are the file's and cannot be forgotten here.

Under trust: authority, certificates bind agent ids to peers; on the mesh authority's node,
trust certs lists those it issued (revoke them with iacp-node revoke).`,
	}
	cmd.AddCommand(newTrustListCmd(), newTrustForgetCmd(), newTrustCertsCmd())
	return cmd
}

func newTrustListCmd() *cobra.Command {
	cmd := showCmd("list", "List the pins, and the claims that contradicted them", func(c *apiclient.Client, ctx context.Context) (api.TrustDoc, error) { return api.Trust(ctx, c) }, func(tw *tabwriter.Writer, doc api.TrustDoc) {
		fmt.Fprintf(tw, "mode: %s\n\n", doc.Mode)
		fmt.Fprintln(tw, "AGENT\tPEER\tPINNED\tLAST USED")
		for _, p := range doc.Pins {
			pinned, used := "allowlist", "-"
			if !p.Allowlisted {
				pinned, used = p.Pinned.Format(time.RFC3339), p.Used.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.AgentID, p.PeerID, pinned, used)
		}
		if doc.ConflictsTotal == 0 {
			return
		}
		fmt.Fprintf(tw, "\n%d conflicts (the last %d):\nAT\tAGENT\tBOUND TO\tCLAIMED BY\tVIA\n", doc.ConflictsTotal, len(doc.Conflicts))
		for _, c := range doc.Conflicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.At.Format(time.RFC3339), c.AgentID, c.Bound, c.Claimant, c.Source)
		}
	})
	return cmd
}

func newTrustForgetCmd() *cobra.Command {
	var cf clientFlags
	var peerID string
	cmd := &cobra.Command{
		Use:   "forget AGENT_ID | --peer PEER_ID",
		Short: "Forget the pin of an agent id, or every pin of a peer",
		Example: `  iacp-node trust forget acme:h:bob
  iacp-node trust forget --peer 12D3KooW...`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			agentID := ""
			if len(args) == 1 {
				agentID = args[0]
			}
			if (agentID == "") == (peerID == "") {
				return fmt.Errorf("name an agent id or --peer, not both")
			}
			return cf.withClient(func(c *apiclient.Client) error {
				res, err := api.ForgetTrust(cmd.Context(), c, agentID, peerID)
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), res, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "forgot %d pins\n", res.Forgotten)
				})
			})
		},
	}
	cmd.Flags().StringVar(&peerID, "peer", "", "forget every pin of this peer id")
	addClientFlags(cmd, &cf)
	return cmd
}
