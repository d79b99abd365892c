package protocol

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// A process that hosts many nodes (the simulator) verifies every gossiped message once per
// node: N nodes, N verifications of the same bytes. A VerifyCache shared by their Verifiers
// remembers signatures that verified, keyed by SHA-256 over the digest, the signature and the
// signer's peer id, so that the same signed document verifies once per process. Only
// successes are kept, and the key covers everything the Ed25519 check covers, so a forgery
// never hits. A node alone in its process gains nothing from one, so a node has none unless
// its owner passes one in.

// VerifyCache is a bounded set of verified signatures; when full, the oldest half is
// forgotten. It is safe for concurrent use by many Verifiers. Guarded by mu.
type VerifyCache struct {
	mu    sync.Mutex
	max   int
	set   map[[32]byte]struct{}
	order [][32]byte
	hits  atomic.Uint64
}

// NewVerifyCache returns a cache of up to n verified signatures (see above); n <= 0 returns
// nil, no cache.
func NewVerifyCache(n int) *VerifyCache {
	if n <= 0 {
		return nil
	}
	return &VerifyCache{max: n, set: make(map[[32]byte]struct{})} // grows with use, up to n
}

// Hits returns how many verifications the cache has answered; 0 for a nil cache.
func (c *VerifyCache) Hits() uint64 {
	if c == nil {
		return 0
	}
	return c.hits.Load()
}

func verifyCacheKey(digest [32]byte, sig []byte, peerID string) [32]byte {
	h := sha256.New()
	h.Write(digest[:])
	h.Write(sig)
	h.Write([]byte(peerID))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *VerifyCache) has(k [32]byte) bool {
	c.mu.Lock()
	_, ok := c.set[k]
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return ok
}

func (c *VerifyCache) add(k [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[k]; ok {
		return
	}
	if len(c.order) >= c.max {
		half := len(c.order) / 2
		for _, old := range c.order[:half] {
			delete(c.set, old)
		}
		c.order = append(c.order[:0], c.order[half:]...)
	}
	c.set[k] = struct{}{}
	c.order = append(c.order, k)
}
