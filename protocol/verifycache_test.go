package protocol

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// The process-wide verification cache makes a second verification of the same document a
// lookup, and never lets a tampered document through.
func TestVerifyCache_HitsOnlyForTheSameSignedDocument(t *testing.T) {
	SetVerifyCache(4)
	defer SetVerifyCache(0)
	key, _, _ := crypto.GenerateEd25519Key(nil)
	b, _ := NewBuilder("test:cache:a", key, nil)
	m, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := Verify(m); err != nil {
			t.Fatal(err)
		}
	}
	if hits := activeVerifyCache.Load().hits.Load(); hits != 2 {
		t.Fatalf("hits = %d, want 2", hits)
	}
	forged := m.Clone()
	forged.Message.Payload = []byte(`{"event_type":"y"}`)
	if err := Verify(forged); CodeOf(err) != CodeIdentityInvalid {
		t.Fatalf("a tampered document verified through the cache: %v", err)
	}
	other := m.Clone()
	other.Envelope.Sender.IdentitySig = "AAAA" + other.Envelope.Sender.IdentitySig[4:]
	if err := Verify(other); CodeOf(err) != CodeIdentityInvalid {
		t.Fatalf("another signature verified through the cache: %v", err)
	}
	for i := 0; i < 10; i++ { // the bound holds
		e, _ := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
		_ = Verify(e)
	}
	if n := len(activeVerifyCache.Load().set); n > 4 {
		t.Fatalf("cache holds %d, bound 4", n)
	}
}
