package discovery

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// cache is the directory cache: agent records by agent id (what Resolve answers) and by the
// peer that signed them (what a capability lookup answers for a provider), and provider sets by
// capability, each kept until min(found + ttl, record expiry). All state is guarded by mu. A
// zero ttl disables caching.
//
// A live cached record is replaced only by one the validator's owner rule prefers (rule.replaces,
// the comparison Select makes when a store decides whether an incoming value replaces the one
// it holds; see docs/discovery.md, "Who may replace a record"). So by peer, and by agent when
// the signer is the same or in authority mode, the higher seq wins and a lower one is ignored
// (a Left record stays as a tombstone, for TombstoneTTL: a stale copy seen meanwhile cannot
// bring the agent back, and the agent itself, back, is found again soon after); in
// open mode another peer's record never takes an agent's entry, but for a live record over a
// tombstone, or the local peer's own record. Once an entry expires, any record may fill it.
//
// A record learned under a peer key (recordOfPeer: a direct fetch or PeerKey lookup) proves only
// what its signer claims. In open mode it is cached by agent id only over a live entry of the
// same signer: it never fills an agent's entry nor takes another peer's, so a provider claiming
// bob's agent id does not change where bob resolves. In authority mode its certificate binds the
// agent to the signer, and it is an agent record like any other.
type cache struct {
	now  func() time.Time
	ttl  time.Duration
	size int
	rule Validator // its replaces decides which of two records stays

	mu        sync.Mutex
	agents    map[string]cacheEntry
	peers     map[peer.ID]cacheEntry
	providers map[capability]providerEntry
}

type cacheEntry struct {
	rec   Record
	found time.Time // when it was admitted
	until time.Time
}

type providerEntry struct {
	peers []peer.ID
	until time.Time
}

// newCache returns a cache of at most size agents (and as many peers) whose entries live ttl at
// most; rule is the record validator, whose owner rule decides replacements.
func newCache(now func() time.Time, ttl time.Duration, size int, rule Validator) *cache {
	return &cache{
		now: now, ttl: ttl, size: size, rule: rule,
		agents: map[string]cacheEntry{}, peers: map[peer.ID]cacheEntry{}, providers: map[capability]providerEntry{},
	}
}

// lookup returns the live cached entry of an agent. found is false when nothing is cached (the
// DHT must be asked); a found tombstone has rec.Left set.
func (c *cache) lookup(agentID string) (rec Record, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return standing(c.agents, agentID, c.now(), c.rule.CertCheck)
}

// lookupPeer returns the live cached record signed by peer id, the record of its agent that
// the peer last claimed.
func (c *cache) lookupPeer(id peer.ID) (Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return standing(c.peers, id, c.now(), c.rule.CertCheck)
}

// standing returns m[k] unless it expired or, in authority mode, its certificate no longer
// stands (check, the validator's CertCheck, refuses it now: revoked, expired, or another peer
// holds the agent id since it was cached): then the entry is dropped, and the DHT asked again.
func standing[K comparable](m map[K]cacheEntry, k K, now time.Time, check func(cert, agentID string, p peer.ID) error) (Record, bool) {
	rec, ok := liveEntry(m, k, now)
	if ok && check != nil && check(rec.Cert, rec.AgentID, rec.PeerID) != nil {
		delete(m, k)
		return Record{}, false
	}
	return rec, ok
}

// liveEntry returns m[k] unless it expired; an expired entry is dropped.
func liveEntry[K comparable](m map[K]cacheEntry, k K, now time.Time) (Record, bool) {
	e, ok := m[k]
	if !ok {
		return Record{}, false
	}
	if !now.Before(e.until) {
		delete(m, k)
		return Record{}, false
	}
	return e.rec, true
}

