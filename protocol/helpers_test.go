package protocol_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
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

// codeOf returns the IACP code of err, failing the test when err is nil.
func wantCode(t testing.TB, err error, want protocol.Code) *protocol.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %v, want a *protocol.Error with code %s", err, err, want)
	}
	if pe.Code != want {
		t.Fatalf("got code %s (%v), want %s", pe.Code, err, want)
	}
	return pe
}

// validRequest returns a signed request from the fixed key at fixedNow.
func validRequest(t testing.TB) *protocol.Message {
	t.Helper()
	m, err := newTestBuilder(t, "acme:host-1:planner").Request("acme:host-2:analyst", protocol.IntentQuery,
		map[string]any{"question": "what is the capital of France?"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustDecode(t testing.TB, doc string) *protocol.Message {
	t.Helper()
	m, err := protocol.Decode([]byte(doc))
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, doc)
	}
	return m
}

func mustEncode(t testing.TB, m *protocol.Message, f protocol.Format) []byte {
	t.Helper()
	b, err := protocol.Encode(m, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCanonical(t testing.TB, m *protocol.Message) []byte {
	t.Helper()
	c, err := protocol.Canonical(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
