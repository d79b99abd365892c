package protocol

import (
	"bytes"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// edKey is an Ed25519 public key as a Verifier keeps it in its KeyCache. Until expandAfter of
// its signatures have verified, it is taken as bytes, as crypto/ed25519.Verify takes it: each
// verification decodes the point and builds the table of its multiples that verification
// walks (about 40 µs in all on this machine). A sender whose signatures verified that often is
// expected again, and its key is then expanded once, as curve25519-voi keeps it (the point
// decoded and negated, and that table: 1.5 KiB, 13 µs to build), after which a verification
// takes about 35.5 µs. A key heard once (an agent's beat, every few minutes in a large mesh)
// costs the cache about 300 bytes, not 1.7 KiB (docs/node.md, "Expanded only for senders heard
// often").
type edKey struct {
	pub  voi.PublicKey
	uses atomic.Int32
	exp  atomic.Pointer[voi.ExpandedPublicKey] // nil until expandAfter signatures verified
	// recent says a signature verified with the key since the KeyCache last started over:
	// a full cache keeps the expanded keys in use before the idle ones.
	recent atomic.Bool
}

// expandAfter is how many signatures of one key verify with the key taken as bytes before it
// is expanded: expanding costs about three verifications' saving.
const expandAfter = 4

// stdlibRules are the verification rules of crypto/ed25519 (RFC 8032 pure Ed25519,
// cofactorless; keys of small order and non-canonical key encodings accepted; S must be
// canonical), which every IACP node applies, so that a signature one node accepts no other
// refuses.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// newEdKey decodes raw, a 32-byte Ed25519 public key. It fails where crypto/ed25519.Verify
// fails for every signature: a key of another length, or bytes that are no point of the
// curve (non-canonical encodings of points are accepted, as there).
func newEdKey(raw []byte) (*edKey, error) {
	if len(raw) != voi.PublicKeySize {
		return nil, Errorf(CodeIdentityInvalid, "an Ed25519 public key is %d bytes, not %d", voi.PublicKeySize, len(raw))
	}
	var y curve.CompressedEdwardsY
	var a curve.EdwardsPoint
	if _, err := y.SetBytes(raw); err != nil {
		return nil, Errorf(CodeIdentityInvalid, "the public key is not a point of Ed25519's curve")
	}
	if _, err := a.SetCompressedY(&y); err != nil {
		return nil, Errorf(CodeIdentityInvalid, "the public key is not a point of Ed25519's curve")
	}
	return &edKey{pub: voi.PublicKey(bytes.Clone(raw))}, nil
}

// verify reports whether sig is an Ed25519 signature of msg by k. It accepts exactly what
// crypto/ed25519.Verify accepts, whether k is expanded yet or not
// (TestEdKey_AgreesWithTheStandardLibrary, FuzzEdKeyVerify): a 64-byte signature whose S is
// canonical (below the group order) and for which [S]B - [k]A encodes to R,
// k = SHA-512(R || A || msg) reduced.
func (k *edKey) verify(msg, sig []byte) bool {
	if exp := k.exp.Load(); exp != nil {
		ok := voi.VerifyExpandedWithOptions(exp, msg, sig, stdlibRules)
		if ok && !k.recent.Load() {
			k.recent.Store(true)
		}
		return ok
	}
	ok := voi.VerifyWithOptions(k.pub, msg, sig, stdlibRules)
	if ok && k.uses.Add(1) == expandAfter {
		k.expand() // only signatures that verified count: a forger cannot make the node expand
		k.recent.Store(true)
	}
	return ok
}

// expand expands k for the verifications after this one (newEdKey has ruled out the keys
// that would not expand).
func (k *edKey) expand() {
	if exp, err := voi.NewExpandedPublicKey(k.pub); err == nil {
		k.exp.Store(exp)
	}
}

// edSigner signs with an Ed25519 private key on curve25519-voi: about 18 µs a signature
// against crypto/ed25519's 26 on this machine. Ed25519 signatures are deterministic, so it
// makes the very bytes crypto/ed25519.Sign makes (TestEdSigner_SignsAsTheStandardLibrary). A
// key it cannot take raw is signed with by its own Sign.
type edSigner struct {
	priv voi.PrivateKey // seed || public key; nil when key signs itself
	key  crypto.PrivKey
}

// newEdSigner returns the signer of key, an Ed25519 key.
func newEdSigner(key crypto.PrivKey) edSigner {
	s := edSigner{key: key}
	if key.Type() == crypto.Ed25519 {
		if raw, err := key.Raw(); err == nil && len(raw) == voi.PrivateKeySize {
			s.priv = voi.PrivateKey(raw)
		}
	}
	return s
}

func (s edSigner) sign(msg []byte) ([]byte, error) {
	if s.priv == nil {
		return s.key.Sign(msg)
	}
	return voi.Sign(s.priv, msg), nil
}
