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

// A stream's deadline is set again only when it must move: earlier (a frame's timeout after
// an idle one), or later by an eighth of its timeout; a read or write thus always has at
// least seven eighths of its timeout, and a busy stream does not restart a timer per frame.
func TestLazyDeadline_SetsOnlyWhenItMustMove(t *testing.T) {
	var sets []time.Time
	d := lazyDeadline{set: func(at time.Time) error { sets = append(sets, at); return nil }}
	t0 := time.Unix(1_000_000, 0)
	for _, step := range []struct {
		at      time.Duration // since t0
		timeout time.Duration
		set     bool
	}{
		{0, 60 * time.Second, true},                                    // the first
		{time.Second, 60 * time.Second, false},                         // 1 s later: within an eighth (7.5 s)
		{7 * time.Second, 60 * time.Second, false},                     // 7 s later
		{8 * time.Second, 60 * time.Second, true},                      // 8 s later: moves
		{9 * time.Second, 10 * time.Second, true},                      // a shorter timeout: earlier, so set
		{9*time.Second + 100*time.Millisecond, 60 * time.Second, true}, // back to the idle one
	} {
		n := len(sets)
		d.extend(t0.Add(step.at), step.timeout)
		if got := len(sets) > n; got != step.set {
			t.Fatalf("at +%s with timeout %s: set %v, want %v", step.at, step.timeout, got, step.set)
		}
		if want := t0.Add(step.at + step.timeout); d.at.Before(want.Add(-step.timeout/8)) || d.at.After(want) {
			t.Fatalf("at +%s: deadline %s, want within an eighth of %s before %s", step.at, d.at, step.timeout, want)
		}
	}
	// A deadline the stream refused is tried again at the next frame.
	fail := true
	d = lazyDeadline{set: func(time.Time) error {
		if fail {
			return io.ErrClosedPipe
		}
		sets = append(sets, time.Time{})
		return nil
	}}
	d.extend(t0, time.Minute)
	fail = false
	n := len(sets)
	if d.extend(t0.Add(time.Second), time.Minute); len(sets) == n {
		t.Fatal("a deadline the stream refused was not set again")
	}
}
