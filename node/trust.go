package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/protocol"
)

// trustStore decides which peer may speak for which agent id. With an allowlist only the
// listed pairs may; otherwise the first peer whose message for an agent id the node accepts
// is pinned to it (trust on first use; check never pins, pin does, after every other rule
// passed), and the pin is saved in the data directory. The pins are bounded by maxPins:
// beyond it the pin used least recently is forgotten. Its state is guarded by mu.
type trustStore struct {
	mu        sync.Mutex
	pinsFile  string // "" keeps pins in memory only
	dirty     bool   // pins added or forgotten since the last save
	pins      *lru.Cache[string, peer.ID]
	allowlist map[string]peer.ID // nil: trust on first use
}

// DefaultMaxPins bounds the trust-on-first-use pins: 100,000 agents, about 10 MiB and a
// trust.json of about 9 MB. A mesh larger than that forgets the pins of the agents it heard
// from least recently; they are pinned again at their next accepted message.
const DefaultMaxPins = 100_000

func newTrustStore(dataDir, allowlistFile string, maxPins int) (*trustStore, error) {
	if maxPins <= 0 {
		maxPins = DefaultMaxPins
	}
	t := &trustStore{}
	pins, err := lru.NewWithEvict(maxPins, func(string, peer.ID) { t.dirty = true })
	if err != nil {
		return nil, err
	}
	t.pins = pins
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
	if want, ok := t.pins.Get(agentID); ok && want != p {
		return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is pinned to peer %s, not %s", agentID, want, p)
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
	if _, ok := t.pins.Get(agentID); ok {
		return
	}
	t.pins.Add(agentID, p)
	t.dirty = true
}

// flush saves the pins if they changed. The node calls it every second and at Close, so that
// a mesh of hundreds of agents does not rewrite the file once per new agent; a pin lost in a
// crash is pinned again, to the same peer, at its next message. Nothing else rewrites it.
func (t *trustStore) flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil
	}
	if err := t.saveLocked(); err != nil {
		return err
	}
	t.dirty = false
	return nil
}

// len returns how many pins are held.
func (t *trustStore) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pins.Len()
}

// peerOf returns the peer pinned or allowlisted for agentID.
func (t *trustStore) peerOf(agentID string) (peer.ID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.allowlist[agentID]; ok {
		return p, true
	}
	return t.pins.Get(agentID)
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
		t.pins.Add(a, p)
	}
	t.dirty = false
	return nil
}

func (t *trustStore) saveLocked() error {
	if t.pinsFile == "" {
		return nil
	}
	raw := make(map[string]string, t.pins.Len())
	for _, a := range t.pins.Keys() {
		if p, ok := t.pins.Peek(a); ok {
			raw[a] = p.String()
		}
	}
	b, _ := json.MarshalIndent(raw, "", "  ")
	if err := fsutil.WriteFile(t.pinsFile, b, 0o600); err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "save trust pins: %w", err)
	}
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
