package trust

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// A full table takes the pin the heaviest peer used least recently; the others keep theirs.
func TestPins_AFullTableTakesFromThePeerHoldingTheMost(t *testing.T) {
	pt := newPinTable(4, 8)
	heavy, light := peer.ID("heavy"), peer.ID("light")
	pt.use("a", heavy, t0)
	pt.use("b", heavy, t0)
	pt.use("c", heavy, t0)
	pt.use("x", light, t0)
	pt.use("a", heavy, t0) // a is now heavy's most recent; b its least
	if !pt.use("y", light, t0) {
		t.Fatal("a new pin was not added to a full table")
	}
	if _, ok := pt.get("b"); ok {
		t.Fatal("the heaviest peer's least recently used pin was kept")
	}
	for _, agent := range []string{"a", "c", "x", "y"} {
		if _, ok := pt.get(agent); !ok {
			t.Fatalf("pin %s was lost", agent)
		}
	}
}

// Peer identities cost nothing, so a full table may be spread over as many peers as it has
// pins: making room still takes constant time (a walk of the peers per new pin takes minutes
// at this size), under the trust store's lock that every message's check takes.
func TestPins_ManyPeersStayCheap(t *testing.T) {
	const size = 100_000
	pt := newPinTable(size, MaxPinsPerPeer)
	for i := 0; i < size; i++ {
		pt.use(fmt.Sprintf("agent-%d", i), peer.ID(fmt.Sprintf("sybil-%d", i)), t0)
	}
	for i := 0; i < size; i++ {
		if !pt.use(fmt.Sprintf("newcomer-%d", i), peer.ID(fmt.Sprintf("newcomer-%d", i)), t0) {
			t.Fatalf("newcomer %d was not pinned", i)
		}
	}
	if pt.len() != size || len(pt.peers) != size {
		t.Fatalf("%d pins of %d peers, want %d of %d", pt.len(), len(pt.peers), size, size)
	}
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// Pins no accepted message used for a while expire, whichever peer holds them; a pin used
// since stays, and forgetting one or all of a peer's pins leaves the others.
func TestPins_ExpireAndForget(t *testing.T) {
	pt := newPinTable(100, 8)
	a, b := peer.ID("a"), peer.ID("b")
	pt.use("old-a", a, t0)
	pt.use("kept-a", a, t0)
	pt.use("old-b", b, t0)
	pt.use("kept-a", a, t0.Add(time.Hour)) // used again later
	pt.use("new-b", b, t0.Add(2*time.Hour))
	if n := pt.expire(t0.Add(time.Minute)); n != 2 {
		t.Fatalf("expired %d pins, want old-a and old-b", n)
	}
	for agent, want := range map[string]bool{"old-a": false, "old-b": false, "kept-a": true, "new-b": true} {
		if _, ok := pt.get(agent); ok != want {
			t.Fatalf("pin %s held=%v after expiry, want %v", agent, ok, want)
		}
	}
	pt.use("other-b", b, t0.Add(3*time.Hour))
	if !pt.forget("kept-a") || pt.forget("kept-a") {
		t.Fatal("forget did not report the pin it removed exactly once")
	}
	if n := pt.forgetPeer(b); n != 2 || pt.len() != 0 || len(pt.peers) != 0 {
		t.Fatalf("forgetPeer removed %d, left %d pins of %d peers", n, pt.len(), len(pt.peers))
	}
	for n := range pt.byCount {
		if len(pt.byCount[n]) != 0 {
			t.Fatalf("byCount[%d] still holds %v", n, pt.byCount[n])
		}
	}
}

// The pins are saved only when they changed: refused claims and a flush with nothing new write
// no file; a pin taken is saved, and read back by the next store.
func TestStore_PinsAreSavedOnlyWhenTheyChanged(t *testing.T) {
	dir := t.TempDir()
	s, err := newTrustStore(dir, "", 0, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := peer.IDFromPrivateKey(testsupport.Key(t))
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "trust.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("trust.json was written without a pin to save (%v)", err)
	}
	s.pin(agentName(1), p)
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	again, err := newTrustStore(dir, "", 0, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := again.peerOf(agentName(1)); !ok || q != p {
		t.Fatalf("the saved pin read back as %v, %v", q, ok)
	}
}

// Pins carry when they were taken and last used, survive a restart with them, and expire when
// no accepted message used them for pin_expiry.
func TestStore_PinsAreListedSavedAndExpire(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	dir := t.TempDir()
	ts, err := newTrustStore(dir, "", 0, clock)
	if err != nil {
		t.Fatal(err)
	}
	ts.pin("test:a:old", newPeerID(t))
	now = now.Add(48 * time.Hour)
	ts.pin("test:a:new", newPeerID(t))
	if err := ts.flush(); err != nil {
		t.Fatal(err)
	}
	again, err := newTrustStore(dir, "", 0, clock)
	if err != nil {
		t.Fatal(err)
	}
	pins := again.list()
	if len(pins) != 2 || pins[0].AgentID != "test:a:new" || !pins[1].Used.Equal(pins[1].Pinned) || pins[0].Used.Sub(pins[1].Used) != 48*time.Hour {
		t.Fatalf("pins after a restart: %+v", pins)
	}
	if k := again.expire(now.Add(-24 * time.Hour)); k != 1 {
		t.Fatalf("expired %d pins, want the one unused for 48h", k)
	}
	if _, ok := again.peerOf("test:a:old"); ok {
		t.Fatal("the unused pin survived its expiry")
	}
}

func newPeerID(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
