package protocol

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// keyCacheSize bounds each of the two caches below; when one is full it is emptied and starts
// over, which keeps the cost of a hostile stream of new peer ids at one decode each.
const keyCacheSize = 4096

// keyCache remembers, per process, the public key a peer id string names and the peer id of
// a public key, so that Sign and Verify do not decode protobuf and base58 on every message.
// Both mappings are pure functions of their key, so a cached answer is always the right one.
// Its maps are guarded by mu.
var keyCache struct {
	mu    sync.Mutex
	pubs  map[string]senderKey // peer id string -> its decoded id and Ed25519 public key
	idsOf map[string]string    // raw Ed25519 public key -> peer id, base58
}

type senderKey struct {
	pub crypto.PubKey
	id  peer.ID
}

// cachedSenderKey returns the key of an Ed25519 peer id string that SenderKey decoded before.
func cachedSenderKey(id string) (senderKey, bool) {
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	k, ok := keyCache.pubs[id]
	return k, ok
}

func storeSenderKey(id string, k senderKey) {
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	if keyCache.pubs == nil || len(keyCache.pubs) >= keyCacheSize {
		keyCache.pubs = make(map[string]senderKey)
	}
	keyCache.pubs[id] = k
}

// peerIDOfKey returns the peer id of an Ed25519 private key as a string, through the cache.
func peerIDOfKey(key crypto.PrivKey) (string, error) {
	raw, err := key.GetPublic().Raw()
	if err != nil {
		return "", err
	}
	keyCache.mu.Lock()
	id, ok := keyCache.idsOf[string(raw)]
	keyCache.mu.Unlock()
	if ok {
		return id, nil
	}
	pid, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", err
	}
	id = pid.String()
	keyCache.mu.Lock()
	defer keyCache.mu.Unlock()
	if keyCache.idsOf == nil || len(keyCache.idsOf) >= keyCacheSize {
		keyCache.idsOf = make(map[string]string)
	}
	keyCache.idsOf[string(raw)] = id
	return id, nil
}
