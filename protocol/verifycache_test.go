package protocol

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// A verification cache makes a second verification of the same document a lookup, for every
// Verifier that shares it, and never lets a tampered document through.
func TestVerifyCache_HitsOnlyForTheSameSignedDocument(t *testing.T) {
	cache := NewVerifyCache(4)
	v := &Verifier{Verified: cache}
	other := &Verifier{Keys: NewKeyCache(DefaultKeyCacheSize), Verified: cache} // another node of the process
	key, _, _ := crypto.GenerateEd25519Key(nil)
	b, _ := NewBuilder("test:cache:a", key, nil)
	m, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*Verifier{v, v, other} {
		if err := w.Verify(m); err != nil {
			t.Fatal(err)
		}
	}
	if hits := cache.Hits(); hits != 2 {
		t.Fatalf("hits = %d, want 2", hits)
	}
	if err := Verify(m); err != nil || cache.Hits() != 2 {
		t.Fatalf("Verify without a cache: %v, hits %d", err, cache.Hits())
	}
	forged := m.Clone()
	forged.Message.Payload = []byte(`{"event_type":"y"}`)
	if err := v.Verify(forged); CodeOf(err) != CodeIdentityInvalid {
		t.Fatalf("a tampered document verified through the cache: %v", err)
	}
	resigned := m.Clone()
	resigned.Envelope.Sender.IdentitySig = "AAAA" + resigned.Envelope.Sender.IdentitySig[4:]
	if err := other.Verify(resigned); CodeOf(err) != CodeIdentityInvalid {
		t.Fatalf("another signature verified through the cache: %v", err)
	}
	for i := 0; i < 10; i++ { // the bound holds
		e, _ := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
		_ = v.Verify(e)
	}
	if n := len(cache.set); n > 4 {
		t.Fatalf("cache holds %d, bound 4", n)
	}
	if NewVerifyCache(0) != nil || (*VerifyCache)(nil).Hits() != 0 {
		t.Fatal("a cache of size 0 is no cache, with no hits")
	}
}

// The key cache answers what decoding answers, keeps the key of a sender once one of its
// signatures verified, keeps its bound, and a nil one is no cache.
func TestKeyCache_AnswersAsDecodingDoesWithinItsBound(t *testing.T) {
	keys := NewKeyCache(3)
	v := &Verifier{Keys: keys}
	for i := 0; i < 10; i++ {
		key, _, _ := crypto.GenerateEd25519Key(nil)
		b, _ := NewBuilder("test:cache:a", key, nil)
		m, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
		if err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			pub, id, err := v.SenderKey(m)
			if err != nil || !pub.Equals(key.GetPublic()) || id != b.PeerID() {
				t.Fatalf("SenderKey = %v, %s, %v; want the builder's key and id", pub, id, err)
			}
			if _, ok := keys.get(m.Envelope.Sender.PeerID); ok != (round > 0) {
				t.Fatalf("round %d: the key is cached: %v, want %v (kept once a signature verified)", round, ok, round > 0)
			}
			if err := v.Verify(m); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(keys.pubs); n > 3 {
			t.Fatalf("cache holds %d, bound 3", n)
		}
	}
	if NewKeyCache(0) != nil {
		t.Fatal("a cache of size 0 is a cache")
	}
}

// Nothing is learned from a message that failed its check: a stream of made-up senders whose
// signatures do not verify (a hostile peer's, at no cost to it but the bytes) leaves the key
// cache as it was, so it neither grows nor restarts, and a correspondent's key stays put.
// A document whose signature verified once, for another node sharing the verification cache,
// is kept as if verified here.
func TestKeyCache_KeepsNoKeyWhoseSignatureFailed(t *testing.T) {
	const bound = 8
	keys := NewKeyCache(bound)
	v := &Verifier{Keys: keys, Verified: NewVerifyCache(16)}
	friend := newSender(t, "test:cache:friend")
	verifyEvent(t, v, friend)
	for i := range 5 * bound {
		m, err := newSender(t, "test:cache:forger").Event("*", IntentNotify, EventPayload{EventType: "x"})
		if err != nil {
			t.Fatal(err)
		}
		m.Envelope.TTLSeconds++ // signed content changed after signing
		if err := v.Verify(m); CodeOf(err) != CodeIdentityInvalid {
			t.Fatalf("forgery %d: %v, want IDENTITY_INVALID", i, err)
		}
		if _, _, err := v.SenderKey(m); err != nil {
			t.Fatal(err)
		}
		if n := len(keys.pubs); n != 1 {
			t.Fatalf("after forgery %d the cache holds %d keys, want the friend's alone", i, n)
		}
	}
	other := newSender(t, "test:cache:other")
	m, err := other.Event("*", IntentNotify, EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Verifier{Verified: v.Verified}).Verify(m); err != nil { // another node of the process
		t.Fatal(err)
	}
	if err := v.Verify(m); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys.get(other.PeerID().String()); !ok {
		t.Fatal("a sender verified through the shared verification cache was not kept")
	}
}

