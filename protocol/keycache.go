package protocol

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultKeyCacheSize is the key cache a node gives its Verifier: 4,096 sender peer ids, about
// 300 bytes each (1.2 MiB when full), and 1.5 KiB more for a sender verified often enough to
// have its key expanded (edKey).
const DefaultKeyCacheSize = 4096

// KeyCache remembers the public key that a sender.peer_id string names, so that a Verifier
// does not decode base58, a multihash and a protobuf on every message, and keeps the key
// expanded for the senders it hears often.
// The mapping is a pure function of the peer id, so a cached answer is always the right one.
// A key enters it only once a signature of it verified (Verifier.Verify), so a message that
// fails its check leaves nothing behind: a hostile stream of new peer ids with bad signatures
// costs its decoding (about 8 µs besides the verification) and keeps nothing.
// It holds at most its bound. When full it starts over, keeping only expanded keys, up to half
// the bound: first those that verified a signature since the last restart, then idle ones if
// there is room. A stream of new senders that do sign validly (a hostile peer's made-up ids,
// or a large mesh's beats) keeps 300 bytes each until the next restart and evicts only keys as
// cheap to decode again, not the expanded keys of the node's correspondents (13 µs each to
// expand again). Only signatures that verify expand a key (four of them) or mark it in use, so
// made-up keys that stop signing, and the keys of agents that left, give way to keys in use. A peer
// can still crowd out a correspondent's expanded key: with half the bound of made-up keys,
// each signing a valid message between two restarts, which it can bring about with made-up
// peer ids; that costs the node a verification per key and restart, under the limits charged
// to whoever relays the messages, and the correspondent 13 µs and four slower verifications.
// It is safe for concurrent use, and may be shared by the Verifiers of many nodes in one
// process. Its map is guarded by mu.
type KeyCache struct {
	mu   sync.Mutex
	max  int
	pubs map[string]senderKey // peer id string -> its decoded id and Ed25519 public key, parsed and expanded
}

type senderKey struct {
	pub crypto.PubKey
	id  peer.ID
	ed  *edKey // pub expanded for verification; nil if its bytes are no curve point
}

// NewKeyCache returns a cache of up to n decoded sender keys (DefaultKeyCacheSize is what a
// node uses); n <= 0 returns nil, no cache.
func NewKeyCache(n int) *KeyCache {
	if n <= 0 {
		return nil
	}
	return &KeyCache{max: n, pubs: make(map[string]senderKey)} // grows with use, up to n
}

// get returns the key of an Ed25519 peer id string decoded before. A nil cache has none.
func (c *KeyCache) get(id string) (senderKey, bool) {
	if c == nil {
		return senderKey{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.pubs[id]
	return k, ok
}

func (c *KeyCache) put(id string, k senderKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pubs) >= c.max {
		c.restart()
	}
	c.pubs[id] = k
}

// restart empties a full cache but for its expanded keys, at most half the bound of them:
// those in use since the last restart first, then idle ones, the map's random order choosing
// within each. At least half the bound is then inserted between two restarts, each of which
// walks the map at most twice. The caller holds mu.
func (c *KeyCache) restart() {
	kept := make(map[string]senderKey)
	for _, inUse := range []bool{true, false} {
		for id, k := range c.pubs {
			if len(kept) >= c.max/2 {
				break
			}
			if k.ed != nil && k.ed.exp.Load() != nil && k.ed.recent.Load() == inUse {
				kept[id] = k
			}
		}
	}
	for _, k := range kept {
		k.ed.recent.Store(false)
	}
	c.pubs = kept
}
