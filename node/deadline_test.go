package node

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Every read has a deadline, on real sockets (mocknet, which the other node tests use, ignores
// deadlines): a peer that announces a frame and stalls is cut after frame_timeout, and one that
// opens a stream and says nothing after idle_timeout.
func TestStreams_ReadsHaveDeadlinesOnRealSockets(t *testing.T) {
	sk, _, _ := crypto.GenerateEd25519Key(nil)
	n, err := New(WithKey(sk), WithAgent(agentName(0), protocolManifest()), WithDataDir(t.TempDir()),
		WithListen("/ip4/127.0.0.1/tcp/0"), WithNAT(false), WithDiscovery(false), WithGossip(false),
		WithLogger(slog.New(slog.DiscardHandler)),
		WithTimeouts(300*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ck, _, _ := crypto.GenerateEd25519Key(nil)
	h, err := libp2p.New(libp2p.Identity(ck), libp2p.NoListenAddrs, libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	ended := func(s network.Stream, within time.Duration) bool {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(io.Discard, s) // returns when the node ends the stream
		}()
		select {
		case <-done:
			return true
		case <-time.After(within):
			s.Reset()
			<-done
			return false
		}
	}
	stalled, err := h.NewStream(ctx, n.ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1000)
	if _, err := stalled.Write(append(hdr[:], `{"envelope":`...)); err != nil {
		t.Fatal(err)
	}
	if !ended(stalled, 10*time.Second) {
		t.Fatal("a frame announced and never finished held its stream past frame_timeout")
	}
	silent, err := h.NewStream(ctx, n.ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := silent.Write(nil); err != nil { // opens the stream, says nothing
		t.Fatal(err)
	}
	if !ended(silent, 10*time.Second) {
		t.Fatal("a silent stream was kept past idle_timeout")
	}
}
