package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

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
}

// DefaultMaxPins bounds the trust-on-first-use pins: 100,000 agents, about 10 MiB and a
// trust.json of about 9 MB. Beyond it the peer holding the most pins loses its least
// recently used one; that agent is pinned again at its next accepted message.
const DefaultMaxPins = 100_000

func newTrustStore(dataDir, allowlistFile string, maxPins int) (*trustStore, error) {
	if maxPins <= 0 {
		maxPins = DefaultMaxPins
	}
	t := &trustStore{pins: newPinTable(maxPins, maxPinsPerPeer)}
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
// first use) agentID is pinned to p or to nobody. It changes nothing.
func (t *trustStore) check(agentID string, p peer.ID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.allowlist != nil {
		want, ok := t.allowlist[agentID]
		if !ok {
			return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is not in this closed mesh's allowlist", agentID)
		}
		if want != p {
			return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is allowlisted for peer %s, not %s", agentID, want, p)
		}
		return nil
	}
	want, ok := t.pins.get(agentID)
	switch {
	case ok && want != p:
		return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is pinned to peer %s, not %s", agentID, want, p)
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
	if t.pins.use(agentID, p) {
		t.dirty = true
	}
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
	raw := make(map[string]string, t.pins.len())
	t.pins.each(func(a string, p peer.ID) { raw[a] = p.String() })
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
	var raw map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("%s: %w (fix or remove the file to re-pin on first use)", t.pinsFile, err)
	}
	for a, s := range raw {
		p, err := peer.Decode(s)
		if err != nil {
			return fmt.Errorf("%s: agent %s: %w", t.pinsFile, a, err)
		}
		t.pins.use(a, p)
	}
	t.dirty = false
	return nil
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
