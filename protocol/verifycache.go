package protocol

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
)

// A process that hosts many nodes (the simulator) verifies every gossiped message once per
// node: N nodes, N verifications of the same bytes. The verification cache remembers
// signatures that verified, keyed by SHA-256 over the digest, the signature and the signer's
// peer id, so that the same signed document verifies once per process. Only successes are
// kept, and the key covers everything the Ed25519 check covers, so a forgery never hits.
// It is off unless SetVerifyCache turns it on; a node alone in its process gains nothing.

// verifyCache is a bounded set; when full, the oldest half is forgotten. Guarded by mu.
type verifyCache struct {
	mu    sync.Mutex
	max   int
	set   map[[32]byte]struct{}
	order [][32]byte
	hits  atomic.Uint64
}

var activeVerifyCache atomic.Pointer[verifyCache]

// SetVerifyCache keeps up to n verified signatures process-wide (see above); n <= 0 turns the
// cache off. It returns the hits of the cache it replaces.
func SetVerifyCache(n int) (previousHits uint64) {
	var c *verifyCache
	if n > 0 {
		c = &verifyCache{max: n, set: make(map[[32]byte]struct{})} // grows with use, up to n
	}
	if old := activeVerifyCache.Swap(c); old != nil {
		return old.hits.Load()
	}
	return 0
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

func (c *verifyCache) has(k [32]byte) bool {
	c.mu.Lock()
	_, ok := c.set[k]
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return ok
}

func (c *verifyCache) add(k [32]byte) {
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
