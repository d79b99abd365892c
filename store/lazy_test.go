package store

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// PreparePut refuses what Put refuses, storing nothing, and counts the message against the
// limits until its commit: a second message that would not fit beside it is refused while
// the first is prepared. Commit stores it; a commit that finds the id queued gives the bytes
// back, and so does Abandon, which stores nothing.
func TestPreparePutRefusesFirstAndCommitsLater(t *testing.T) {
	s := open(t, t.TempDir(), WithMaxRecipientBytes(5000))
	old, raw := msg(t, "a:h:r", time.Now().Add(-time.Hour), 1, 100)
	if _, err := s.PreparePut(old, raw); err == nil {
		t.Fatal("PreparePut of an expired message: nil error")
	}
	m, raw := msg(t, "a:h:r", time.Now(), 600, 2000)
	p, err := s.PreparePut(m, raw)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("prepared, not committed: %d entries listed, want none", len(l))
	}
	m2, raw2 := msg(t, "a:h:r", time.Now(), 600, 3000)
	if _, err := s.PreparePut(m2, raw2); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a second message beside a prepared one over the limit: %v, want ErrQueueFull", err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(m.Envelope.MessageID); err != nil {
		t.Fatalf("committed entry: %v", err)
	}
	again, err := s.PreparePut(m, raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Commit(); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage(); u.OutboxBytes != int64(len(raw)) {
		t.Fatalf("outbox bytes %d after a commit of an id already queued, want %d", u.OutboxBytes, len(raw))
	}
	m3, raw3 := msg(t, "a:h:r", time.Now(), 600, 1000)
	p3, err := s.PreparePut(m3, raw3)
	if err != nil {
		t.Fatal(err)
	}
	p3.Abandon()
	if u := s.Usage(); u.OutboxBytes != int64(len(raw)) {
		t.Fatalf("outbox bytes %d after an abandoned put, want %d", u.OutboxBytes, len(raw))
	}
	if _, err := s.Get(m3.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("abandoned put: %v, want ErrNotFound", err)
	}
}

// lazyWaiting returns how many lazy writes wait for a commit to ride in.
func lazyWaiting(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.lazy)
}

// A lazy removal (DeliveredLazily) starts no commit of its own: it waits, and the next write
// (a Put) carries it in its commit, one commit for both.
func TestLazyRemovalRidesTheNextCommit(t *testing.T) {
	s := open(t, t.TempDir())
	s.cfg.lazyDelay = time.Hour
	m, raw := msg(t, "a:h:r", time.Now(), 600, 100)
	if err := s.Put(m, raw); err != nil {
		t.Fatal(err)
	}
	c0, _ := groupStats(s)
	removed := make(chan bool, 1)
	go func() {
		ok, err := s.DeliveredLazily(context.Background(), m.Envelope.MessageID)
		if err != nil {
			t.Error(err)
		}
		removed <- ok
	}()
	for lazyWaiting(s) == 0 {
		runtime.Gosched()
	}
	var carried int
	s.group.mu.Lock()
	s.group.beforeCommit = func(n int) { carried = n }
	s.group.mu.Unlock()
	m2, raw2 := msg(t, "a:h:r", time.Now(), 600, 100)
	if err := s.Put(m2, raw2); err != nil {
		t.Fatal(err)
	}
	if !<-removed {
		t.Fatal("the lazy removal found nothing to remove")
	}
	if c, _ := groupStats(s); c-c0 != 1 || carried != 2 {
		t.Fatalf("a lazy removal and a put made %d commits, the last carrying %d writes; want 1 carrying 2", c-c0, carried)
	}
	if _, err := s.Get(m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed entry: %v, want ErrNotFound", err)
	}
	if u := s.Usage(); u.OutboxBytes != int64(len(raw2)) {
		t.Fatalf("outbox bytes %d, want the second message's %d", u.OutboxBytes, len(raw2))
	}
}

// A lazy removal that no commit comes for commits on its own: when its context ends (the
// engine closing), or after lazyDelay.
func TestLazyRemovalCommitsAloneWhenNoCommitComes(t *testing.T) {
	for _, how := range []string{"context", "delay"} {
		t.Run(how, func(t *testing.T) {
			s := open(t, t.TempDir())
			s.cfg.lazyDelay = time.Hour
			ctx, cancel := context.WithCancel(context.Background())
			if how == "delay" {
				s.cfg.lazyDelay = time.Millisecond
			} else {
				cancel()
			}
			defer cancel()
			m, raw := msg(t, "a:h:r", time.Now(), 600, 100)
			if err := s.Put(m, raw); err != nil {
				t.Fatal(err)
			}
			if ok, err := s.DeliveredLazily(ctx, m.Envelope.MessageID); !ok || err != nil {
				t.Fatalf("lazy removal alone: %v, %v; want true, nil", ok, err)
			}
			s.group.mu.Lock()
			alone := s.group.lazyAlone
			s.group.mu.Unlock()
			if alone != 1 || lazyWaiting(s) != 0 {
				t.Fatalf("%d lazy writes committed alone, %d still waiting; want 1 and 0", alone, lazyWaiting(s))
			}
			if l, _ := s.List(); len(l) != 0 {
				t.Fatalf("%d entries after the removal", len(l))
			}
		})
	}
}

// AckLazily rides in the next commit, as DeliveredLazily does: the journal's apply of the
// next accepted message carries it (an accept itself writes the journal, not bbolt).
func TestLazyAckRidesTheNextAccept(t *testing.T) {
	s := open(t, t.TempDir())
	s.cfg.lazyDelay = time.Hour
	m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
	if _, err := s.Accept(m, raw); err != nil {
		t.Fatal(err)
	}
	if err := s.applyReady(); err != nil { // the message is in bbolt now, not in the journal
		t.Fatal(err)
	}
	c0, _ := groupStats(s)
	acked := make(chan error, 1)
	go func() { acked <- s.AckLazily(context.Background(), m.Envelope.MessageID) }()
	for lazyWaiting(s) == 0 {
		runtime.Gosched()
	}
	m2, raw2 := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
	if _, err := s.Accept(m2, raw2); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if c, _ := groupStats(s); c-c0 != 1 {
		t.Fatalf("a lazy ack and an accept made %d commits, want 1", c-c0)
	}
	if p, err := s.Pending(); err != nil || len(p) != 1 || p[0].MessageID != m2.Envelope.MessageID {
		t.Fatalf("pending %d (%v), want only the second message", len(p), err)
	}
}
