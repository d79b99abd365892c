package store

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// groupStats returns the commits made and the writes that queued behind a commit in flight.
func groupStats(s *Store) (commits, queued int) {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return s.group.commits, s.group.queued
}

// TestLoneWriteCommitsAtOnce: a write with no other writer in flight is committed on its own,
// without queueing for company (issue 20: it used to wait BatchDelay for a commit that nobody
// joined). The batch delay is set to its maximum, which the store ignores.
func TestLoneWriteCommitsAtOnce(t *testing.T) {
	s := open(t, t.TempDir(), WithBatchDelay(time.Second))
	c0, q0 := groupStats(s)
	const n = 5
	for i := range n {
		m, raw := msg(t, fmt.Sprintf("a:h:r%d", i), time.Now(), 600, 100)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
	}
	if c, q := groupStats(s); c-c0 != n || q != q0 {
		t.Fatalf("%d lone puts made %d commits and queued %d times; want %d commits, none queued", n, c-c0, q-q0, n)
	}
}

// TestWritesQueuedBehindACommitShareTheNext: writes that arrive while a commit is in flight
// are carried together by the next commit, one commit and one fsync for all of them.
func TestWritesQueuedBehindACommitShareTheNext(t *testing.T) {
	s := open(t, t.TempDir())
	release := make(chan struct{})
	var first sync.Once
	s.group.mu.Lock()
	s.group.beforeCommit = func(int) { first.Do(func() { <-release }) }
	s.group.mu.Unlock()
	c0, q0 := groupStats(s)

	const writers = 8
	var wg sync.WaitGroup
	put := func(i int) {
		m, raw := msg(t, fmt.Sprintf("a:h:r%d", i), time.Now(), 600, 100)
		if err := s.Put(m, raw); err != nil {
			t.Error(err)
		}
	}
	wg.Go(func() { put(0) }) // leads the first commit, held by the hook
	for {
		if c, _ := groupStats(s); c > c0 {
			break
		}
		runtime.Gosched()
	}
	for i := 1; i <= writers; i++ {
		wg.Go(func() { put(i) })
	}
	for {
		if _, q := groupStats(s); q-q0 == writers {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if c, _ := groupStats(s); c-c0 != 2 {
		t.Fatalf("%d writes queued behind one commit took %d commits after it; want 1", writers, c-c0-1)
	}
	if l, err := s.List(); err != nil || len(l) != writers+1 {
		t.Fatalf("list: %d entries, %v; want %d", len(l), err, writers+1)
	}
}

// TestFailingWriteFailsAlone: a write that fails in a shared commit gets its own error and
// the others are committed without it, as with bbolt's DB.Batch; a panicking write is an
// error, not a crash, and does not strand the writes queued with it.
func TestFailingWriteFailsAlone(t *testing.T) {
	s := open(t, t.TempDir())
	release := make(chan struct{})
	var first sync.Once
	s.group.mu.Lock()
	s.group.beforeCommit = func(int) { first.Do(func() { <-release }) }
	s.group.mu.Unlock()
	c0, q0 := groupStats(s)

	errBoom := errors.New("boom")
	write := func(key string, fail, panics bool) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			if err := tx.Bucket(bktSeen).Put([]byte(key), []byte("x")); err != nil {
				return err
			}
			switch {
			case panics:
				panic("bug")
			case fail:
				return errBoom
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	wg.Go(func() { errs[0] = s.batch(write("k0", false, false)) })
	for {
		if c, _ := groupStats(s); c > c0 {
			break
		}
		runtime.Gosched()
	}
	for i, w := range []struct{ fail, panics bool }{{false, false}, {true, false}, {false, true}, {false, false}} {
		wg.Go(func() { errs[i+1] = s.batch(write(fmt.Sprintf("k%d", i+1), w.fail, w.panics)) })
	}
	for {
		if _, q := groupStats(s); q-q0 == 4 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || errs[4] != nil || !errors.Is(errs[2], errBoom) || errs[3] == nil {
		t.Fatalf("results %v; want nil, nil, boom, a panic error, nil", errs)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		for i, want := range []bool{true, true, false, false, true} {
			if got := tx.Bucket(bktSeen).Get([]byte(fmt.Sprintf("k%d", i))) != nil; got != want {
				return fmt.Errorf("k%d stored %v, want %v", i, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteQueuedAloneDoesNotWait: writes that queued behind a commit of a store that is not
// busy (the next request's Put behind the last one's Delivered) commit as soon as that commit
// is done, without waiting BatchDelay for company.
func TestWriteQueuedAloneDoesNotWait(t *testing.T) {
	for _, behind := range []int{1, 3} {
		s := open(t, t.TempDir(), WithBatchDelay(100*time.Millisecond))
		release := make(chan struct{})
		var first sync.Once
		s.group.mu.Lock()
		s.group.beforeCommit = func(int) { first.Do(func() { <-release }) }
		s.group.mu.Unlock()
		c0, q0 := groupStats(s)
		var wg sync.WaitGroup
		put := func(i int) {
			m, raw := msg(t, fmt.Sprintf("a:h:r%d", i), time.Now(), 600, 100)
			if err := s.Put(m, raw); err != nil {
				t.Error(err)
			}
		}
		wg.Go(func() { put(0) })
		for {
			if c, _ := groupStats(s); c > c0 {
				break
			}
			runtime.Gosched()
		}
		for i := 1; i <= behind; i++ {
			wg.Go(func() { put(i) })
		}
		for {
			if _, q := groupStats(s); q-q0 == behind {
				break
			}
			runtime.Gosched()
		}
		close(release)
		wg.Wait()
		s.group.mu.Lock()
		waits := s.group.waits
		s.group.mu.Unlock()
		if waits != 0 {
			t.Fatalf("%d writes queued behind a lone commit waited for company %d times", behind, waits)
		}
	}
}
