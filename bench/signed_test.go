package bench

// The signed documents of the NATS-signed systems: per message, the crypto work IACP does
// (JSON encoding, RFC 8785 canonical form with protocol.CanonicalJSON, SHA-256 of it, Ed25519
// over the digest; on the other side the same canonical form and digest and an Ed25519
// verify, then the decoding of the envelope), without IACP's other checks (replay window,
// TTL, trust, rate limit), which NATS does not have.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/iacp-node/iacp-node/protocol"
)

// envelope is the signed document: the members of an IACP envelope that say who, to whom,
// what and when, and the payload.
type envelope struct {
	MessageID     string          `json:"message_id"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	From          string          `json:"from"`
	To            string          `json:"to"`
	Type          string          `json:"type"`
	Intent        string          `json:"intent"`
	Timestamp     string          `json:"timestamp"`
	TTLSeconds    int64           `json:"ttl_seconds"`
	Payload       json.RawMessage `json:"payload"`
}

// signedDoc is what goes on the wire: the canonical document and its signature.
type signedDoc struct {
	Doc json.RawMessage `json:"doc"`
	Sig []byte          `json:"sig"`
}

// signer signs documents from one agent and verifies documents from its peer.
type signer struct {
	agent   string
	priv    ed25519.PrivateKey
	peerPub ed25519.PublicKey
}

// signerPair returns two signers, each verifying the other's documents.
func signerPair(tb testing.TB, a, b string) (*signer, *signer) {
	tb.Helper()
	pubA, privA, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	pubB, privB, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return &signer{agent: a, priv: privA, peerPub: pubB}, &signer{agent: b, priv: privB, peerPub: pubA}
}

// seal encodes payload in a new envelope to `to`, canonicalises it, and signs its digest.
func (s *signer) seal(to, typ, intent, correlation string, payload any) ([]byte, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(envelope{MessageID: id.String(), CorrelationID: correlation, From: s.agent,
		To: to, Type: typ, Intent: intent, Timestamp: time.Now().UTC().Format(time.RFC3339Nano), TTLSeconds: 300, Payload: p})
	if err != nil {
		return nil, err
	}
	canon, err := protocol.CanonicalJSON(doc)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(canon)
	return json.Marshal(signedDoc{Doc: canon, Sig: ed25519.Sign(s.priv, digest[:])})
}

// open verifies a document sealed by the peer and decodes its envelope.
func (s *signer) open(raw []byte) (envelope, error) {
	var sd signedDoc
	if err := json.Unmarshal(raw, &sd); err != nil {
		return envelope{}, err
	}
	canon, err := protocol.CanonicalJSON(sd.Doc)
	if err != nil {
		return envelope{}, err
	}
	digest := sha256.Sum256(canon)
	if !ed25519.Verify(s.peerPub, digest[:], sd.Sig) {
		return envelope{}, errors.New("signature does not verify")
	}
	var env envelope
	if err := json.Unmarshal(sd.Doc, &env); err != nil {
		return envelope{}, err
	}
	if env.To != s.agent {
		return envelope{}, fmt.Errorf("document for %q, not %q", env.To, s.agent)
	}
	return env, nil
}

// TestSigned checks the signed documents: what one side seals the other opens, and a changed
// byte of the document or the wrong key is refused.
func TestSigned(t *testing.T) {
	a, b := signerPair(t, "bench:nats:a", "bench:nats:b")
	raw, err := a.seal("bench:nats:b", "request", "handoff", "", payload1K())
	if err != nil {
		t.Fatal(err)
	}
	env, err := b.open(raw)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(env.Payload, &p); err != nil || p["task"] != "summarise" || env.From != "bench:nats:a" {
		t.Fatalf("opened %+v, payload %v (%v)", env, p, err)
	}
	if _, err := a.open(raw); err == nil {
		t.Fatal("a opened its own document with b's key")
	}
	var sd signedDoc
	if err := json.Unmarshal(raw, &sd); err != nil {
		t.Fatal(err)
	}
	sd.Doc = bytes.Replace(sd.Doc, []byte("summarise"), []byte("summarize"), 1)
	tampered, _ := json.Marshal(sd)
	if _, err := b.open(tampered); err == nil {
		t.Fatal("a changed document verified")
	}
}
