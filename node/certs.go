package node

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/internal/fsutil"
	"github.com/iacp-node/iacp-node/protocol"
)

// errNoCert says the book holds no certificate for a peer yet.
var errNoCert = errors.New("no verified certificate yet")

// certBook is the authority mode's memory: the certificates it verified, per peer, and the
// revocation list. A certificate is verified once (signature, expiry, agent id, the peer's key
// as its confirmation claim) and kept until it expires or is revoked; a peer whose
// certificate failed is remembered for certRetryAfter, so that nobody makes the node verify
// or fetch the same bad certificate in a loop. Both caches are bounded (max_agents).
type certBook struct {
	v       *authority.Verifier
	self    peer.ID
	h       host.Host
	log     *slog.Logger
	now     func() time.Time
	crlFile string // where the newest revocation list is kept; "" keeps it in memory

	own atomic.Pointer[authority.Certificate]

	byPeer *lru.Cache[peer.ID, *authority.Certificate]
	failed *lru.Cache[peer.ID, failure]
	// stalled keeps when each peer last let a certificate request run into its deadline
	// (stallMemory).
	stalled *lru.Cache[peer.ID, time.Time]
	// mu guards the fetches under way: inflight, one per peer whose certificate is fetched,
	// and pending, how many go through each peer asked (certFetchesPerPeer). slots bounds
	// them node-wide (certFetchers).
	mu       sync.Mutex
	inflight map[peer.ID]*pendingFetch
	pending  map[peer.ID]int
	slots    chan struct{}
	// allow charges one certificate request to the asking peer (the node's message rate), so
	// that nobody makes the node answer, or send its revocation list, without bound.
	allow func(p peer.ID) error

	// holders holds, per agent id, its holder's certificate: of the valid certificates for
	// the id that the book verified, the one that Precedes the others. holdMu orders its
	// compare-and-replace.
	holdMu  sync.Mutex
	holders *lru.Cache[string, *authority.Certificate]
	// onConflict is told of two certified peers for one agent id: the id stays with bound,
	// its first holder, and claimant is refused. reported keeps when each claimant was last
	// told of, so that a conflict is reported once per certRetryAfter however often the
	// claimant's messages and records are checked.
	onConflict func(agentID string, bound, claimant peer.ID)
	reported   *lru.Cache[string, time.Time]

	// onRevoked is told of each verified certificate a new revocation list revokes (the
	// node drops its agent from the liveness table).
	onRevoked atomic.Pointer[func(*authority.Certificate)]
}

type failure struct {
	at  time.Time
	err error
}

func newCertBook(v *authority.Verifier, h host.Host, size int, crlFile string, allow func(peer.ID) error, now func() time.Time, log *slog.Logger) (*certBook, error) {
	byPeer, err := lru.New[peer.ID, *authority.Certificate](size)
	if err != nil {
		return nil, err
	}
	failed, err := lru.New[peer.ID, failure](size)
	if err != nil {
		return nil, err
	}
	holders, err := lru.New[string, *authority.Certificate](size)
	if err != nil {
		return nil, err
	}
	reported, err := lru.New[string, time.Time](maxConflicts)
	if err != nil {
		return nil, err
	}
	stalled, err := lru.New[peer.ID, time.Time](size)
	if err != nil {
		return nil, err
	}
	b := &certBook{v: v, self: h.ID(), h: h, log: log, now: now, crlFile: crlFile, allow: allow, byPeer: byPeer, failed: failed,
		holders: holders, reported: reported, onConflict: func(string, peer.ID, peer.ID) {}, stalled: stalled,
		inflight: make(map[peer.ID]*pendingFetch), pending: make(map[peer.ID]int), slots: make(chan struct{}, certFetchers)}
	if crlFile != "" {
		raw, err := os.ReadFile(crlFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("revocation list: %w", err)
		default:
			if _, err := v.ApplyRevocations(string(raw)); err != nil {
				return nil, fmt.Errorf("revocation list %s: %w (remove it to fetch the list again from the mesh)", crlFile, err)
			}
		}
	}
	return b, nil
}

// setOwn verifies and installs this node's own certificate for agentID.
func (b *certBook) setOwn(raw, agentID string) (*authority.Certificate, error) {
	c, err := b.v.Certificate(raw, b.self, agentID)
	if err != nil {
		return nil, err
	}
	b.own.Store(c)
	b.byPeer.Add(b.self, c)
	b.holds(c)
	return c, nil
}

// checkRaw verifies the certificate raw for agentID on p, as a DHT record carries it. A record
// is validated each time a store or a lookup compares it, so the certificate the book already
// verified for p is not verified again; a new one is verified and kept.
func (b *certBook) checkRaw(raw, agentID string, p peer.ID) error {
	if c, ok := b.byPeer.Peek(p); ok && c.Raw == raw {
		if err := b.check(agentID, p); !errors.Is(err, errNoCert) {
			return err
		}
	}
	c, err := b.v.Certificate(raw, p, agentID)
	if err != nil {
		return err
	}
	return b.admit(c)
}

