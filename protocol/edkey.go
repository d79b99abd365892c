package protocol

import (
	"github.com/libp2p/go-libp2p/core/crypto"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// edKey is an Ed25519 public key expanded once for verification: its point decoded and
// negated, and the table of its multiples that verification walks, as curve25519-voi keeps
// them (about 1.5 KiB). crypto/ed25519.Verify decodes the point (a square root in the field,
// about 4 µs of a 50 µs verification on this machine) and builds that table on every call,
// since it takes the key as bytes; a Verifier keeps an edKey per sender in its KeyCache and
// pays that once per sender instead. curve25519-voi's vectorised arithmetic does the rest in
// about 37 µs against crypto/ed25519's 51 (docs/node.md, sixth phase).
type edKey struct {
	exp *voi.ExpandedPublicKey
}

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
	exp, err := voi.NewExpandedPublicKey(voi.PublicKey(raw))
	if err != nil {
		return nil, Errorf(CodeIdentityInvalid, "the public key is not a point of Ed25519's curve")
	}
	return &edKey{exp: exp}, nil
}

// verify reports whether sig is an Ed25519 signature of msg by k. It accepts exactly what
// crypto/ed25519.Verify accepts (TestEdKey_AgreesWithTheStandardLibrary, FuzzEdKeyVerify): a
// 64-byte signature whose S is canonical (below the group order) and for which
// [S]B - [k]A encodes to R, k = SHA-512(R || A || msg) reduced.
func (k *edKey) verify(msg, sig []byte) bool {
	return voi.VerifyExpandedWithOptions(k.exp, msg, sig, stdlibRules)
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
