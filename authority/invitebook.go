package authority

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// InviteBook bounds and defaults.
const (
	// DefaultInviteTTL is an invitation's lifetime when Create is given 0.
	DefaultInviteTTL = 24 * time.Hour
	// MaxInviteTTL is the longest lifetime Create grants.
	MaxInviteTTL = 30 * 24 * time.Hour
	// MaxInvites bounds the invitations a book holds (outstanding, and used until they
	// expire), and so the size of its file (about 300 bytes each).
	MaxInvites = 10_000
	// maxBookBytes bounds the book file read by OpenInviteBook.
	maxBookBytes = 16 << 20
	// inviteIDPrefix is how many characters of an invitation id List shows.
	inviteIDPrefix = 12
)

// InviteBook is the authority's record of the invitations it issued, in a JSON file of mode
// 0600 rewritten atomically on every change. It holds each secret (see the package doc for
// why), so the file is as secret as the authority key. One process owns a book; mu
// serialises its methods.
type InviteBook struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	entries map[string]*bookEntry // by id
}

// bookFile is the file's content.
type bookFile struct {
	Version int         `json:"version"`
	Invites []bookEntry `json:"invites"`
}

// bookEntry is one invitation.
type bookEntry struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"`
	AgentID string    `json:"agent_id,omitempty"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	UsedAt  time.Time `json:"used_at,omitzero"`
	UsedBy  peer.ID   `json:"used_by,omitempty"`
	// UsedFor is the agent id it was redeemed for.
	UsedFor string `json:"used_for,omitempty"`
	// Grants are the permissions the certificate issued for it grants.
	Grants []string `json:"grants,omitempty"`
	// Replace says the joiner replaces whichever peer holds AgentID now (InviteTerms).
	Replace bool `json:"replace,omitempty"`
	// issued is the certificate issued for it (Issued), kept in memory only: a redemption
	// asked again after a restart of the authority's node gets a new certificate.
	issued string
}

// redeemedBy says whether the entry was redeemed by peer p for agentID: asked again, that
// redemption is answered again (the first answer was lost on its way).
func (e *bookEntry) redeemedBy(p peer.ID, agentID string) bool {
	return !e.UsedAt.IsZero() && p != "" && e.UsedBy == p && e.UsedFor == agentID
}

// InviteTerms are what an invitation grants its holder.
type InviteTerms struct {
	// AgentID binds the invitation to one agent id; "" lets the joiner choose any id that no
	// other peer holds.
	AgentID string
	// TTL is how long it is valid: DefaultInviteTTL when 0, at most MaxInviteTTL.
	TTL time.Duration
	// Grants are the permissions the certificate issued for it grants.
	Grants []string
	// Replace lets the joiner take AgentID (which it then must name) from the peer that holds
	// it now: that peer's certificates are revoked when the joiner's is issued. It is how an
	// operator moves an agent to a new key; without it, an id held by another peer is refused.
	Replace bool
}

// Redemption is what RedeemProof grants.
type Redemption struct {
	// Grants are the permissions the certificate issued for the invitation grants.
	Grants []string
	// Replace says the certificate replaces the agent id's current holder (InviteTerms).
	Replace bool
	// Again says that the same peer redeemed the invitation for the same agent before: its
	// answer was lost (a timeout, a dropped connection), and it asks again.
	Again bool
	// Cert is, when Again, the certificate issued the first time (given to Issued), to be
	// answered again as it is; "" when the book does not hold it (the authority's node
	// restarted since, or the first redemption is still being answered): issue another.
	Cert string
}

// InviteInfo describes one invitation for people (iacp-node invite --list).
type InviteInfo struct {
	// IDPrefix is the start of the invitation id (InviteID of its secret).
	IDPrefix string
	// AgentID is the agent id it is bound to, "" if any.
	AgentID string
	// Grants are the permissions the certificate issued for it grants.
	Grants []string
	// Replace says the joiner replaces the agent id's current holder.
	Replace bool
	// Created and Expires bound its life.
	Created, Expires time.Time
	// Used says whether it was redeemed, when, and by which peer (unknown for Redeem).
	Used   bool
	UsedAt time.Time
	UsedBy peer.ID
}

// OpenInviteBook opens the book at path; a missing file is an empty book, created at the first
// Create. now is the clock (time.Now when nil). It refuses a file others can read and a file
// whose entries do not match their ids.
func OpenInviteBook(path string, now func() time.Time) (*InviteBook, error) {
	if now == nil {
		now = time.Now
	}
	b := &InviteBook{path: path, now: now, entries: map[string]*bookEntry{}}
	var file bookFile
	ok, err := readVersionedFile(path, "invitation book", maxBookBytes, true, &file)
	if err != nil {
		return nil, err
	}
	if !ok {
		return b, nil
	}
	for i := range file.Invites {
		e := &file.Invites[i]
		secret, err := b64.DecodeString(e.Secret)
		if err != nil || len(secret) != InviteSecretSize || InviteID(secret) != e.ID || b.entries[e.ID] != nil {
			return nil, fmt.Errorf("invitation book %s is damaged: entry %d has a bad secret or id", path, i)
		}
		b.entries[e.ID] = e
	}
	return b, nil
}

// Create records a new invitation on terms t and returns its secret once it is on disk.
func (b *InviteBook) Create(t InviteTerms) (secret []byte, expires time.Time, err error) {
	agentID, grants := t.AgentID, t.Grants
	if agentID != "" {
		if err := protocol.ValidateAgentID(agentID); err != nil {
			return nil, time.Time{}, fmt.Errorf("invitation: %w", err)
		}
	} else if t.Replace {
		return nil, time.Time{}, errors.New("invitation: replace needs the agent id whose holder it replaces")
	}
	ttl, err := checkTTL("ttl", t.TTL, DefaultInviteTTL, MaxInviteTTL)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("invitation: %w", err)
	}
	if err := checkGrants(grants); err != nil {
		return nil, time.Time{}, fmt.Errorf("invitation: %w", err)
	}
	secret = make([]byte, InviteSecretSize)
	if _, err := rand.Read(secret); err != nil {
		return nil, time.Time{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now().UTC().Truncate(time.Second)
	next := b.pruned(now)
	if len(next) >= MaxInvites {
		return nil, time.Time{}, fmt.Errorf("invitation: %w: %d held, until some expire", ErrInviteBookFull, len(next))
	}
	e := &bookEntry{ID: InviteID(secret), Secret: b64.EncodeToString(secret), AgentID: agentID, Created: now, Expires: now.Add(ttl), Grants: slices.Clone(grants), Replace: t.Replace}
	next[e.ID] = e
	if err := b.commit(next); err != nil {
		return nil, time.Time{}, err
	}
	return secret, e.Expires, nil
}

// Redeem redeems the invitation with secret for agentID: see RedeemProof, which joiners use.
// It names no peer, so it never succeeds twice.
func (b *InviteBook) Redeem(secret []byte, agentID string) error {
	_, err := b.redeem(InviteID(secret), "", agentID, func(e *bookEntry) bool {
		want, err := b64.DecodeString(e.Secret)
		return err == nil && subtle.ConstantTimeCompare(want, secret) == 1
	})
	return err
}

// RedeemProof redeems the invitation named inviteID (InviteID of its secret) for agent agentID
// on peer p, given the joiner's proof (Proof of the secret, p and agentID). It refuses an
// unknown invitation or a proof that does not match (IDENTITY_INVALID: ErrInviteUnknown,
// ErrInviteProof), then one used by another peer or for another agent, an expired one, or one
// bound to another agent (PERMISSION_DENIED: ErrInviteUsed, ErrInviteExpired,
// ErrInviteAgent). On success the invitation is marked used on disk before RedeemProof
// returns. It succeeds again only for the peer and agent that redeemed it, whose first answer
// was lost (Redemption.Again): an invitation binds one agent to one peer, once.
func (b *InviteBook) RedeemProof(inviteID string, proof []byte, p peer.ID, agentID string) (Redemption, error) {
	return b.redeem(inviteID, p, agentID, func(e *bookEntry) bool {
		secret, err := b64.DecodeString(e.Secret)
		return err == nil && hmac.Equal(Proof(secret, p, agentID), proof)
	})
}

// Replaces reports whether the invitation named inviteID lets its joiner replace the holder of
// its agent id (InviteTerms.Replace); false for an unknown one.
func (b *InviteBook) Replaces(inviteID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[inviteID]
	return e != nil && e.Replace
}

// Issued keeps cert, the certificate issued for the invitation inviteID that RedeemProof
// granted, so that a redemption asked again is answered with it.
func (b *InviteBook) Issued(inviteID, cert string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.entries[inviteID]; e != nil && !e.UsedAt.IsZero() {
		e.issued = cert
	}
}

// redeem is Redeem and RedeemProof: look up id, check the holder with match, then the state.
func (b *InviteBook) redeem(id string, p peer.ID, agentID string, match func(*bookEntry) bool) (Redemption, error) {
	if err := protocol.ValidateAgentID(agentID); err != nil {
		return Redemption{}, err
	}
	short := id
	if len(short) > inviteIDPrefix {
		short = short[:inviteIDPrefix]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e := b.entries[id]
	switch {
	case e == nil:
		return Redemption{}, protocol.Errorf(protocol.CodeIdentityInvalid, "invitation %q: %w (never issued, or expired)", short, ErrInviteUnknown)
	case !match(e):
		return Redemption{}, protocol.Errorf(protocol.CodeIdentityInvalid, "invitation %s: %w", short, ErrInviteProof)
	case !e.UsedAt.IsZero() && !e.redeemedBy(p, agentID):
		return Redemption{}, protocol.Errorf(protocol.CodePermissionDenied, "invitation %s: %w at %s", short, ErrInviteUsed, fmtTime(e.UsedAt))
	case !now.Before(e.Expires):
		return Redemption{}, protocol.Errorf(protocol.CodePermissionDenied, "invitation %s: %w at %s", short, ErrInviteExpired, fmtTime(e.Expires))
	case e.AgentID != "" && e.AgentID != agentID:
		return Redemption{}, protocol.Errorf(protocol.CodePermissionDenied, "invitation %s: %w (not %s)", short, ErrInviteAgent, agentID)
	}
	if e.redeemedBy(p, agentID) {
		return Redemption{Grants: slices.Clone(e.Grants), Replace: e.Replace, Again: true, Cert: e.issued}, nil
	}
	next := b.pruned(now)
	used := *e
	used.UsedAt, used.UsedBy, used.UsedFor = now.UTC(), p, agentID
	next[id] = &used
	if err := b.commit(next); err != nil {
		return Redemption{}, protocol.Errorf(protocol.CodeInternalError, "invitation %s: %w", short, err)
	}
	return Redemption{Grants: slices.Clone(e.Grants), Replace: e.Replace}, nil
}

// pruned returns a copy of the entries without those that expired by now. Used entries stay
// until they expire, so that a second redemption is told "already used".
func (b *InviteBook) pruned(now time.Time) map[string]*bookEntry {
	return unexpired(b.entries, now, func(e *bookEntry) time.Time { return e.Expires })
}

// commit writes entries to the file and, once that succeeded, makes them the book's.
func (b *InviteBook) commit(entries map[string]*bookEntry) error {
	file := bookFile{Version: 1, Invites: make([]bookEntry, 0, len(entries))}
	for _, e := range entries {
		file.Invites = append(file.Invites, *e)
	}
	slices.SortFunc(file.Invites, func(x, y bookEntry) int {
		if c := x.Expires.Compare(y.Expires); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	if err := writeJSONFile(b.path, "invitation book", file); err != nil {
		return err
	}
	b.entries = entries
	return nil
}

// List returns the invitations that have not expired, soonest expiry first.
func (b *InviteBook) List() []InviteInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	out := make([]InviteInfo, 0, len(b.entries))
	for _, e := range b.entries {
		if !now.Before(e.Expires) {
			continue
		}
		out = append(out, InviteInfo{
			IDPrefix: e.ID[:inviteIDPrefix], AgentID: e.AgentID, Grants: slices.Clone(e.Grants), Replace: e.Replace, Created: e.Created, Expires: e.Expires,
			Used: !e.UsedAt.IsZero(), UsedAt: e.UsedAt, UsedBy: e.UsedBy,
		})
	}
	slices.SortFunc(out, func(x, y InviteInfo) int {
		if c := x.Expires.Compare(y.Expires); c != 0 {
			return c
		}
		return strings.Compare(x.IDPrefix, y.IDPrefix)
	})
	return out
}

// maxGrants bounds the permissions an invitation grants.
const maxGrants = 64

// checkGrants checks permission names: at most maxGrants, each 1 to 64 printable characters
// without spaces.
func checkGrants(grants []string) error {
	if len(grants) > maxGrants {
		return fmt.Errorf("%d permissions granted, more than %d", len(grants), maxGrants)
	}
	for _, g := range grants {
		if g == "" || len(g) > 64 || strings.ContainsFunc(g, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("permission %q: 1 to 64 printable characters without spaces", g)
		}
	}
	return nil
}
