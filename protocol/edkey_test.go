package protocol

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// stdVerify is the reference: crypto/ed25519.Verify, which panics on a key of another length.
func stdVerify(pub, msg, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig)
}

// edVerify is the verification a Verifier makes with its cached key, on both of its paths: the
// key taken as bytes (a sender's first verifications) and expanded (after expandAfter
// signatures verified). It fails the test when the two disagree.
func edVerify(t testing.TB, pub, msg, sig []byte) bool {
	t.Helper()
	k, err := newEdKey(pub)
	if err != nil {
		return false
	}
	asBytes := k.verify(msg, sig)
	k.expand()
	if k.exp.Load() == nil {
		t.Fatalf("key %x, a point, did not expand", pub)
	}
	if expanded := k.verify(msg, sig); expanded != asBytes {
		t.Fatalf("key %x: %v taken as bytes, %v expanded (sig %x msg %x)", pub, asBytes, expanded, sig, msg)
	}
	return asBytes
}

// groupOrder is ℓ, little-endian: a signature whose S is ℓ + s is the same equation as S = s
// but not canonical, and RFC 8032 (and crypto/ed25519) refuse it.
var groupOrder = []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}

// addOrder returns s + ℓ as 32 little-endian bytes (s below ℓ, so the sum fits).
func addOrder(s []byte) []byte {
	out := make([]byte, 32)
	carry := 0
	for i := range out {
		v := int(s[i]) + int(groupOrder[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	return out
}

func TestEdKey_AcceptsRFC8032Vectors(t *testing.T) {
	for _, v := range []struct{ pub, msg, sig string }{ // RFC 8032 section 7.1, tests 1 to 3
		{"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	} {
		pub, msg, sig := unhex(t, v.pub), unhex(t, v.msg), unhex(t, v.sig)
		if !edVerify(t, pub, msg, sig) {
			t.Errorf("RFC 8032 vector %s: refused", v.pub[:8])
		}
		sig[0] ^= 1
		if edVerify(t, pub, msg, sig) {
			t.Errorf("RFC 8032 vector %s with R altered: accepted", v.pub[:8])
		}
	}
}

// The cached key must accept exactly what crypto/ed25519 accepts: valid signatures, and none of
// their alterations, non-canonical S, high bits, short or long signatures, another message or
// key; and the same answers for keys of small order and non-canonical encodings, where
// cofactorless verification has its known corner cases.
func TestEdKey_AgreesWithTheStandardLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(what string, pub, msg, sig []byte) {
		t.Helper()
		if got, want := edVerify(t, pub, msg, sig), stdVerify(pub, msg, sig); got != want {
			t.Fatalf("%s: cached key says %v, crypto/ed25519 says %v (pub %x sig %x)", what, got, want, pub, sig)
		}
	}
	accepted := 0
	for i := range 200 {
		seed := make([]byte, ed25519.SeedSize)
		for j := range seed {
			seed[j] = byte(r.Uint32())
		}
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, r.IntN(200))
		for j := range msg {
			msg[j] = byte(r.Uint32())
		}
		sig := ed25519.Sign(priv, msg)
		check("valid", pub, msg, sig)
		if edVerify(t, pub, msg, sig) {
			accepted++
		}
		flipped := bytes.Clone(sig)
		flipped[r.IntN(64)] ^= 1 << r.IntN(8)
		check("one bit flipped", pub, msg, flipped)
		check("S + ℓ", pub, msg, append(bytes.Clone(sig[:32]), addOrder(sig[32:])...))
		high := bytes.Clone(sig)
		high[63] |= 0x80
		check("high bit of S", pub, msg, high)
		check("short", pub, msg, sig[:63])
		check("long", pub, msg, append(bytes.Clone(sig), 0))
		check("other message", pub, append(bytes.Clone(msg), byte(i)), sig)
		otherPub := bytes.Clone(pub)
		otherPub[r.IntN(32)] ^= 1 << r.IntN(8)
		check("other key", otherPub, msg, sig)
	}
	if accepted != 200 {
		t.Fatalf("%d of 200 valid signatures accepted", accepted)
	}
	identity := make([]byte, 32)
	identity[0] = 1
	zero := make([]byte, 32)
	for _, pub := range [][]byte{
		identity, // the neutral element: small order
		unhex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // y = -1: order 2
		zero, // y = 0: order 4
		unhex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // y = p: non-canonical 0
		unhex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"), // y = p + 1: non-canonical 1
		unhex(t, "0200000000000000000000000000000000000000000000000000000000000000"), // no point
	} {
		for _, sig := range [][]byte{
			append(bytes.Clone(identity), zero...), // R = identity, S = 0: [0]B - [k]A
			append(bytes.Clone(pub), zero...),
			make([]byte, 64),
		} {
			check("small-order or non-canonical key", pub, []byte("msg"), sig)
		}
	}
}

func TestEdKey_RefusesWhatIsNoKey(t *testing.T) {
	for _, raw := range [][]byte{nil, make([]byte, 31), make([]byte, 33), unhex(t, "0200000000000000000000000000000000000000000000000000000000000000")} {
		if _, err := newEdKey(raw); err == nil {
			t.Errorf("newEdKey(%x): no error", raw)
		}
	}
}

// FuzzEdKeyVerify checks, on any key, message and signature, that the cached key answers as
// crypto/ed25519.Verify does.
func FuzzEdKeyVerify(f *testing.F) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	msg := []byte("fuzz")
	sig := ed25519.Sign(priv, msg)
	f.Add([]byte(priv.Public().(ed25519.PublicKey)), msg, sig)
	f.Add(make([]byte, 32), []byte{}, make([]byte, 64))
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if got, want := edVerify(t, pub, msg, sig), stdVerify(pub, msg, sig); got != want {
			t.Fatalf("cached key says %v, crypto/ed25519 says %v (pub %x sig %x msg %x)", got, want, pub, sig, msg)
		}
	})
}

// edSign signs msg with the key of seed as a Builder does.
func edSign(t testing.TB, seed, msg []byte) []byte {
	t.Helper()
	key, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	signer := newEdSigner(key)
	if signer.priv == nil {
		t.Fatal("an Ed25519 key is signed with by its own Sign, not on curve25519-voi")
	}
	sig, err := signer.sign(msg)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// Ed25519 is deterministic: the node's signer must make, for every key and message, the bytes
// crypto/ed25519.Sign makes, or other implementations would refuse what it signs.
func TestEdSigner_SignsAsTheStandardLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		seed := make([]byte, ed25519.SeedSize)
		msg := make([]byte, r.IntN(100))
		for _, b := range [][]byte{seed, msg} {
			for j := range b {
				b[j] = byte(r.Uint32())
			}
		}
		if got, want := edSign(t, seed, msg), ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg); !bytes.Equal(got, want) {
			t.Fatalf("seed %x msg %x: signed %x, crypto/ed25519 signs %x", seed, msg, got, want)
		}
	}
}

// FuzzEdSigner checks, on any seed and message, that the node's signer signs as
// crypto/ed25519.Sign does.
func FuzzEdSigner(f *testing.F) {
	f.Add(make([]byte, ed25519.SeedSize), []byte("fuzz"))
	f.Fuzz(func(t *testing.T, seed, msg []byte) {
		if len(seed) != ed25519.SeedSize {
			return
		}
		if got, want := edSign(t, seed, msg), ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg); !bytes.Equal(got, want) {
			t.Fatalf("seed %x msg %x: signed %x, crypto/ed25519 signs %x", seed, msg, got, want)
		}
	})
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
