package authority

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// Invitation format and bounds.
const (
	// InvitePrefix starts every encoded invitation and names its version.
	InvitePrefix = "iacp-invite-v1."
	// MaxInviteBytes bounds an encoded invitation; DecodeInvite refuses a longer one.
	MaxInviteBytes = 8 << 10
	// MaxInviteAddrs bounds the bootstrap addresses of an invitation.
	MaxInviteAddrs = 16
	// InviteSecretSize is the size of an invitation secret: 256 random bits.
	InviteSecretSize = 32
	// proofContext is the domain separation of join proofs.
	proofContext = "iacp-join/v1\n"
)

// Invite is an invitation to join a mesh: what a new agent's operator pastes.
type Invite struct {
	// Addrs are multiaddrs, each ending in /p2p/<peer id>, of bootstrap peers (the
	// authority's own node among them).
	Addrs []string
	// Authority is the mesh id.
	Authority string
	// AuthorityKey is the mesh authority key. It is not encoded separately: an Ed25519 peer
	// id embeds its key, so DecodeInvite extracts it from Authority, and Encode derives
	// Authority from it when Authority is empty.
	AuthorityKey crypto.PubKey
	// Secret is the invitation secret (InviteSecretSize random bytes).
	Secret []byte
	// AgentID, when set, is the only agent id the invitation admits.
	AgentID string
	// Expires is when the invitation lapses (kept to the second).
	Expires time.Time
}

// inviteJSON is the encoded form of an Invite.
type inviteJSON struct {
	Addrs     []string `json:"addrs"`
	Authority string   `json:"authority"`
	Secret    string   `json:"secret"`
	AgentID   string   `json:"agent,omitempty"`
	Expires   int64    `json:"exp"`
}

// Encode returns the invitation as InvitePrefix and base64url JSON: one line of about 300
// characters with one bootstrap address.
func (inv Invite) Encode() string {
	auth := inv.Authority
	if auth == "" && inv.AuthorityKey != nil {
		if id, err := peer.IDFromPublicKey(inv.AuthorityKey); err == nil {
			auth = id.String()
		}
	}
	b, _ := json.Marshal(inviteJSON{
		Addrs: inv.Addrs, Authority: auth, Secret: b64.EncodeToString(inv.Secret),
		AgentID: inv.AgentID, Expires: inv.Expires.Unix(),
	})
	return InvitePrefix + b64.EncodeToString(b)
}

// inviteError is a refused invitation.
func inviteError(format string, args ...any) error {
	return protocol.Errorf(protocol.CodePayloadInvalid, "invitation: "+format, args...)
}

// DecodeInvite decodes an encoded invitation (white space around it is ignored) and checks it:
// the mesh id must be an Ed25519 peer id (its key becomes AuthorityKey), the secret
// InviteSecretSize bytes, between 1 and MaxInviteAddrs addresses each with /p2p/, a valid
// agent id if any, and an expiry. It does not check the expiry against a clock. Errors are
// *protocol.Error with CodePayloadInvalid.
func DecodeInvite(s string) (Invite, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxInviteBytes {
		return Invite{}, inviteError("%d bytes, more than %d", len(s), MaxInviteBytes)
	}
	body, ok := strings.CutPrefix(s, InvitePrefix)
	if !ok {
		return Invite{}, inviteError("does not start with %q", InvitePrefix)
	}
	b, err := b64.DecodeString(body)
	if err != nil {
		return Invite{}, inviteError("not base64url after the prefix (was it cut when pasted?): %v", err)
	}
	var j inviteJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Invite{}, inviteError("not the JSON of an invitation: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Invite{}, inviteError("data after the JSON object")
	}
	inv := Invite{Addrs: j.Addrs, Authority: j.Authority, AgentID: j.AgentID}
	id, err := peer.Decode(j.Authority)
	if err != nil {
		return Invite{}, inviteError("authority %q is not a peer id: %v", j.Authority, err)
	}
	if id.String() != j.Authority {
		return Invite{}, inviteError("authority %q is not in the canonical peer id form %s", j.Authority, id)
	}
	if inv.AuthorityKey, err = id.ExtractPublicKey(); err != nil || inv.AuthorityKey.Type() != crypto.Ed25519 {
		return Invite{}, inviteError("authority %s is not an Ed25519 peer id, which a mesh id must be", j.Authority)
	}
	if inv.Secret, err = b64.DecodeString(j.Secret); err != nil || len(inv.Secret) != InviteSecretSize {
		return Invite{}, inviteError("the secret is not %d bytes of base64url", InviteSecretSize)
	}
	if len(j.Addrs) == 0 || len(j.Addrs) > MaxInviteAddrs {
		return Invite{}, inviteError("%d bootstrap addresses; from 1 to %d are allowed", len(j.Addrs), MaxInviteAddrs)
	}
	for _, a := range j.Addrs {
		if !strings.HasPrefix(a, "/") || !strings.Contains(a, "/p2p/") || len(a) > 1024 {
			return Invite{}, inviteError("address %.80q is not a multiaddr with /p2p/<peer id>", a)
		}
	}
	if j.AgentID != "" {
		if err := protocol.ValidateAgentID(j.AgentID); err != nil {
			return Invite{}, inviteError("agent: %v", err)
		}
	}
	if j.Expires <= 0 {
		return Invite{}, inviteError("no expiry")
	}
	inv.Expires = time.Unix(j.Expires, 0).UTC()
	return inv, nil
}

// InviteID returns the public name of the invitation with secret: base64url SHA-256 of it.
// A joiner sends it in place of the secret.
func InviteID(secret []byte) string {
	h := sha256.Sum256(secret)
	return b64.EncodeToString(h[:])
}

// Proof returns the joiner's proof that it holds secret, bound to its peer id and agent id:
// HMAC-SHA256 keyed by secret over "iacp-join/v1\n" + peer id + "\n" + agent id.
func Proof(secret []byte, p peer.ID, agentID string) []byte {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s%s\n%s", proofContext, p.String(), agentID)
	return m.Sum(nil)
}
