package discovery

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
)

// bucket0RefreshedAt is when node d last refreshed (or looked up a key in) its farthest bucket,
// the half of the id space that shares no prefix with it; zero if never.
func bucket0RefreshedAt(d *Discovery) time.Time {
	return d.dht.RoutingTable().GetTrackedCplsForRefresh()[0]
}

// A node that joins walks toward its own id: its routing table fills with its neighbourhood
// and the peers on the way, beyond the bootstrap peer it joined through, and it walks toward
// no other bucket (kad-dht's refresh of every bucket at the join was half of a mesh's join).
func TestJoin_WalksTowardItselfOnly(t *testing.T) {
	const n = 12
	m := newMesh(t, n, 1)
	m.waitJoined(t)
	for i, d := range m.ds[1:] {
		testsupport.WaitFor(t, 30*time.Second, "the join's walk filled the routing table", func() bool {
			return d.Status().RoutingTableSize >= 5
		})
		if at := bucket0RefreshedAt(d); !at.IsZero() {
			t.Fatalf("node %d walked toward its farthest bucket at %s, at its join", i+1, at.Format(time.RFC3339Nano))
		}
	}
}

// The routing table is refreshed, every bucket, on the package's own schedule (kad-dht's
// timer is off).
func TestRefreshLoop_RefreshesEveryBucket(t *testing.T) {
	often := func(c *config) error { c.refreshEvery = 50 * time.Millisecond; return nil }
	m := newMesh(t, 4, 1, often)
	m.waitJoined(t)
	for _, d := range m.ds {
		testsupport.WaitFor(t, 30*time.Second, "a refresh of the farthest bucket", func() bool {
			return !bucket0RefreshedAt(d).IsZero()
		})
	}
}

// A kick of the republish loop that waited for a Publish in progress does not store the record
// again once that Publish stored it; a record never stored is stored.
func TestPublishIfNeeded_StoresOnlyWhatNeedsIt(t *testing.T) {
	m := newMesh(t, 3, 1)
	m.waitJoined(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := m.ds[1]
	if err := d.setLocal(manifestFor(1)); err != nil {
		t.Fatal(err)
	}
	if err := d.publishLocal(ctx, true); err != nil {
		t.Fatal(err)
	}
	first := d.Status()
	if first.Published.IsZero() {
		t.Fatal("a record never stored was not stored by a kick")
	}
	if err := d.publishLocal(ctx, true); err != nil {
		t.Fatal(err)
	}
	if again := d.Status(); again.Seq != first.Seq || !again.Published.Equal(first.Published) {
		t.Fatalf("a kick stored a stored record again: seq %d -> %d", first.Seq, again.Seq)
	}
}
