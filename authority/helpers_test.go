package authority

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// The fixed keys of the test vectors: their seeds are RFC 8032 section 7.1 TEST 1 and TEST 2,
// as in docs/test-vectors/README.md. The third is any other peer.
const (
	seedAuthority = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	seedOther     = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"
	seedAgentPeer = "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7"
)

// t0 is the fixed instant at which tests issue.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// seedKey returns the libp2p Ed25519 key with the given hex seed.
func seedKey(t testing.TB, seedHex string) crypto.PrivKey {
	t.Helper()
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		t.Fatal(err)
	}
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// peerOfKey returns the peer id of a key.
func peerOfKey(t testing.TB, k crypto.PrivKey) peer.ID {
	t.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// detRand is a deterministic byte stream: SHA-256 in counter mode over a label.
type detRand struct {
	label string
	n     int
	buf   []byte
}

func (r *detRand) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) {
		h := sha256.Sum256(fmt.Appendf(nil, "%s/%d", r.label, r.n))
		r.n++
		r.buf = append(r.buf, h[:]...)
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// fixture is an authority with the fixed key, issuing at t0, and a verifier of it whose clock
// the test sets.
type fixture struct {
	auth     *Authority
	clock    *clock
	verifier *Verifier
	agent    peer.ID // the agent's peer
	other    crypto.PrivKey
}

func newFixture(t testing.TB, vopts ...VerifierOption) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{t0}, other: seedKey(t, seedOther)}
	var err error
	f.auth, err = New(seedKey(t, seedAuthority), WithClock(func() time.Time { return t0 }), withRandom(&detRand{label: "jti"}))
	if err != nil {
		t.Fatal(err)
	}
	f.verifier = NewVerifier(f.auth.PublicKey(), append([]VerifierOption{WithVerifierClock(f.clock.now)}, vopts...)...)
	f.agent = peerOfKey(t, seedKey(t, seedAgentPeer))
	return f
}

// forge signs header and claims as a compact JWS with sign, which gets the signing input.
func forge(t testing.TB, header map[string]any, claims any, sign func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	return input + "." + b64.EncodeToString(sign([]byte(input)))
}

// edSigner signs with a libp2p Ed25519 key.
func edSigner(t testing.TB, k crypto.PrivKey) func([]byte) []byte {
	return func(in []byte) []byte {
		sig, err := k.Sign(in)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
}

// claimsOf decodes the claims of a compact JWS into a map, for tests that alter one.
func claimsOf(t testing.TB, raw string) map[string]any {
	t.Helper()
	parts := strings.Split(raw, ".")
	b, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantCode fails unless err is a *protocol.Error (through its chain) with code.
func wantCode(t testing.TB, err error, code protocol.Code) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code || protocol.CodeOf(err) != code {
		t.Fatalf("error %v: want a protocol error with code %s", err, code)
	}
}

// mustJSON marshals v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
