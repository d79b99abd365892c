package sim

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A simulated node's host trims its connections as a deployed node's does: above the high
// watermark it closes the least valued until the low watermark's worth of unprotected ones
// is left, and keeps the protected peers.
// mocknet's own hosts never close a connection.
func TestSimHost_TrimsConnectionsAboveHighWatermark(t *testing.T) {
	const peers, low, high = 8, 2, 4
	m := newMockNet(NetworkSpec{}, 1)
	defer m.Close()
	key := func() crypto.PrivKey {
		sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return sk
	}
	h0, err := m.addPeer(0, key())
	if err != nil {
		t.Fatal(err)
	}
	sh, err := newSimHost(h0, low, high, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	var kept peer.ID
	for i := 1; i <= peers; i++ {
		h, err := m.addPeer(i, key())
		if err != nil {
			t.Fatal(err)
		}
		if err := m.link(0, i, h0.ID(), h.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Network().DialPeer(context.Background(), h.ID()); err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if i == 1 {
			kept = h.ID()
			sh.ConnManager().Protect(kept, "test")
		}
	}
	if n := len(sh.Network().Conns()); n != peers {
		t.Fatalf("%d connections before trimming, want %d", n, peers)
	}

	sh.ConnManager().TrimOpenConns(context.Background())

	deadline := time.Now().Add(10 * time.Second)
	for len(sh.Network().Conns()) > low+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(sh.Network().Conns()); n != low+1 {
		t.Errorf("%d connections after trimming, want %d: the low watermark and the protected peer", n, low+1)
	}
	if sh.Network().Connectedness(kept) != network.Connected {
		t.Error("the protected peer was disconnected")
	}
	if err := sh.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := sh.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
