package discovery

import (
	"context"
	"testing"
	"time"
)

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
