package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
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

// A walk that reached nobody stored nothing. kad-dht's PutValue then returns nil, having sent
// the record to no peer; the record must not count as published, or nobody would find the
// agent until the half-TTL republish.
func TestPublishThatReachedNobodyFails(t *testing.T) {
	m := newMesh(t, 2, 1)
	m.waitJoined(t)
	d := m.ds[1]
	// Its only DHT peer now resets every DHT stream: the walk queries it, and finds nobody.
	kad := protocol.ID(DefaultProtocolPrefix + "/kad/1.0.0")
	m.hosts[0].SetStreamHandler(kad, func(s network.Stream) { _ = s.Reset() })
	for _, c := range m.hosts[0].Network().Conns() {
		for _, s := range c.GetStreams() {
			if s.Protocol() == kad {
				_ = s.Reset() // the streams the DHT keeps open, served by the handler before
			}
		}
	}
	if err := d.setLocal(manifestFor(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.publishLocal(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "no peer took") {
		t.Fatalf("a publish whose walk reached nobody returned %v; want an error that says no peer took the record", err)
	}
	if st := d.Status(); !st.Published.IsZero() {
		t.Fatalf("the record counts as published at %v", st.Published)
	}
}