// admit keeps c, a certificate that just verified, unless another peer holds its agent id
// first: then c is refused, remembered as failed for certRetryAfter (whoever passed it on),
// and the conflict reported.
func (b *certBook) admit(c *authority.Certificate) error {
	if err := b.holds(c); err != nil {
		b.byPeer.Remove(c.Peer)
		b.failed.Add(c.Peer, failure{at: b.now(), err: err})
		return err
	}
	b.byPeer.Add(c.Peer, c)
	b.failed.Remove(c.Peer)
	return nil
}

// holds returns nil when c's peer holds c's agent id: no other peer's valid certificate for
// the id precedes c (authority.Certificate.Precedes). c becomes the id's holder then, and a
// holder it displaces is reported as a conflict. Otherwise the error names the holder: an
// agent id has one holder, so that a second certificate for it, however it was made, takes
// nothing from the first.
func (b *certBook) holds(c *authority.Certificate) error {
	b.holdMu.Lock()
	h, ok := b.holders.Peek(c.AgentID)
	if ok && h.Peer != c.Peer && b.stands(h) && !c.Precedes(h) {
		b.holdMu.Unlock()
		b.conflict(c.AgentID, h.Peer, c.Peer)
		return protocol.Errorf(protocol.CodeIdentityInvalid, "agent %s is held by peer %s (certified since %s); peer %s shows a second certificate for it (%s): refused and reported as a conflict; the mesh's operator revokes the wrong one with iacp-node revoke CERTIFICATE_ID",
			c.AgentID, h.Peer, h.HeldSince.UTC().Format(time.RFC3339), c.Peer, c.ID)
	}
	if !ok || h.ID != c.ID {
		b.holders.Add(c.AgentID, c)
	}
	b.holdMu.Unlock()
	if ok && h.Peer != c.Peer && b.stands(h) {
		b.conflict(c.AgentID, c.Peer, h.Peer)
	}
	return nil
}

// conflict reports claimant's certificate for agentID, which bound holds, once per
// certRetryAfter.
func (b *certBook) conflict(agentID string, bound, claimant peer.ID) {
	key := agentID + " " + string(claimant)
	now := b.now()
	if at, ok := b.reported.Get(key); ok && now.Sub(at) < certRetryAfter {
		return
	}
	b.reported.Add(key, now)
	b.log.Warn("two peers are certified for one agent id; the first holder keeps it", "agent", agentID, "holder", bound, "refused", claimant)
	b.onConflict(agentID, bound, claimant)
}

// stands reports whether c is neither revoked nor expired.
func (b *certBook) stands(c *authority.Certificate) bool {
	return !b.v.Revoked(c.ID) && c.Expires.After(b.now())
}

// check reports whether a certificate the book holds binds agentID to p: nil, an error
// saying why not, or errNoCert when it holds none (nor a recent failure) for p.
func (b *certBook) check(agentID string, p peer.ID) error {
	if c, ok := b.byPeer.Get(p); ok {
		switch {
		case b.v.Revoked(c.ID):
			return protocol.Errorf(protocol.CodeIdentityInvalid, "the certificate of agent %s on peer %s (%s) was revoked by the mesh authority", c.AgentID, p, c.ID)
		case !c.Expires.After(b.now()):
			b.byPeer.Remove(p) // fetch the renewed one
			return errNoCert
		case c.AgentID != agentID:
			return protocol.Errorf(protocol.CodeIdentityInvalid, "peer %s is certified for agent %s, not %s", p, c.AgentID, agentID)
		}
		return b.admit(c) // a certificate that precedes c may have come since
	}
	if f, ok := b.failed.Get(p); ok && b.now().Sub(f.at) < certRetryAfter {
		return f.err
	}
	return errNoCert
}

// applyRevocations applies a revocation list if it is newer than the one held, and keeps it.
// A refused list is the error; the caller decides how loudly to say so.
func (b *certBook) applyRevocations(raw string) error {
	changed, err := b.v.ApplyRevocations(raw)
	if err != nil || !changed {
		return err
	}
	b.saveRevocations()
	b.ownRevoked()
	if f := b.onRevoked.Load(); f != nil {
		for _, c := range b.revokedHeld() {
			(*f)(c)
		}
	}
	return nil
}

// revokedHeld returns the verified certificates of other peers that the list in force
// revokes. They stay in the book: a check of their peer fails on the list, naming it.
func (b *certBook) revokedHeld() []*authority.Certificate {
	var out []*authority.Certificate
	for _, p := range b.byPeer.Keys() {
		if c, ok := b.byPeer.Peek(p); ok && p != b.self && b.v.Revoked(c.ID) {
			out = append(out, c)
		}
	}
	return out
}

// saveRevocations keeps the list in force in crlFile.
func (b *certBook) saveRevocations() {
	b.log.Info("revocation list applied", "seq", b.v.RevocationSeq())
	if b.crlFile != "" {
		if err := fsutil.WriteFile(b.crlFile, []byte(b.v.CurrentRevocations()), 0o600); err != nil {
			b.log.Error("saving the revocation list", "err", err.Error())
		}
	}
}

// ownRevoked says so loudly when the list in force revokes this node's own certificate: no
// other node believes it any more.
func (b *certBook) ownRevoked() {
	if c := b.own.Load(); c != nil && b.v.Revoked(c.ID) {
		b.log.Error("the mesh authority revoked this node's certificate: other nodes refuse its messages; ask the mesh's operator for a new invitation", "certificate", c.ID, "agent", c.AgentID)
	}
}
