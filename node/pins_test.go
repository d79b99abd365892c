package node

import (
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A full table takes the pin the heaviest peer used least recently; the others keep theirs.
func TestPins_AFullTableTakesFromThePeerHoldingTheMost(t *testing.T) {
	pt := newPinTable(4, 8)
	heavy, light := peer.ID("heavy"), peer.ID("light")
	pt.use("a", heavy)
	pt.use("b", heavy)
	pt.use("c", heavy)
	pt.use("x", light)
	pt.use("a", heavy) // a is now heavy's most recent; b its least
	if !pt.use("y", light) {
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
	pt := newPinTable(size, maxPinsPerPeer)
	for i := 0; i < size; i++ {
		pt.use(fmt.Sprintf("agent-%d", i), peer.ID(fmt.Sprintf("sybil-%d", i)))
	}
	for i := 0; i < size; i++ {
		if !pt.use(fmt.Sprintf("newcomer-%d", i), peer.ID(fmt.Sprintf("newcomer-%d", i))) {
			t.Fatalf("newcomer %d was not pinned", i)
		}
	}
	if pt.len() != size || len(pt.peers) != size {
		t.Fatalf("%d pins of %d peers, want %d of %d", pt.len(), len(pt.peers), size, size)
	}
}
