package protocol

import (
	"crypto/sha512"
	"crypto/subtle"

	"filippo.io/edwards25519"
)

// edKey is an Ed25519 public key decoded once for verification: its encoding, which the
// signature's hash covers, and the negated point. crypto/ed25519.Verify decodes the point
// (a square root in the field, about 4 µs of a 50 µs verification on this machine) every time
// it is called, since it takes the key as bytes; a Verifier keeps an edKey per sender in its
// KeyCache and pays that once per sender instead.
type edKey struct {
	raw    [32]byte
	minusA edwards25519.Point
}

// newEdKey decodes raw, a 32-byte Ed25519 public key. It fails where crypto/ed25519.Verify
// fails for every signature: a key of another length, or bytes that are no point of the
// curve (non-canonical encodings of points are accepted, as there).
func newEdKey(raw []byte) (*edKey, error) {
	k := &edKey{}
	if len(raw) != len(k.raw) {
		return nil, Errorf(CodeIdentityInvalid, "an Ed25519 public key is %d bytes, not %d", len(k.raw), len(raw))
	}
	a, err := new(edwards25519.Point).SetBytes(raw)
	if err != nil {
		return nil, Errorf(CodeIdentityInvalid, "the public key is not a point of Ed25519's curve")
	}
	copy(k.raw[:], raw)
	k.minusA.Negate(a)
	return k, nil
}

// verify reports whether sig is an Ed25519 signature (RFC 8032, pure Ed25519) of msg by k:
// the check of crypto/ed25519.Verify, step for step, with the key already decoded. It
// accepts exactly what crypto/ed25519.Verify accepts (TestEdKey_AgreesWithTheStandardLibrary,
// FuzzEdKeyVerify): a 64-byte signature whose S is canonical (below the group order) and
// for which [S]B - [k]A encodes to R, k = SHA-512(R || A || msg) reduced.
func (k *edKey) verify(msg, sig []byte) bool {
	if len(sig) != 64 || sig[63]&224 != 0 {
		return false
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(k.raw[:])
	h.Write(msg)
	var sum [sha512.Size]byte
	hram, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(sum[:0]))
	if err != nil {
		return false // cannot happen: the digest is 64 bytes
	}
	r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(hram, &k.minusA, s)
	return subtle.ConstantTimeCompare(sig[:32], r.Bytes()) == 1
}