// put stores a record found under its agent's key (Resolve) or published by this node. It
// returns the record now current for the agent: rec, or the cached one when the owner rule
// keeps that.
func (c *cache) put(rec Record) Record {
	if c.ttl <= 0 {
		return rec
	}
	now, until := c.window(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	admit(c.peers, rec.PeerID, rec, until, now, c.rule, c.size)
	return admit(c.agents, rec.AgentID, rec, until, now, c.rule, c.size)
}

// putPeer stores a record learned under its signer's peer key (recordOfPeer). It returns the
// record now current for the peer: rec, or the cached one of the peer when that has a higher
// seq. By agent id it stores rec only in authority mode or over a live entry of the same
// signer (see cache).
func (c *cache) putPeer(rec Record) Record {
	if c.ttl <= 0 {
		return rec
	}
	now, until := c.window(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := admit(c.peers, rec.PeerID, rec, until, now, c.rule, c.size)
	if held, ok := liveEntry(c.agents, rec.AgentID, now); c.rule.CertCheck != nil || ok && held.PeerID == rec.PeerID {
		admit(c.agents, rec.AgentID, rec, until, now, c.rule, c.size)
	}
	return cur
}

// TombstoneTTL bounds how long a Left record (an agent that left the mesh) is cached: an
// agent that comes back is resolved again within it, not a cache TTL later.
const TombstoneTTL = 5 * time.Second

// window returns the time now and when an entry of rec found now expires: min(now + ttl,
// rec.Expires), and at most TombstoneTTL for a Left record.
func (c *cache) window(rec Record) (now, until time.Time) {
	now = c.now()
	until = now.Add(c.ttl)
	if rec.Left {
		until = now.Add(min(c.ttl, TombstoneTTL))
	}
	if rec.Expires.Before(until) {
		until = rec.Expires
	}
	return now, until
}

// admit stores rec under k in m until until, unless the live entry there stays by the owner
// rule: rule.replaces(cached, rec), which is Select([rec, cached]) keeping the cached record,
// as a store does. It returns the record now current under k. Room is made in a full map.
func admit[K comparable](m map[K]cacheEntry, k K, rec Record, until, now time.Time, rule Validator, size int) Record {
	e, ok := m[k]
	if ok && now.Before(e.until) && rule.replaces(e.rec, rec) {
		return e.rec
	}
	if !now.Before(until) {
		delete(m, k)
		return rec
	}
	if !ok && len(m) >= size {
		makeRoom(m, now, size)
	}
	m[k] = cacheEntry{rec: rec, found: now, until: until}
	return rec
}

// makeRoom drops the expired entries of m and, if it is still full, the entry that expires
// first.
func makeRoom[K comparable](m map[K]cacheEntry, now time.Time, size int) {
	var victim K
	var first time.Time
	found := false
	for k, e := range m {
		if !now.Before(e.until) {
			delete(m, k)
			continue
		}
		if !found || e.until.Before(first) {
			victim, first, found = k, e.until, true
		}
	}
	if len(m) >= size && found {
		delete(m, victim)
	}
}

// drop forgets the record of agentID if it names peer p and was found before before, under
// the agent and under the peer, and reports whether it did. A record found since is the one
// the DHT holds now, and a lookup would find it again; a tombstone stays, since an agent that
// left has no address to have gone stale.
func (c *cache) drop(agentID string, p peer.ID, before time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.agents[agentID]
	if !ok || e.rec.PeerID != p || e.rec.Left || !e.found.Before(before) {
		return false
	}
	delete(c.agents, agentID)
	if q, ok := c.peers[p]; ok && q.rec.AgentID == agentID {
		delete(c.peers, p)
	}
	return true
}

// providersOf returns the cached providers of a capability.
func (c *cache) providersOf(cp capability) ([]peer.ID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.providers[cp]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.until) {
		delete(c.providers, cp)
		return nil, false
	}
	return e.peers, true
}

// putProviders stores the providers of a capability. An empty set is not cached: an agent that
// just advertised must be found by the next lookup.
func (c *cache) putProviders(cp capability, peers []peer.ID) {
	if c.ttl <= 0 || len(peers) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.providers) >= c.size {
		now := c.now()
		for k, e := range c.providers {
			if !now.Before(e.until) {
				delete(c.providers, k)
			}
		}
		if len(c.providers) >= c.size {
			for k := range c.providers {
				delete(c.providers, k)
				break
			}
		}
	}
	c.providers[cp] = providerEntry{peers: append([]peer.ID(nil), peers...), until: c.now().Add(c.ttl)}
}

// forgetProviders drops the cached providers of caps.
func (c *cache) forgetProviders(caps []capability) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cp := range caps {
		delete(c.providers, cp)
	}
}

// len returns the number of cached agents, tombstones included.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.agents)
}
