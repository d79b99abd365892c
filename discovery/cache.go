package discovery

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// cache is the directory cache: agent records by agent id (and peer id) and provider sets by
// capability, each kept until min(found + ttl, record expiry). A record with a higher seq
// replaces the cached one; a lower one is ignored; a Left record evicts the agent and stays as a
// tombstone, so a stale copy seen later cannot bring the agent back. All state is guarded by mu.
// A zero ttl disables caching.
type cache struct {
	now  func() time.Time
	ttl  time.Duration
	size int

	mu        sync.Mutex
	agents    map[string]cacheEntry
	peers     map[peer.ID]string
	providers map[capability]providerEntry
}

type cacheEntry struct {
	rec   Record
	until time.Time
}

type providerEntry struct {
	peers []peer.ID
	until time.Time
}

func newCache(now func() time.Time, ttl time.Duration, size int) *cache {
	return &cache{
		now: now, ttl: ttl, size: size,
		agents: map[string]cacheEntry{}, peers: map[peer.ID]string{}, providers: map[capability]providerEntry{},
	}
}

// lookup returns the live cached entry of an agent. found is false when nothing is cached (the
// DHT must be asked); a found tombstone has rec.Left set.
func (c *cache) lookup(agentID string) (rec Record, found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.agents[agentID]
	if !ok {
		return Record{}, false
	}
	if !c.now().Before(e.until) {
		c.dropLocked(agentID)
		return Record{}, false
	}
	return e.rec, true
}

// lookupPeer is lookup by peer id.
func (c *cache) lookupPeer(id peer.ID) (Record, bool) {
	c.mu.Lock()
	agentID, ok := c.peers[id]
	c.mu.Unlock()
	if !ok {
		return Record{}, false
	}
	r, ok := c.lookup(agentID)
	if ok && r.PeerID != id {
		return Record{}, false
	}
	return r, ok
}

// put stores what a lookup found. It returns the record now current for the agent: rec, or the
// cached one when that has a higher seq.
func (c *cache) put(rec Record) Record {
	if c.ttl <= 0 {
		return rec
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.agents[rec.AgentID]; ok && now.Before(e.until) && e.rec.Seq > rec.Seq {
		return e.rec
	}
	until := now.Add(c.ttl)
	if rec.Expires.Before(until) {
		until = rec.Expires
	}
	if !now.Before(until) {
		c.dropLocked(rec.AgentID)
		return rec
	}
	if _, ok := c.agents[rec.AgentID]; !ok && len(c.agents) >= c.size {
		c.makeRoomLocked(now)
	}
	c.dropLocked(rec.AgentID)
	c.agents[rec.AgentID] = cacheEntry{rec: rec, until: until}
	c.peers[rec.PeerID] = rec.AgentID
	return rec
}

func (c *cache) dropLocked(agentID string) {
	if e, ok := c.agents[agentID]; ok {
		if c.peers[e.rec.PeerID] == agentID {
			delete(c.peers, e.rec.PeerID)
		}
		delete(c.agents, agentID)
	}
}

// makeRoomLocked drops expired entries and, if the cache is still full, the entry that expires
// first.
func (c *cache) makeRoomLocked(now time.Time) {
	var victim string
	var first time.Time
	for id, e := range c.agents {
		if !now.Before(e.until) {
			c.dropLocked(id)
			continue
		}
		if victim == "" || e.until.Before(first) {
			victim, first = id, e.until
		}
	}
	if len(c.agents) >= c.size && victim != "" {
		c.dropLocked(victim)
	}
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

// len returns the number of cached agents, tombstones included.
func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.agents)
}
