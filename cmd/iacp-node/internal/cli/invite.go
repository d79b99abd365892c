package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
)

func init() { register(newInviteCmd) }

func newInviteCmd() *cobra.Command {
	var cf clientFlags
	var agentID string
	var ttl time.Duration
	var grants []string
	var replace bool
	cmd := &cobra.Command{
		Use:   "invite [--agent ID [--replace]] [--ttl 24h] [--grant PERMISSION]...",
		Short: "Invite an agent into the mesh (on the node that holds the mesh authority)",
		Long: `invite asks the running node that founded the mesh (iacp-node init) for a one-time
invitation and prints it. The token carries the node's addresses, the mesh authority's id and
a secret; give it to the new agent's operator, who runs

  iacp-node init --join TOKEN

The new node proves it holds the secret, for its own peer id and agent id, and receives its
agent certificate. An invitation works once, until it expires (--ttl, default 24h, at most
720h), and with --agent only for that agent id. Treat it like a password until it is used.

One agent id has one holder: the authority never certifies an id that another peer holds
(an unexpired, unrevoked certificate). Without --agent the joiner chooses its id, any that no
other peer holds, and invite says so. --agent ID --replace moves an id to the joiner's peer (an
agent on a new machine or key): the holder's certificates are revoked when the joiner's is
issued.

--grant gives the new agent's certificate permissions: what receiving nodes check ACP v2
security.permissions and their intent_policy against, and the capabilities the agent may obtain
A2ACP tokens for (iacp-node token).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				req := api.InviteRequest{AgentID: agentID, Grants: grants, Replace: replace}
				if ttl > 0 {
					req.TTL = ttl.String()
				}
				doc, err := api.Invite(cmd.Context(), c, req)
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\n\nexpires %s; on the new agent's machine run:\n  iacp-node init --join %s\n",
						doc.Token, doc.Expires.Format(time.RFC3339), doc.Token)
					switch {
					case doc.AnyAgent:
						fmt.Fprintln(tw, "\nThis invitation names no agent id: its holder chooses any id that no other peer holds (--agent binds it to one).")
					case doc.Replace:
						fmt.Fprintf(tw, "\nThe joiner replaces %s's current holder, whose certificates are revoked when the joiner's is issued.\n", doc.AgentID)
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&agentID, "agent", "", "bind the invitation to this agent id")
	cmd.Flags().BoolVar(&replace, "replace", false, "with --agent: the joiner replaces the peer that holds the id now (its certificates are revoked)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the invitation is valid (default 24h)")
	cmd.Flags().StringSliceVar(&grants, "grant", nil, "a permission the certificate grants (repeat, or separate with commas)")
	addClientFlags(cmd, &cf)
	return cmd
}
