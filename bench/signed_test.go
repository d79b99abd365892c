package bench

// The signed documents of the NATS-signed systems: per message, the crypto work IACP does
// (JSON encoding, RFC 8785 canonical form with protocol.CanonicalJSON, SHA-256 of it, Ed25519
// over the digest; on the other side the same canonical form and digest and an Ed25519
// verify, then the decoding of the envelope), without IACP's other checks (replay window,
// TTL, trust, rate limit), which NATS does not have.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
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

// signer signs documents from one agent and verifies documents from its peer.
type signer struct {
	agent string
	own   edPair // signs
	peer  edPair // its public key verifies the peer's documents
}

// signerPair returns two signers, each verifying the other's documents.
func signerPair(tb testing.TB, a, b string) (*signer, *signer) {
	tb.Helper()
	ka, kb := newEdPair(tb), newEdPair(tb)
	return &signer{agent: a, own: ka, peer: kb}, &signer{agent: b, own: kb, peer: ka}
}

// seal encodes payload in a new envelope to `to`, canonicalises it, and signs its digest. It
// returns the canonical document, which is what is sent, and the signature in base64 (as IACP
// writes sender.identity_sig), which travels beside it in a NATS header.
func (s *signer) seal(to, typ, intent, correlation string, payload any) (doc []byte, sig string, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, "", err
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, "", err
	}
	raw, err := json.Marshal(envelope{MessageID: id.String(), CorrelationID: correlation, From: s.agent,
		To: to, Type: typ, Intent: intent, Timestamp: time.Now().UTC().Format(time.RFC3339Nano), TTLSeconds: 300, Payload: p})
	if err != nil {
		return nil, "", err
	}
	if doc, err = protocol.CanonicalJSON(raw); err != nil {
		return nil, "", err
	}
	digest := sha256.Sum256(doc)
	return doc, base64.StdEncoding.EncodeToString(s.own.sign(digest[:])), nil
}

// open verifies a document sealed by the peer, over its canonical form as IACP's receiver
// does (the bytes received need not be canonical), and decodes its envelope.
func (s *signer) open(doc []byte, sig string) (envelope, error) {
	rawSig, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return envelope{}, err
	}
	canon, err := protocol.CanonicalJSON(doc)
	if err != nil {
		return envelope{}, err
	}
	digest := sha256.Sum256(canon)
	if !s.peer.verify(digest[:], rawSig) {
		return envelope{}, errors.New("signature does not verify")
	}
	var env envelope
	if err := json.Unmarshal(doc, &env); err != nil {
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
	doc, sig, err := a.seal("bench:nats:b", "request", "handoff", "", payload1K())
	if err != nil {
		t.Fatal(err)
	}
	env, err := b.open(doc, sig)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(env.Payload, &p); err != nil || p["task"] != "summarise" || env.From != "bench:nats:a" {
		t.Fatalf("opened %+v, payload %v (%v)", env, p, err)
	}
	if _, err := a.open(doc, sig); err == nil {
		t.Fatal("a opened its own document with b's key")
	}
	if _, err := b.open(bytes.Replace(doc, []byte("summarise"), []byte("summarize"), 1), sig); err == nil {
		t.Fatal("a changed document verified")
	}
}

// signedCPU returns the work of one NATS-signed exchange without a transport: the requester
// seals the request, the replier opens it and seals the response, the requester opens that.
func signedCPU(tb testing.TB) func(context.Context) error {
	tb.Helper()
	a, b := signerPair(tb, natsSender, natsReceiver)
	payload := payload1K()
	return func(context.Context) error {
		doc, sig, err := a.seal(natsReceiver, "request", "handoff", "", payload)
		if err != nil {
			return err
		}
		env, err := b.open(doc, sig)
		if err != nil {
			return err
		}
		if doc, sig, err = b.seal(env.From, "response", env.Intent, env.MessageID, map[string]string{"status": protocol.ResponseAccepted}); err != nil {
			return err
		}
		_, err = a.open(doc, sig)
		return err
	}
}
