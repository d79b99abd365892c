package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/protocol"
)

// trustStore decides which peer may speak for which agent id. With an allowlist only the
// listed pairs may; otherwise the first peer whose message for an agent id the node accepts
// is pinned to it (trust on first use; check never pins, pin does, after every other rule
// passed), and the pin is saved in the data directory. The pins are bounded (pinTable): a
// peer may hold maxPinsPerPeer of them, and a full table takes from the peer holding the
// most. Its state is guarded by mu; the file is written outside it.
type trustStore struct {
	mu        sync.Mutex
	pinsFile  string // "" keeps pins in memory only
	dirty     bool   // pins added or forgotten since the last save
	pins      *pinTable
	allowlist map[string]peer.ID // nil: trust on first use
	saveMu    sync.Mutex         // one save at a time, in order
	now       func() time.Time

	// conflicts holds the last maxConflicts claims that contradicted a binding, oldest
	// first; conflictSeq numbers them and counts them all. changed is closed and replaced at
	// each new one.
	conflicts   []TrustConflict
	conflictSeq uint64
	changed     chan struct{}
}

// maxConflicts bounds the conflicts kept for `trust conflicts` and the event stream; the
// count (iacp_trust_conflicts_total) goes on.
const maxConflicts = 256

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
// a message or heartbeat that was refused (or ignored) for it. Under trust on first use it
// is how an operator learns that an attacker spoke first, or that an agent moved to a new
// key; `iacp-node trust forget` lets the id be pinned again.
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
	// Source is what carried the claim: "message" or "heartbeat" (open mode, allowlist), or
	// "certificate": in authority mode, a second peer certified for an agent id that the
	// first, Bound, holds (authority.Certificate.Precedes decides which is first).
	Source string `json:"source"`
}

// Where a claim on an agent id came from, for TrustConflict.Source.
const (
	claimMessage     = "message"
	claimHeartbeat   = "heartbeat"
	claimCertificate = "certificate"
)

func newTrustStore(dataDir, allowlistFile string, maxPins int, now func() time.Time) (*trustStore, error) {
	if maxPins <= 0 {
		maxPins = DefaultMaxPins
	}
	t := &trustStore{pins: newPinTable(maxPins, maxPinsPerPeer), now: now, changed: make(chan struct{})}
	if dataDir != "" {
		t.pinsFile = filepath.Join(dataDir, "trust.json")
		if err := t.load(); err != nil {
			return nil, err
		}
	}
	if allowlistFile != "" {
		al, err := readAllowlist(allowlistFile)
		if err != nil {
			return nil, err
		}
		t.allowlist = al
	}
	return t, nil
}

// check returns nil when p may speak for agentID: it is allowlisted for it, or (trust on
// first use) agentID is pinned to p or to nobody. A claim that contradicts a binding is
// recorded as a TrustConflict from source; nothing else changes.
func (t *trustStore) check(agentID string, p peer.ID, source string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.allowlist != nil {
		want, ok := t.allowlist[agentID]
		if !ok {
			return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is not in this closed mesh's allowlist", agentID)
		}
		if want != p {
			t.conflictLocked(agentID, want, p, source)
			return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is allowlisted for peer %s, not %s", agentID, want, p)
		}
		return nil
	}
	want, ok := t.pins.get(agentID)
	switch {
	case ok && want != p:
		t.conflictLocked(agentID, want, p, source)
		return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is pinned to peer %s, not %s (if the agent moved to a new key, run `iacp-node trust forget %s` on this node)", agentID, want, p, agentID)
	case !ok && t.pins.full(p):
		return protocol.Errorf(protocol.CodeIdentityInvalid, "peer %s already speaks for %d agent ids, the most one peer may under trust on first use; it may not claim %s", p, maxPinsPerPeer, agentID)
	}
	return nil
}

// pin binds agentID to p on first use, after a message of p for agentID passed every check
// and was accepted. A pin to another peer (two peers raced for a new id) is kept.
func (t *trustStore) pin(agentID string, p peer.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.allowlist != nil {
		return
	}
	if t.pins.use(agentID, p, t.now()) {
		t.dirty = true
	}
}

