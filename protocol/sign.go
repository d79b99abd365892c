package protocol

import (
	"encoding/base64"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Canonical returns the bytes a signature covers: the RFC 8785 (JCS) canonical form of the
// whole document with sender.identity_sig removed (docs/protocol.md, "Drafts": what the
// signature covers). Every other member, known or unknown, is included. The known structure
// is written in canonical form directly; only raw members (payload and unknown fields) are
// parsed and re-serialised.
func Canonical(m *Message) ([]byte, error) {
	c, err := m.appendDoc(make([]byte, 0, m.sizeHint()), canonForm)
	if err != nil {
		return nil, Errorf(CodePayloadInvalid, "canonicalise (RFC 8785): %w", err)
	}
	return c, nil
}

// Digest returns SHA-256 of the canonical form: the 32 bytes that Ed25519 signs. Only the
// hash is kept, so the canonical form streams into it as it is written, through a pooled
// buffer of a few tens of KiB whatever the document's size (digest.go).
func Digest(m *Message) ([32]byte, error) {
	k := getSink()
	defer putSink(k)
	bp := getBuf()
	c, err := m.appendDoc(*bp, form{canon: true, unsigned: true, sink: k})
	if err != nil {
		putBuf(bp, c)
		return [32]byte{}, Errorf(CodePayloadInvalid, "canonicalise (RFC 8785): %w", err)
	}
	d := k.sum(c)
	putBuf(bp, c)
	return d, nil
}

// Sign sets sender.peer_id to the peer id of key and sender.identity_sig to the base64
// (RFC 4648 section 4, with padding) Ed25519 signature of Digest(m). key must be Ed25519.
// A Builder signs without deriving the peer id each time.
func Sign(m *Message, key crypto.PrivKey) error {
	if key == nil || key.Type() != crypto.Ed25519 {
		return Errorf(CodeIdentityInvalid, "signing key must be Ed25519")
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return Errorf(CodeIdentityInvalid, "peer id of signing key: %w", err)
	}
	return sign(m, newEdSigner(key), id.String())
}

// sign signs m with key, whose peer id is id (base58).
func sign(m *Message, key edSigner, id string) error {
	m.Envelope.Sender.PeerID = id
	digest, err := Digest(m)
	if err != nil {
		return err
	}
	sig, err := key.sign(digest[:])
	if err != nil {
		return Errorf(CodeInternalError, "sign: %w", err)
	}
	m.Envelope.Sender.IdentitySig = base64.StdEncoding.EncodeToString(sig)
	return nil
}

// Verifier checks signatures through the caches its owner gives it: Keys remembers decoded
// sender keys, Verified remembers signatures that verified (either may be nil: no cache).
// Set the fields before the first use; a Verifier is then safe for concurrent use, and one
// Verifier, or one cache, may serve many nodes. A node makes its own, with a key cache of
// DefaultKeyCacheSize and no VerifyCache, unless its owner passes one in; the zero Verifier,
// and a nil *Verifier, have no cache (the package functions Verify and SenderKey).
type Verifier struct {
	// Keys caches the public keys of sender peer ids (NewKeyCache).
	Keys *KeyCache
	// Verified caches signatures that verified (NewVerifyCache).
	Verified *VerifyCache
	// Charge, when set, is called at the start of every Verify, whether or not a cache will
	// answer it: the simulator, whose nodes share one process and its caches, charges each
	// node's check to that node's modelled CPU (docs/sim.md). It must be safe for concurrent
	// use. Default: nil, nothing called.
	Charge func()
}

// SenderKey returns the public key named by sender.peer_id, without a cache: see
// Verifier.SenderKey.
func SenderKey(m *Message) (crypto.PubKey, peer.ID, error) {
	return (*Verifier)(nil).SenderKey(m)
}

// SenderKey returns the public key named by sender.peer_id. Ed25519 peer ids embed their key,
// so no lookup is needed; any other key type is refused. It answers from the Verifier's
// KeyCache when a signature of that sender verified before, and decodes the id otherwise
// (about 2 µs; the key is not prepared for verification, which Verify does).
func (v *Verifier) SenderKey(m *Message) (crypto.PubKey, peer.ID, error) {
	if known, ok := v.keys().get(m.Envelope.Sender.PeerID); ok {
		return known.pub, known.id, nil
	}
	k, err := decodeSender(m)
	return k.pub, k.id, err
}

// senderKey is SenderKey with the key decoded for verification too (ed is nil when the key's
// bytes are no curve point: then no signature verifies, as with crypto/ed25519), and whether
// it came from the Verifier's KeyCache. It does not fill the cache: Verify does, once a
// signature of the key verified, so that a message that fails its check leaves nothing behind.
func (v *Verifier) senderKey(m *Message) (k senderKey, cached bool, err error) {
	if known, ok := v.keys().get(m.Envelope.Sender.PeerID); ok {
		return known, true, nil
	}
	if k, err = decodeSender(m); err != nil {
		return senderKey{}, false, err
	}
	if raw, err := k.pub.Raw(); err == nil {
		k.ed, _ = newEdKey(raw)
	}
	return k, false, nil
}

// decodeSender decodes sender.peer_id and the Ed25519 key it embeds (ed left nil).
func decodeSender(m *Message) (senderKey, error) {
	id, err := peer.Decode(m.Envelope.Sender.PeerID)
	if err != nil {
		return senderKey{}, Errorf(CodeIdentityInvalid, "sender.peer_id %q is not a peer id: %w", m.Envelope.Sender.PeerID, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return senderKey{}, Errorf(CodeIdentityInvalid, "sender.peer_id does not embed a public key: %w", err)
	}
	if pub.Type() != crypto.Ed25519 {
		return senderKey{}, Errorf(CodeIdentityInvalid, "sender.peer_id names a %s key; IACP signatures are Ed25519", pub.Type())
	}
	return senderKey{pub: pub, id: id}, nil
}

// keys returns the Verifier's KeyCache; nil (no cache) for a nil Verifier.
func (v *Verifier) keys() *KeyCache {
	if v == nil {
		return nil
	}
	return v.Keys
}

// Verify checks a signature without a cache: see Verifier.Verify.
func Verify(m *Message) error {
	return (*Verifier)(nil).Verify(m)
}

// Verify checks sender.identity_sig against the key of sender.peer_id. Every failure is an
// *Error with code IDENTITY_INVALID (or PAYLOAD_INVALID when the document cannot be
// canonicalised). Verify does not check that the peer id is allowed to speak for
// sender.agent_id: that is the node's trust policy.
func (v *Verifier) Verify(m *Message) error {
	if v != nil && v.Charge != nil {
		v.Charge()
	}
	sender, cached, err := v.senderKey(m)
	if err != nil {
		return err
	}
	if m.Envelope.Sender.IdentitySig == "" {
		return Errorf(CodeIdentityInvalid, "message is unsigned: sender.identity_sig is empty")
	}
	sig, err := base64.StdEncoding.DecodeString(m.Envelope.Sender.IdentitySig)
	if err != nil {
		return Errorf(CodeIdentityInvalid, "sender.identity_sig is not base64: %w", err)
	}
	digest, err := Digest(m)
	if err != nil {
		return err
	}
	var cache *VerifyCache
	if v != nil {
		cache = v.Verified
	}
	var key [32]byte
	if cache != nil {
		key = verifyCacheKey(digest, sig, m.Envelope.Sender.PeerID)
	}
	if cache == nil || !cache.has(key) {
		if sender.ed == nil || !sender.ed.verify(digest[:], sig) {
			return Errorf(CodeIdentityInvalid, "signature does not verify for peer %s", m.Envelope.Sender.PeerID)
		}
		if cache != nil {
			cache.add(key)
		}
	}
	if !cached { // a signature of it verified, here or for another node of the process
		v.keys().put(m.Envelope.Sender.PeerID, sender)
	}
	return nil
}

// PeerIDOf returns sender.peer_id decoded, for callers that compare it with the authenticated
// remote peer of a stream or a pubsub message.
func PeerIDOf(m *Message) (peer.ID, error) {
	id, err := peer.Decode(m.Envelope.Sender.PeerID)
	if err != nil {
		return "", fmt.Errorf("sender.peer_id: %w", err)
	}
	return id, nil
}
