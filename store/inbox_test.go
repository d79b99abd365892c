package store

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestAcceptExactlyOnceAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	m, raw := msg(t, "a:h:me", t0, 60, 50)
	res, err := s.Accept(m, raw)
	if err != nil || res.Duplicate || !res.Pending {
		t.Fatalf("first accept: %+v %v", res, err)
	}
	if err := s.Close(); err != nil { // no Ack: the agent never took it
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	p, err := s.Pending()
	if err != nil || len(p) != 1 || p[0].MessageID != m.Envelope.MessageID || !bytes.Equal(p[0].Raw, raw) ||
		p[0].From != "a:h:sender" || p[0].To != "a:h:me" {
		t.Fatalf("pending after reopen: %+v %v", p, err)
	}
	res, err = s.Accept(m, raw) // the sender retried: its receipt was lost in the crash
	if err != nil || !res.Duplicate || !res.Pending || res.Seq != p[0].Seq {
		t.Fatalf("accept again: %+v %v, want duplicate still pending", res, err)
	}
	if p, _ := s.Pending(); len(p) != 1 {
		t.Fatalf("pending after duplicate: %d entries, want 1", len(p))
	}
	if err := s.Ack(m.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second ack: %v", err)
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Fatalf("pending after ack: %d", len(p))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	res, err = s.Accept(m, raw) // taken, restarted, retransmitted: still a duplicate
	if err != nil || !res.Duplicate || res.Pending {
		t.Fatalf("accept after ack and reopen: %+v %v", res, err)
	}
	if u := s.Usage(); u.InboxBytes != 0 {
		t.Fatalf("inbox bytes after ack: %d", u.InboxBytes)
	}
}

func TestAcceptConcurrentDuplicates(t *testing.T) {
	s := open(t, t.TempDir(), WithBatchDelay(time.Millisecond))
	m, raw := msg(t, "a:h:me", time.Now(), 60, 50)
	var mu sync.Mutex
	fresh := 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			res, err := s.Accept(m, raw)
			if err != nil {
				t.Error(err)
				return
			}
			if !res.Duplicate {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if p, _ := s.Pending(); fresh != 1 || len(p) != 1 || s.Usage().InboxBytes != int64(len(raw)) {
		t.Fatalf("16 concurrent accepts: %d fresh, %d pending, %d bytes; want 1, 1, %d", fresh, len(p), s.Usage().InboxBytes, len(raw))
	}
}

func TestPendingArrivalOrder(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	var want []string
	for i := range 5 {
		clk.Set(t0.Add(time.Duration(i) * time.Second))
		m, raw := msg(t, "a:h:me", t0, 600-int64(i)*10, 10) // later arrivals expire earlier
		if _, err := s.Accept(m, raw); err != nil {
			t.Fatal(err)
		}
		want = append(want, m.Envelope.MessageID)
	}
	if err := s.Ack(want[2]); err != nil {
		t.Fatal(err)
	}
	want = append(want[:2], want[3:]...)
	p, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range p {
		got = append(got, e.MessageID)
	}
	if !equal(got, want) {
		t.Fatalf("pending order %v, want %v", got, want)
	}
}

func TestAcceptRefuses(t *testing.T) {
	clk := newClock()
	m, raw := msgFrom(t, "peerA", "a:h:me", t0, 60, 1000)
	s := open(t, t.TempDir(), WithClock(clk.Now), WithMaxInboxBytes(int64(len(raw))+10))
	if _, err := s.Accept(m, raw); err != nil {
		t.Fatal(err)
	}
	m2, raw2 := msgFrom(t, "peerB", "a:h:me", t0, 60, 1000) // within peerB's share, over the inbox
	_, err := s.Accept(m2, raw2)
	var qf *QueueFullError
	if !errors.As(err, &qf) || qf.Limit != LimitInbox || protocol.CodeOf(err) != protocol.CodeRateLimited {
		t.Fatalf("accept over inbox limit: %v", err)
	}
	if seen, _ := s.Seen(t0); len(seen) != 1 {
		t.Fatalf("a refused message was marked seen: %v", seen)
	}
	old, raw3 := msg(t, "a:h:me", t0.Add(-time.Hour), 60, 10)
	if _, err := s.Accept(old, raw3); !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("expired accept: %v", err)
	}
}

func TestPurgeSeen(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	short, raw1 := msg(t, "a:h:me", t0, 10, 10)
	long, raw2 := msg(t, "a:h:me", t0, 100, 10)
	for _, p := range []struct {
		m   *protocol.Message
		raw []byte
	}{{short, raw1}, {long, raw2}} {
		if _, err := s.Accept(p.m, p.raw); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.PurgeSeen(t0.Add(9 * time.Second)); n != 0 || err != nil {
		t.Fatalf("purge before expiry: %d %v", n, err)
	}
	if n, err := s.PurgeSeen(t0.Add(10 * time.Second)); n != 1 || err != nil {
		t.Fatalf("purge at expiry: %d %v", n, err)
	}
	if n, _ := s.SeenLen(); n != 1 {
		t.Fatalf("seen after purge: %d, want 1", n)
	}
	seen, err := s.Seen(t0.Add(10 * time.Second))
	if err != nil || len(seen) != 1 || seen[0].ID != long.Envelope.MessageID {
		t.Fatalf("seen: %v %v", seen, err)
	}
	// The long-lived id is still a duplicate, and the window restored from Seen agrees.
	clk.Set(t0.Add(20 * time.Second))
	if res, err := s.Accept(long, raw2); err != nil || !res.Duplicate {
		t.Fatalf("accept long again: %+v %v", res, err)
	}
	w := protocol.NewReplayWindow(0)
	w.Restore(seen, t0.Add(20*time.Second))
	if !w.Seen(long.Envelope.MessageID, t0.Add(20*time.Second)) {
		t.Fatal("window restored from Seen does not know the id")
	}
}