// pinnedTo reports whether agentID is bound to p: allowlisted for it, or pinned to it.
func (t *trustStore) pinnedTo(agentID string, p peer.ID) bool {
	q, ok := t.peerOf(agentID)
	return ok && q == p
}

// conflict records a claim on agentID by claimant that contradicts its binding to bound.
func (t *trustStore) conflict(agentID string, bound, claimant peer.ID, source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conflictLocked(agentID, bound, claimant, source)
}

func (t *trustStore) conflictLocked(agentID string, bound, claimant peer.ID, source string) {
	t.conflictSeq++
	if len(t.conflicts) == maxConflicts {
		t.conflicts = append(t.conflicts[:0], t.conflicts[1:]...)
	}
	t.conflicts = append(t.conflicts, TrustConflict{Seq: t.conflictSeq, At: t.now().UTC(), AgentID: agentID, Bound: bound, Claimant: claimant, Source: source})
	close(t.changed)
	t.changed = make(chan struct{})
}

// conflictsAfter returns the conflicts kept with a Seq above after, the count of all
// conflicts seen, and a channel closed at the next one.
func (t *trustStore) conflictsAfter(after uint64) ([]TrustConflict, uint64, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []TrustConflict
	for _, c := range t.conflicts {
		if c.Seq > after {
			out = append(out, c)
		}
	}
	return out, t.conflictSeq, t.changed
}

// list returns every binding: the allowlist's pairs, or the pins, sorted by agent id.
func (t *trustStore) list() []Pin {
	t.mu.Lock()
	out := make([]Pin, 0, max(len(t.allowlist), t.pins.len()))
	for a, p := range t.allowlist {
		out = append(out, Pin{AgentID: a, PeerID: p, Allowlisted: true})
	}
	t.pins.each(func(e *pinEntry) {
		out = append(out, Pin{AgentID: e.agent, PeerID: e.peer, Pinned: e.pinned.UTC(), Used: e.used.UTC()})
	})
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Pin) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

// forget removes the pin of agentID, or every pin of peer p when agentID is "", so that the
// next accepted message pins it again; it returns how many pins went. Allowlisted pairs are
// the file's to change.
func (t *trustStore) forget(agentID string, p peer.ID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	switch {
	case agentID != "":
		if t.pins.forget(agentID) {
			n = 1
		}
	case p != "":
		n = t.pins.forgetPeer(p)
	}
	if n > 0 {
		t.dirty = true
	}
	return n
}

// expire forgets the pins no accepted message used since cutoff, and returns how many.
func (t *trustStore) expire(cutoff time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.pins.expire(cutoff)
	if n > 0 {
		t.dirty = true
	}
	return n
}

// flush saves the pins if they changed. The node calls it every second and at Close, so that
// a mesh of hundreds of agents does not rewrite the file once per new agent; a pin lost in a
// crash is pinned again, to the same peer, at its next message. Nothing else rewrites it. The
// pins are copied under the lock and written outside it: the inbound path never waits on the
// disk.
func (t *trustStore) flush() error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	t.mu.Lock()
	if !t.dirty || t.pinsFile == "" {
		t.mu.Unlock()
		return nil
	}
	raw := make(map[string]savedPin, t.pins.len())
	t.pins.each(func(e *pinEntry) {
		raw[e.agent] = savedPin{Peer: e.peer.String(), Pinned: e.pinned.UTC(), Used: e.used.UTC()}
	})
	t.dirty = false
	t.mu.Unlock()
	b, _ := json.MarshalIndent(raw, "", "  ")
	if err := fsutil.WriteFile(t.pinsFile, b, 0o600); err != nil {
		t.mu.Lock()
		t.dirty = true // try again at the next flush
		t.mu.Unlock()
		return protocol.Errorf(protocol.CodeInternalError, "save trust pins: %w", err)
	}
	return nil
}

// len returns how many pins are held.
func (t *trustStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pins.len()
}

// peerOf returns the peer pinned or allowlisted for agentID.
func (t *trustStore) peerOf(agentID string) (peer.ID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.allowlist[agentID]; ok {
		return p, true
	}
	return t.pins.get(agentID)
}