// A sender heard once keeps only its key's bytes in the cache (a beat every few minutes from
// each agent of a large mesh); one whose signatures verified expandAfter times is expected
// again, and its key is kept expanded, for the faster verification. Signatures that fail do
// not count: a forger cannot make the node spend the memory.
func TestKeyCache_ExpandsTheKeysOfSendersVerifiedOften(t *testing.T) {
	keys := NewKeyCache(8)
	v := &Verifier{Keys: keys}
	key, _, _ := crypto.GenerateEd25519Key(nil)
	b, _ := NewBuilder("test:cache:a", key, nil)
	expanded := func() bool {
		k, ok := keys.get(b.PeerID().String())
		return ok && k.ed.exp.Load() != nil
	}
	forged, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	forged.Envelope.TTLSeconds++ // signed content changed after signing
	for range 2 * expandAfter {
		if err := v.Verify(forged); err == nil {
			t.Fatal("a forged message verified")
		}
	}
	if expanded() {
		t.Fatalf("%d forged signatures expanded the key", 2*expandAfter)
	}
	for i := range expandAfter {
		m, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(m); err != nil {
			t.Fatalf("verification %d: %v", i+1, err)
		}
		if got, want := expanded(), i+1 >= expandAfter; got != want {
			t.Fatalf("after %d verifications the key is expanded: %v, want %v", i+1, got, want)
		}
	}
}

// newSender returns a builder with a fresh Ed25519 key: a sender the cache has not seen.
func newSender(t *testing.T, agent string) *Builder {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilder(agent, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyEvent has b sign an event and v verify it, and fails the test if it does not verify.
func verifyEvent(t *testing.T, v *Verifier, b *Builder) {
	t.Helper()
	m, err := b.Event("*", IntentNotify, EventPayload{EventType: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(m); err != nil {
		t.Fatal(err)
	}
}

// expandedSender returns a new sender whose key v's cache has expanded (expandAfter of its
// signatures verified), and that expanded key.
func expandedSender(t *testing.T, v *Verifier, agent string) (*Builder, *edKey) {
	t.Helper()
	b := newSender(t, agent)
	for range expandAfter {
		verifyEvent(t, v, b)
	}
	k, ok := v.Keys.get(b.PeerID().String())
	if !ok || k.ed.exp.Load() == nil {
		t.Fatalf("the key of %s, verified %d times, is not expanded", agent, expandAfter)
	}
	return b, k.ed
}

// A stream of new senders, each heard once (a hostile peer making up peer ids, or a large
// mesh's beats), fills the cache and makes it start over, but does not evict the expanded key
// of a sender verified often: that key stays, expanded, through any number of restarts.
func TestKeyCache_NewSendersDoNotEvictExpandedKeys(t *testing.T) {
	const bound = 8
	keys := NewKeyCache(bound)
	v := &Verifier{Keys: keys}
	often, before := expandedSender(t, v, "test:cache:often")
	for range 5 * bound {
		verifyEvent(t, v, newSender(t, "test:cache:once"))
		if n := len(keys.pubs); n > bound {
			t.Fatalf("cache holds %d, bound %d", n, bound)
		}
	}
	after, ok := keys.get(often.PeerID().String())
	if !ok || after.ed != before {
		t.Fatalf("%d new senders evicted the expanded key of a sender verified often", 5*bound)
	}
}

// A full cache keeps the expanded keys in use before idle ones: a correspondent that keeps
// sending holds its expanded key however many other keys are expanded and then fall silent
// (a hostile peer's made-up senders, four valid signatures each, or agents that left). Here,
// between two restarts, one more sender has its key expanded and falls silent, so every
// restart finds more expanded keys than the half of the bound it keeps; chosen at random, the
// correspondent's would go at about one restart in five or six, and it must last a hundred.
func TestKeyCache_KeepsTheExpandedKeysInUseBeforeIdleOnes(t *testing.T) {
	const bound = 8
	keys := NewKeyCache(bound)
	v := &Verifier{Keys: keys}
	friend, before := expandedSender(t, v, "test:cache:friend")
	for range 100 { // a restart each time round: bound/2 new senders fill what a restart leaves
		expandedSender(t, v, "test:cache:idle")
		for range bound/2 - 1 {
			verifyEvent(t, v, newSender(t, "test:cache:once"))
		}
		verifyEvent(t, v, friend)
	}
	if after, ok := keys.get(friend.PeerID().String()); !ok || after.ed != before {
		t.Fatal("restarts dropped the expanded key of a sender in use for idle ones")
	}
}
