package mocknet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns the two ends of a fresh stream between two linked peers with the given link
// options; the mocknet closes when the test ends.
func pair(t testing.TB, o LinkOptions) (a, b network.Stream) {
	t.Helper()
	mn := New()
	t.Cleanup(func() { _ = mn.Close() })
	mn.SetLinkDefaults(o)
	h1, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	h2, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(h1.ID(), h2.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(h1.ID(), h2.ID()); err != nil {
		t.Fatal(err)
	}
	got := make(chan network.Stream, 1)
	h2.SetStreamHandler("/test", func(s network.Stream) { got <- s })
	a, err = h1.NewStream(context.Background(), h2.ID(), "/test")
	if err != nil {
		t.Fatal(err)
	}
	// the other end sees the stream once the protocol is negotiated: write to get there.
	if _, err := a.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the other end never got the stream")
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(b, first); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestStream_WritesArriveInOrderThenEOFAfterCloseWrite(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	type result struct {
		got []byte
		err error
	}
	read := make(chan result, 1)
	go func() {
		got, err := io.ReadAll(b) // more than a window is written: read while it is
		read <- result{got, err}
	}()
	var want bytes.Buffer
	for i := range 200 {
		chunk := bytes.Repeat([]byte{byte(i)}, 1+i*37%3000)
		want.Write(chunk)
		if _, err := a.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r := <-read
	if r.err != nil {
		t.Fatalf("read: %v", r.err)
	}
	if !bytes.Equal(r.got, want.Bytes()) {
		t.Fatalf("read %d bytes, not the %d written in order", len(r.got), want.Len())
	}
	if _, err := a.Write([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write after CloseWrite: %v, want ErrClosed", err)
	}
}

func TestStream_AWriteArrivesAfterTheLinkLatency(t *testing.T) {
	const latency = 50 * time.Millisecond
	a, b := pair(t, LinkOptions{Latency: latency})
	start := time.Now()
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(b, buf); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < latency {
		t.Fatalf("arrived after %v, before the link's latency of %v", took, latency)
	}
}

func TestStream_ResetFailsBothEnds(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	read := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		read <- err
	}()
	if err := a.Reset(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, network.ErrReset) {
			t.Fatalf("the blocked read at the other end: %v, want ErrReset", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked at the other end was not woken by the reset")
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, network.ErrReset) {
		t.Fatalf("a write at the other end after the reset: %v, want ErrReset", err)
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, network.ErrReset) {
		t.Fatalf("a read at the resetting end: %v, want ErrReset", err)
	}
}

func TestStream_AFullWindowHoldsTheWriterUntilTheReaderReads(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	if _, err := a.Write(make([]byte, window)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := a.Write([]byte("one more"))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write past a full window returned (%v) before anything was read", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := io.ReadFull(b, make([]byte, window)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not woken when the reader made room")
	}
	got := make([]byte, len("one more"))
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "one more" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestStream_CloseReadFailsTheOtherEndsWrites(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	if err := b.CloseRead(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("a write to a closed read side: %v, want ErrClosed", err)
	}
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("a read after CloseRead: %v, want ErrClosed", err)
	}
}

func TestStream_ClosingTheConnectionResetsItsStreams(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	if err := a.Conn().Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, network.ErrReset) {
		t.Fatalf("a read after the connection closed: %v, want ErrReset", err)
	}
	if n := len(a.Conn().GetStreams()); n != 0 {
		t.Fatalf("%d streams left on the closed connection", n)
	}
}

// Most streams of a mesh are idle: once its reader has read everything, a direction holds no
// chunk (they went back to the pool for the next write of any stream).
func TestStream_ADrainedDirectionHoldsNoBuffer(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	msg := bytes.Repeat([]byte("x"), 3*chunkSize/2)
	if _, err := a.Write(msg); err != nil {
		t.Fatal(err)
	}
	h := b.(*stream).in
	h.mu.Lock()
	held := len(h.q.chunks) * chunkSize
	h.mu.Unlock()
	if held < len(msg) {
		t.Fatalf("the direction holds %d bytes of chunks with %d unread", held, len(msg))
	}
	if _, err := io.ReadFull(b, make([]byte, len(msg))); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.q.chunks) != 0 || h.q.Len() != 0 {
		t.Fatalf("a drained direction still holds %d chunks", len(h.q.chunks))
	}
}

// isTimeout reports whether err is a deadline's error, as the node tells it (a Timeout method).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &t) && t.Timeout()
}

