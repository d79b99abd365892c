package mocknet

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// onDemand returns a mocknet whose linker links every pair with latency d, and two of its
// hosts, not linked yet.
func onDemand(t *testing.T, d time.Duration) (*mocknet, host.Host, host.Host) {
	t.Helper()
	mn := New().(*mocknet)
	t.Cleanup(func() { _ = mn.Close() })
	mn.SetLinker(func(_, _ peer.ID) (LinkOptions, bool) { return LinkOptions{Latency: d}, true })
	a, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	b, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	return mn, a, b
}

func TestLinks_ALinkMadeByADialGoesWithItsLastConnection(t *testing.T) {
	mn, a, b := onDemand(t, 5*time.Millisecond)
	ctx := context.Background()
	for round := range 2 {
		if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
			t.Fatalf("round %d: dial: %v", round, err)
		}
		ls := mn.LinksBetweenPeers(a.ID(), b.ID())
		if len(ls) != 1 {
			t.Fatalf("round %d: %d links between the pair while connected, want 1", round, len(ls))
		}
		if got := ls[0].Options().Latency; got != 5*time.Millisecond {
			t.Fatalf("round %d: the link's latency is %v, want the linker's 5ms", round, got)
		}
		l := ls[0].(*link)
		if err := a.Network().ClosePeer(b.ID()); err != nil {
			t.Fatal(err)
		}
		waitReleased(t, l)
		left := func() int {
			mn.Lock()
			defer mn.Unlock()
			return len(mn.links)
		}
		for i := 0; left() != 0; i++ { // the last end's release removes it just after
			if i == 100 {
				t.Fatalf("round %d: the link outlived its last connection: %d peers still in the links table", round, left())
			}
			time.Sleep(time.Millisecond)
		}
		for _, h := range []host.Host{a, b} {
			pn := h.Network().(*peernet)
			pn.RLock()
			maps := len(pn.connsByPeer)
			pn.RUnlock()
			if maps != 0 {
				t.Fatalf("round %d: %s keeps %d peers' connection maps with no connection in them", round, h.ID(), maps)
			}
		}
	}
}

// waitReleased waits until both ends of every connection on l have closed (the far end closes
// on a goroutine of its own).
func waitReleased(t *testing.T, l *link) {
	t.Helper()
	for i := 0; l.ends.Load() != 0; i++ {
		if i == 200 {
			t.Fatalf("%d connection ends still on the link", l.ends.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLinks_ALinkMadeByLinkPeersStays(t *testing.T) {
	mn, a, b := onDemand(t, 0)
	if _, err := mn.LinkPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(a.ID(), b.ID()); err != nil {
		t.Fatal(err)
	}
	l := mn.LinksBetweenPeers(a.ID(), b.ID())[0].(*link)
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	waitReleased(t, l)
	if n := len(mn.LinksBetweenPeers(a.ID(), b.ID())); n != 1 {
		t.Fatalf("%d links between the pair after their connection closed, want the one LinkPeers made", n)
	}
}
