package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
)

func init() { register(newRevokeCmd); register(newTokenCmd) }

func newRevokeCmd() *cobra.Command {
	var cf clientFlags
	var dryRun, allPeers bool
	cmd := &cobra.Command{
		Use:   "revoke AGENT_ID | CERTIFICATE_ID",
		Short: "Revoke an agent's certificates (on the node that holds the mesh authority)",
		Long: `revoke asks the running node that founded the mesh to revoke every unexpired certificate of an
agent (or one certificate, by its id: see iacp-node trust certs). The node signs the next
revocation list and broadcasts it: every node applies it within one gossip round, keeps it in
revocations.jwt, and from then on refuses the agent's messages, heartbeats and DHT records with
IDENTITY_INVALID. A node that missed the broadcast catches up from a peer within a minute.

A revoked agent joins again only with a new invitation.

--dry-run lists the certificates the revocation would revoke, and revokes nothing. An agent id
has one holder; if two peers hold certificates for it anyway (a conflict, which every node
reports in iacp-node trust list), revoking the id is refused, naming each certificate: revoke
the wrong holder by certificate id, or both with --all-peers.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cf.withClient(func(c *apiclient.Client) error {
				doc, err := api.Revoke(cmd.Context(), c, api.RevokeRequest{Target: args[0], DryRun: dryRun, AllPeers: allPeers})
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
					if dryRun {
						fmt.Fprintf(tw, "would revoke %d certificates (nothing revoked: --dry-run)\n\n", len(doc.Certificates))
					} else {
						fmt.Fprintf(tw, "revoked %d certificates; the revocation list is broadcast\n\n", len(doc.Certificates))
					}
					certTable(tw, doc.Certificates)
				})
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the certificates it would revoke, and revoke nothing")
	cmd.Flags().BoolVar(&allPeers, "all-peers", false, "revoke an agent id's certificates even when several peers hold them")
	addClientFlags(cmd, &cf)
	return cmd
}

func newTrustCertsCmd() *cobra.Command {
	return showCmd("certs", "List the certificates the mesh authority issued (on its node)", func(c *apiclient.Client, ctx context.Context) (api.CertificatesDoc, error) {
		return api.Certificates(ctx, c)
	}, func(tw *tabwriter.Writer, doc api.CertificatesDoc) {
		certTable(tw, doc.Certificates)
	})
}

func certTable(tw *tabwriter.Writer, cs []node.IssuedCertificate) {
	fmt.Fprintln(tw, "AGENT\tCERTIFICATE\tPEER\tPERMISSIONS\tEXPIRES\tREVOKED")
	for _, c := range cs {
		revoked := "-"
		if !c.Revoked.IsZero() {
			revoked = c.Revoked.Format(time.RFC3339)
		}
		perms := strings.Join(c.Permissions, ",")
		if perms == "" {
			perms = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.AgentID, c.ID, c.Peer, perms, c.Expires.Format(time.RFC3339), revoked)
	}
}

func newTokenCmd() *cobra.Command {
	var cf clientFlags
	var caps []string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token TARGET_AGENT_ID [--cap CAPABILITY]... [--ttl 1h]",
		Short: "Obtain an A2ACP token for this node's agent from the mesh authority",
		Long: `token asks the running node for an A2ACP token (specs/003) that lets its agent call
TARGET_AGENT_ID with the capabilities given by --cap, and prints it. The node obtains it from
the mesh authority's node over the mesh (POST /auth/token on the local API does the same). The
authority grants only capabilities that the agent's certificate grants (iacp-node invite
--grant). Put the token in a message's security.auth_token; the receiving node checks the
draft's five rules: signature, expiry, audience, capabilities, issuer.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl < 0 || ttl%time.Second != 0 {
				return fmt.Errorf("--ttl %s: want a whole number of seconds, such as 1h", ttl)
			}
			return cf.withClient(func(c *apiclient.Client) error {
				doc, err := api.AuthToken(cmd.Context(), c, api.TokenRequest{TargetAgentID: args[0], RequestedCapabilities: caps, TTL: int64(ttl / time.Second)})
				if err != nil {
					return err
				}
				return cf.print(cmd.OutOrStdout(), doc, func(tw *tabwriter.Writer) {
					fmt.Fprintf(tw, "%s\n\nexpires %s\n", doc.Token, doc.ExpiresAt.Format(time.RFC3339))
				})
			})
		},
	}
	cmd.Flags().StringSliceVar(&caps, "cap", nil, "a capability the token grants (repeat, or separate with commas)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "the token's lifetime (default 1h, at most 24h)")
	addClientFlags(cmd, &cf)
	return cmd
}