// A read that waits for data fails at its deadline, and the stream stays usable: with the
// deadline moved, what is written afterwards is read.
func TestStream_AReadWaitingPastItsDeadlineTimesOut(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	if err := b.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Read(make([]byte, 8)); n != 0 || !isTimeout(err) {
		t.Fatalf("read past the deadline: %d bytes, %v; want a timeout", n, err)
	}
	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "late" {
		t.Fatalf("read after clearing the deadline: %q, %v", got, err)
	}
}

// A deadline set while a read waits applies to that read: it wakes and fails.
func TestStream_ADeadlineSetDuringAReadEndsIt(t *testing.T) {
	_, b := pair(t, LinkOptions{})
	read := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read wait (it fails the same if it has not yet)
	if err := b.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !isTimeout(err) {
			t.Fatalf("the waiting read returned %v; want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waited on past the deadline set for it")
	}
}

// What has arrived is read even past the deadline (as from a yamux stream); a write on its
// way, held by the link's latency, is waited for only until the deadline.
func TestStream_ArrivedDataIsReadPastTheDeadline(t *testing.T) {
	a, b := pair(t, LinkOptions{})
	a.Conn().(*conn).link.SetOptions(LinkOptions{Latency: time.Hour}) // from now on
	if _, err := a.Write([]byte("slow")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(make([]byte, 4)); !isTimeout(err) {
		t.Fatalf("a read of a write an hour away returned %v; want a timeout", err)
	}
	c, d := pair(t, LinkOptions{})
	if _, err := c.Write([]byte("here")); err != nil {
		t.Fatal(err)
	}
	if err := d.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if n, err := d.Read(got); err != nil || string(got[:n]) != "here" {
		t.Fatalf("read of arrived data past the deadline: %q, %v", got[:n], err)
	}
}

// A write waiting for room in a full window fails at its write deadline.
func TestStream_AWriteWaitingForRoomTimesOut(t *testing.T) {
	a, _ := pair(t, LinkOptions{})
	if _, err := a.Write(make([]byte, window)); err != nil {
		t.Fatal(err)
	}
	if err := a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Write([]byte("one more")); n != 0 || !isTimeout(err) {
		t.Fatalf("a write into a full window past its deadline: %d, %v; want a timeout", n, err)
	}
}

// A read waiting for a write on its way and a write waiting for room in the same direction
// wait together; each ends at its own deadline, whichever is first, and no matter that the
// other's wait ended before.
func TestStream_TwoWaitsInOneDirectionEachEndAtTheirOwnDeadline(t *testing.T) {
	for _, tc := range []struct {
		name            string
		readIn, writeIn time.Duration
	}{
		{"the read's deadline first", 20 * time.Millisecond, 60 * time.Millisecond},
		{"the write's deadline first", 60 * time.Millisecond, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, LinkOptions{})
			a.Conn().(*conn).link.SetOptions(LinkOptions{Latency: time.Hour}) // from now on
			if _, err := a.Write(make([]byte, window)); err != nil {          // fills the window, an hour away
				t.Fatal(err)
			}
			now := time.Now()
			if err := b.SetReadDeadline(now.Add(tc.readIn)); err != nil {
				t.Fatal(err)
			}
			if err := a.SetWriteDeadline(now.Add(tc.writeIn)); err != nil {
				t.Fatal(err)
			}
			read, wrote := make(chan error, 1), make(chan error, 1)
			go func() {
				_, err := b.Read(make([]byte, 8))
				read <- err
			}()
			go func() {
				_, err := a.Write([]byte("one more"))
				wrote <- err
			}()
			for _, w := range []struct {
				what string
				ch   chan error
			}{{"read", read}, {"write", wrote}} {
				select {
				case err := <-w.ch:
					if !isTimeout(err) {
						t.Fatalf("the waiting %s returned %v; want a timeout", w.what, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("the waiting %s outlived its deadline", w.what)
				}
			}
		})
	}
}
