package protocol_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestSignature_SignThenVerify(t *testing.T) {
	m := validRequest(t)
	if err := protocol.Verify(m); err != nil {
		t.Fatal(err)
	}
	want, _ := peer.IDFromPrivateKey(fixedKey(t))
	if m.Envelope.Sender.PeerID != want.String() {
		t.Fatalf("sender.peer_id = %s, want %s", m.Envelope.Sender.PeerID, want)
	}
}

// The signature is standard Ed25519 over SHA-256 of the canonical form, in padded standard
// base64: a verifier needs nothing of libp2p but the peer id decoding.
func TestSignature_IsEd25519OverSHA256OfCanonicalForm(t *testing.T) {
	m := validRequest(t)
	c := mustCanonical(t, m)
	digest := sha256.Sum256(c)
	if d, _ := protocol.Digest(m); d != digest {
		t.Fatal("Digest is not SHA-256 of Canonical")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(m.Envelope.Sender.IdentitySig)
	if err != nil {
		t.Fatalf("identity_sig is not padded standard base64: %v", err)
	}
	pub := ed25519.NewKeyFromSeed(fixedSeed).Public().(ed25519.PublicKey)
	if !ed25519.Verify(pub, digest[:], sig) {
		t.Fatal("crypto/ed25519 does not verify the signature over the digest")
	}
	if !json.Valid(c) || len(m.Envelope.Sender.IdentitySig) != 88 {
		t.Fatalf("canonical form not JSON or signature not 64 bytes: %s", m.Envelope.Sender.IdentitySig)
	}
}

func TestSignature_CanonicalFormLeavesOutOnlyTheSignature(t *testing.T) {
	m := validRequest(t)
	c := string(mustCanonical(t, m))
	for _, want := range []string{`"peer_id":`, `"agent_id":"acme:host-1:planner"`, `"payload":{"question":`, `"ttl_seconds":3600`} {
		if !strings.Contains(c, want) {
			t.Errorf("canonical form lacks %s: %s", want, c)
		}
	}
	if strings.Contains(c, "identity_sig") {
		t.Errorf("canonical form holds identity_sig: %s", c)
	}
	// A null identity_sig (kept as an unknown member) is the signature member too.
	m.Envelope.Sender.IdentitySig = ""
	m.Envelope.Sender.Extra = protocol.Extra{"identity_sig": json.RawMessage("null")}
	if strings.Contains(string(mustCanonical(t, m)), "identity_sig") {
		t.Error("a null identity_sig is in the canonical form")
	}
}

func TestSignature_Verify_Refuses(t *testing.T) {
	secp, _, err := crypto.GenerateSecp256k1Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	secpID, _ := peer.IDFromPrivateKey(secp)
	otherID, _ := peer.IDFromPrivateKey(otherKey(t))
	// A peer id that is a SHA-256 multihash, as RSA keys have: it embeds no key.
	hashedID, err := peer.Decode("QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N")
	if err != nil {
		t.Fatal(err)
	}
	for name, tamper := range map[string]func(m *protocol.Message){
		"tampered payload": func(m *protocol.Message) {
			m.Message.Payload = json.RawMessage(`{"question":"what is the capital of Spain?"}`)
		},
		"tampered envelope":    func(m *protocol.Message) { m.Envelope.TTLSeconds++ },
		"tampered recipient":   func(m *protocol.Message) { m.Envelope.Recipient.AgentID = "acme:host-2:other" },
		"added unknown member": func(m *protocol.Message) { m.Extra = protocol.Extra{"x-new": json.RawMessage(`1`)} },
		"signed by another key": func(m *protocol.Message) {
			_ = protocol.Sign(m, otherKey(t))
			m.Envelope.Sender.PeerID = peerIDString(t, fixedKey(t))
		},
		"peer_id of another key": func(m *protocol.Message) { m.Envelope.Sender.PeerID = otherID.String() },
		"non-Ed25519 peer id":    func(m *protocol.Message) { m.Envelope.Sender.PeerID = secpID.String() },
		"peer id without a key":  func(m *protocol.Message) { m.Envelope.Sender.PeerID = hashedID.String() },
		"peer id not a peer id":  func(m *protocol.Message) { m.Envelope.Sender.PeerID = "not-a-peer-id" },
		"missing peer id":        func(m *protocol.Message) { m.Envelope.Sender.PeerID = "" },
		"bad base64":             func(m *protocol.Message) { m.Envelope.Sender.IdentitySig = "!!!not base64!!!" },
		"URL-safe base64": func(m *protocol.Message) {
			m.Envelope.Sender.IdentitySig = base64.URLEncoding.EncodeToString(make([]byte, 64))
		},
		"signature of wrong length": func(m *protocol.Message) {
			m.Envelope.Sender.IdentitySig = base64.StdEncoding.EncodeToString(make([]byte, 32))
		},
		"missing signature": func(m *protocol.Message) { m.Envelope.Sender.IdentitySig = "" },
	} {
		t.Run(name, func(t *testing.T) {
			m := validRequest(t)
			tamper(m)
			wantCode(t, protocol.Verify(m), protocol.CodeIdentityInvalid)
		})
	}
}

func peerIDString(t testing.TB, k crypto.PrivKey) string {
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func TestSignature_Sign_RefusesNonEd25519Keys(t *testing.T) {
	secp, _, err := crypto.GenerateSecp256k1Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, protocol.Sign(validRequest(t), secp), protocol.CodeIdentityInvalid)
	wantCode(t, protocol.Sign(validRequest(t), nil), protocol.CodeIdentityInvalid)
}

func TestSignature_SenderKeyAndPeerIDOf(t *testing.T) {
	m := validRequest(t)
	pub, id, err := protocol.SenderKey(m)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equals(fixedKey(t).GetPublic()) || id.String() != m.Envelope.Sender.PeerID {
		t.Fatalf("SenderKey = %v, %s", pub, id)
	}
	// Twice: the second answer comes from the cache and must be the same.
	pub2, id2, err := protocol.SenderKey(m)
	if err != nil || !pub2.Equals(pub) || id2 != id {
		t.Fatalf("second SenderKey = %v, %s, %v", pub2, id2, err)
	}
	got, err := protocol.PeerIDOf(m)
	if err != nil || got != id {
		t.Fatalf("PeerIDOf = %s, %v", got, err)
	}
	m.Envelope.Sender.PeerID = "garbage"
	if _, err := protocol.PeerIDOf(m); err == nil {
		t.Fatal("PeerIDOf accepted garbage")
	}
}

// Ed25519 is deterministic: signing the same document twice gives the same signature.
func TestSignature_IsDeterministic(t *testing.T) {
	m := validRequest(t)
	first := m.Envelope.Sender.IdentitySig
	if err := protocol.Sign(m, fixedKey(t)); err != nil {
		t.Fatal(err)
	}
	if m.Envelope.Sender.IdentitySig != first {
		t.Fatal("re-signing changed the signature")
	}
}
