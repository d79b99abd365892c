package bench

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// The node signs and verifies Ed25519 on curve25519-voi, with each sender's key expanded once
// and the standard library's rules (protocol/edkey.go). NATS-signed and the budget do the same
// work with the same library, so that a ratio measures the exchange and not the library; the
// sign-stdlib and verify-stdlib rows keep crypto/ed25519's cost beside them.

// stdlibRules are crypto/ed25519's verification rules, as the node applies them.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// edPair is a key pair as the node holds one: the private key raw, the public key expanded
// for whoever verifies it.
type edPair struct {
	priv voi.PrivateKey
	pub  *voi.ExpandedPublicKey
}

func newEdPair(tb testing.TB) edPair {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	exp, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		tb.Fatal(err)
	}
	return edPair{priv: voi.PrivateKey(priv), pub: exp}
}

func (k edPair) sign(msg []byte) []byte { return voi.Sign(k.priv, msg) }

func (k edPair) verify(msg, sig []byte) bool {
	return voi.VerifyExpandedWithOptions(k.pub, msg, sig, stdlibRules)
}
