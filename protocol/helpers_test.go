package protocol_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/protocol"
)

// fixedSeed is the Ed25519 seed of the test-vector key (docs/test-vectors/README.md).
var fixedSeed = mustHex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

// otherSeed is a second fixed key, for "wrong key" tests.
var otherSeed = mustHex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")

// fixedNow is the instant every test that needs a clock reads.
var fixedNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func keyFromSeed(t testing.TB, seed []byte) crypto.PrivKey {
	t.Helper()
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func fixedKey(t testing.TB) crypto.PrivKey { return keyFromSeed(t, fixedSeed) }

func otherKey(t testing.TB) crypto.PrivKey { return keyFromSeed(t, otherSeed) }

// newTestBuilder returns a builder with the fixed key and a clock stopped at fixedNow.
func newTestBuilder(t testing.TB, agent string) *protocol.Builder {
	t.Helper()
	b, err := protocol.NewBuilder(agent, fixedKey(t), func() time.Time { return fixedNow })
	if err != nil {
		t.Fatal(err)
	}
	return b
}
