package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/trust"
)

// Trust modes, as TrustMode reports them (docs/trust.md).
const (
	// TrustAuthority lets only peers holding an agent certificate of the mesh authority
	// speak for an agent id.
	TrustAuthority = trust.Authority
	// TrustOpen pins each agent id to the first peer whose message for it the node accepts.
	TrustOpen = trust.Open
	// TrustAllowlist lets only the allowlist file's pairs speak.
	TrustAllowlist = trust.Allowlist
)

// Files of authority mode in the data directory, and the certificate protocol.
const (
	// CertFile holds the node's agent certificate.
	CertFile = trust.CertFile
	// AuthorityKeyFile holds the mesh authority's key on the node that founded the mesh.
	AuthorityKeyFile = trust.AuthorityKeyFile
	// CertProtocolID is the protocol on which nodes hand out agent certificates.
	CertProtocolID = trust.CertProtocolID
)

// IssuedCertificate is a certificate the mesh authority issued, as its registry keeps it.
type IssuedCertificate = authority.Issued

// Pin is one binding of an agent id to a peer, as `iacp-node trust list` shows it.
type Pin struct {
	// AgentID is the agent; PeerID the peer that speaks for it.
	AgentID string  `json:"agent_id"`
	PeerID  peer.ID `json:"peer_id"`
	// Pinned is when the first accepted message pinned it, Used when an accepted message
	// last did; both zero for an allowlisted pair.
	Pinned time.Time `json:"pinned,omitzero"`
	Used   time.Time `json:"used,omitzero"`
	// Allowlisted says the pair comes from the allowlist file, not from first use.
	Allowlisted bool `json:"allowlisted,omitempty"`
}

// TrustConflict is a claim on an agent id by a peer other than the one the id is bound to:
// a message or heartbeat refused (or ignored) for it, or, in authority mode, a second peer
// certified for an id that another holds.
type TrustConflict struct {
	// Seq numbers the conflicts this node saw, from 1.
	Seq uint64 `json:"seq"`
	// At is when the claim arrived.
	At time.Time `json:"at"`
	// AgentID is the agent claimed; Bound the peer it is bound to; Claimant the peer that
	// claimed it.
	AgentID  string  `json:"agent_id"`
	Bound    peer.ID `json:"bound_peer"`
	Claimant peer.ID `json:"claimant_peer"`
	// Source is what carried the claim: "message", "heartbeat" or "certificate".
	Source string `json:"source"`
}

// RevokeOptions are how Revoke treats what its target names.
type RevokeOptions struct {
	// DryRun returns the certificates the revocation would revoke, and revokes nothing.
	DryRun bool
	// AllPeers revokes an agent id's certificates even when several peers hold them; without
	// it that is refused, naming each certificate.
	AllPeers bool
}

// TokenRequest asks the mesh authority for an A2ACP token: the A2ACP draft's `POST
// /auth/token` body (specs/003, "Token Acquisition").
type TokenRequest struct {
	// AgentID is the calling agent, the token's sub; "" means this node's agent.
	AgentID string `json:"agent_id,omitempty"`
	// TargetAgentID is the agent the token lets it call, the token's aud.
	TargetAgentID string `json:"target_agent_id"`
	// RequestedCapabilities must all be granted by the caller's certificate.
	RequestedCapabilities []string `json:"requested_capabilities,omitempty"`
	// TTL is the lifetime in seconds: authority.DefaultTokenTTL when 0, at most
	// authority.MaxTokenTTL.
	TTL int64 `json:"ttl,omitempty"`
}

// Join redeems the invitation inv for agentID with the mesh authority's node, from host h
// (whose key is the joining node's identity), and returns the agent certificate, verified.
func Join(ctx context.Context, h host.Host, inv authority.Invite, agentID string, capabilities []string) (*authority.Certificate, error) {
	return trust.Join(ctx, h, inv, agentID, capabilities)
}

// TrustDesk is the face of the node's trust part (docs/trust.md): who may speak for which
// agent id, the conflicts over ids, and, on the mesh authority's node, the invitations,
// certificates and revocations. Node.Trust hands it out; it holds nothing of its own.
type TrustDesk struct{ n *Node }

// Trust returns the face of the node's trust part.
func (n *Node) Trust() TrustDesk { return TrustDesk{n} }

// Mode says how this node decides who may speak for an agent id: TrustAuthority, TrustOpen
// or TrustAllowlist.
func (d TrustDesk) Mode() string { return d.n.trust.Mode() }

// Pins returns every binding of an agent id to a peer that this node holds: the pins taken
// on first use, or the allowlist's pairs, sorted by agent id.
func (d TrustDesk) Pins() []Pin {
	pins := d.n.trust.Pins()
	out := make([]Pin, len(pins))
	for i, p := range pins {
		out[i] = Pin(p)
	}
	return out
}

// Forget forgets the pin of agentID, or every pin of peer p when agentID is "", so that the
// next message this node accepts for the id pins it again (an agent that moved to a new key,
// or a first claim that was an attacker's); in authority mode the certificate held is
// fetched again. It also drops the directory's entries for what it forgot. It returns how
// many pins went; allowlisted pairs are the allowlist file's to change.
func (d TrustDesk) Forget(agentID string, p peer.ID) int {
	k := d.n.trust.Forget(agentID, p)
	d.n.peers.forget(agentID, p)
	return k
}

// Conflicts returns the conflicts kept with a Seq above after (the last 256), the count of
// all conflicts this node saw, and a channel that is closed at the next one.
func (d TrustDesk) Conflicts(after uint64) ([]TrustConflict, uint64, <-chan struct{}) {
	cs, total, next := d.n.trust.Conflicts(after)
	out := make([]TrustConflict, len(cs))
	for i, c := range cs {
		out[i] = TrustConflict(c)
	}
	return out, total, next
}

// Invite creates a one-time invitation to this mesh on terms it, for `iacp-node init --join`
// (docs/trust.md, "Founding, inviting, joining"); only the mesh authority's node can.
func (d TrustDesk) Invite(it authority.InviteTerms) (token string, expires time.Time, err error) {
	return d.n.trust.Invite(it)
}

// Revoke revokes the certificates that target names, an agent id or a certificate id, and
// broadcasts the new revocation list; only the mesh authority's node can. It returns the
// certificates revoked (with o.DryRun, those it would revoke).
func (d TrustDesk) Revoke(ctx context.Context, target string, o RevokeOptions) ([]IssuedCertificate, error) {
	return d.n.trust.Revoke(ctx, target, trust.RevokeOptions(o))
}

// Certificates returns the unexpired certificates the mesh authority issued, revoked or not;
// only the mesh authority's node has them.
func (d TrustDesk) Certificates() ([]IssuedCertificate, error) { return d.n.trust.Certificates() }

// RevocationSeq returns the seq of the mesh's revocation list this node holds: 0 before the
// first list, and in the open modes.
func (d TrustDesk) RevocationSeq() uint64 { return d.n.trust.RevocationSeq() }

// Token obtains an A2ACP token from the mesh authority for this node's agent to call
// req.TargetAgentID with req.RequestedCapabilities: what `POST /auth/token` answers.
func (d TrustDesk) Token(ctx context.Context, req TokenRequest) (*authority.Token, error) {
	return d.n.trust.Token(ctx, trust.TokenRequest(req))
}