func (t *trustStore) load() error {
	b, err := os.ReadFile(t.pinsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var raw map[string]savedPin
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w (fix or remove the file to re-pin on first use)", t.pinsFile, err)
	}
	type loaded struct {
		agent string
		peer  peer.ID
		savedPin
	}
	all := make([]loaded, 0, len(raw))
	now := t.now()
	for a, s := range raw {
		p, err := peer.Decode(s.Peer)
		if err != nil {
			return fmt.Errorf("%s: agent %s: %w", t.pinsFile, a, err)
		}
		if s.Used.IsZero() { // written before pins kept their times
			s.Pinned, s.Used = now, now
		}
		all = append(all, loaded{a, p, s})
	}
	// Least recently used first, so that each peer's list comes out ordered by use.
	slices.SortFunc(all, func(a, b loaded) int { return a.Used.Compare(b.Used) })
	for _, l := range all {
		t.pins.use(l.agent, l.peer, l.Pinned)
		t.pins.use(l.agent, l.peer, l.Used)
	}
	t.dirty = false
	return nil
}

// savedPin is a pin as trust.json holds it. Files written before pins kept their times hold
// the peer id as a bare string, which UnmarshalJSON still reads.
type savedPin struct {
	Peer   string    `json:"peer"`
	Pinned time.Time `json:"pinned"`
	Used   time.Time `json:"used"`
}

// UnmarshalJSON reads a savedPin or a bare peer id string.
func (s *savedPin) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*s = savedPin{}
		return json.Unmarshal(b, &s.Peer)
	}
	type plain savedPin
	return json.Unmarshal(b, (*plain)(s))
}

// readAllowlist reads a YAML (or JSON) map of agent id to peer id.
func readAllowlist(path string) (map[string]peer.ID, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	var raw map[string]string
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("allowlist %s: want a map of agent id to peer id: %w", path, err)
	}
	out := make(map[string]peer.ID, len(raw))
	for a, s := range raw {
		if err := protocol.ValidateAgentID(a); err != nil {
			return nil, fmt.Errorf("allowlist %s: %w", path, err)
		}
		p, err := peer.Decode(s)
		if err != nil {
			return nil, fmt.Errorf("allowlist %s: agent %s: bad peer id: %w", path, a, err)
		}
		out[a] = p
	}
	return out, nil
}

// Trust modes, as TrustMode reports them.
const (
	// TrustAuthority lets only peers holding an agent certificate of the mesh authority
	// speak for an agent id.
	TrustAuthority = "authority"
	// TrustOpen pins each agent id to the first peer whose message for it the node accepts.
	TrustOpen = "open"
	// TrustAllowlist lets only the allowlist file's pairs speak.
	TrustAllowlist = "allowlist"
)

// TrustMode says how this node decides who may speak for an agent id: TrustAuthority,
// TrustOpen or TrustAllowlist.
func (n *Node) TrustMode() string {
	if n.certs != nil {
		return TrustAuthority
	}
	if n.trust.allowlist != nil {
		return TrustAllowlist
	}
	return TrustOpen
}

// TrustPins returns every binding of an agent id to a peer that this node holds: the pins
// taken on first use, or the allowlist's pairs, sorted by agent id.
func (n *Node) TrustPins() []Pin { return n.trust.list() }

// ForgetTrust forgets the pin of agentID, or every pin of peer p when agentID is "", so that
// the next message this node accepts for the id pins it again (an agent that moved to a new
// key, or a first claim that was an attacker's). It also drops the directory's entries for
// what it forgot. It returns how many pins went; allowlisted pairs are the allowlist file's to
// change.
func (n *Node) ForgetTrust(agentID string, p peer.ID) int {
	k := n.trust.forget(agentID, p)
	if agentID != "" {
		n.directory.Remove(agentID)
		return k
	}
	for _, a := range n.directory.Keys() {
		if q, ok := n.directory.Peek(a); ok && q == p {
			n.directory.Remove(a)
		}
	}
	return k
}

// TrustConflicts returns the conflicts kept with a Seq above after (the last 256), the count
// of all conflicts this node saw, and a channel that is closed at the next one.
func (n *Node) TrustConflicts(after uint64) ([]TrustConflict, uint64, <-chan struct{}) {
	return n.trust.conflictsAfter(after)
}
