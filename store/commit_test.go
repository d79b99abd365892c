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
// without queueing for company (it used to wait BatchDelay for a commit that nobody
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

// heldCommit holds the store's next commit before it begins, so that a test can queue writes
// behind it: lead starts the write that leads it, queue the writes that wait for the next
// one, done lets everything go.
type heldCommit struct {
	s       *Store
	release chan struct{}
	wg      sync.WaitGroup
	c0, q0  int
}

func holdNextCommit(s *Store) *heldCommit {
	h := &heldCommit{s: s, release: make(chan struct{})}
	var first sync.Once
	s.group.mu.Lock()
	s.group.beforeCommit = func(int) { first.Do(func() { <-h.release }) }
	s.group.mu.Unlock()
	h.c0, h.q0 = groupStats(s)
	return h
}

// lead runs write on its own goroutine and returns once it leads the held commit.
func (h *heldCommit) lead(write func()) {
	h.wg.Go(write)
	h.until(func(c, _ int) bool { return c > h.c0 })
}

// queue runs each write on its own goroutine and returns once all of them queued behind the
// held commit.
func (h *heldCommit) queue(writes ...func()) {
	for _, w := range writes {
		h.wg.Go(w)
	}
	h.until(func(_, q int) bool { return q-h.q0 == len(writes) })
}

// done releases the held commit, waits for every write started and returns the commits made
// since holdNextCommit, the held one included.
func (h *heldCommit) done() int {
	close(h.release)
	h.wg.Wait()
	c, _ := groupStats(h.s)
	return c - h.c0
}

func (h *heldCommit) until(cond func(commits, queued int) bool) {
	for {
		if cond(groupStats(h.s)) {
			return
		}
		runtime.Gosched()
	}
}

// putter returns a write that puts a new message for recipient a:h:r<i>, and records its
// error in *err when err is not nil (else fails the test on one).
func putter(t *testing.T, s *Store, i int, err *error) func() {
	return func() {
		m, raw := msg(t, fmt.Sprintf("a:h:r%d", i), time.Now(), 600, 100)
		e := s.Put(m, raw)
		if err != nil {
			*err = e
		} else if e != nil {
			t.Error(e)
		}
	}
}

// TestWritesQueuedBehindACommitShareTheNext: writes that arrive while a commit is in flight
// are carried together by the next commit, one commit and one fsync for all of them.
func TestWritesQueuedBehindACommitShareTheNext(t *testing.T) {
	s := open(t, t.TempDir())
	h := holdNextCommit(s)
	const writers = 8
	h.lead(putter(t, s, 0, nil))
	behind := make([]func(), writers)
	for i := range behind {
		behind[i] = putter(t, s, i+1, nil)
	}
	h.queue(behind...)
	if c := h.done(); c != 2 {
		t.Fatalf("%d writes queued behind one commit took %d commits after it; want 1", writers, c-1)
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
	h := holdNextCommit(s)

	errBoom := errors.New("boom")
	errs := make([]error, 5)
	write := func(i int, fail, panics bool) func() {
		return func() {
			errs[i] = s.batch(func(tx *bolt.Tx) error {
				if err := tx.Bucket(bktSeen).Put([]byte(fmt.Sprintf("k%d", i)), []byte("x")); err != nil {
					return err
				}
				switch {
				case panics:
					panic("bug")
				case fail:
					return errBoom
				}
				return nil
			})
		}
	}
	h.lead(write(0, false, false))
	h.queue(write(1, false, false), write(2, true, false), write(3, false, true), write(4, false, false))
	h.done()
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
		h := holdNextCommit(s)
		h.lead(putter(t, s, 0, nil))
		writes := make([]func(), behind)
		for i := range writes {
			writes[i] = putter(t, s, i+1, nil)
		}
		h.queue(writes...)
		h.done()
		s.group.mu.Lock()
		waits := s.group.waits
		s.group.mu.Unlock()
		if waits != 0 {
			t.Fatalf("%d writes queued behind a lone commit waited for company %d times", behind, waits)
		}
	}
}

// TestCloseWhileWritesAreQueued: a Close that comes while writes wait for a commit strands
// none of them: the held commit and every write queued behind it return ErrClosed, and
// nothing was written.
func TestCloseWhileWritesAreQueued(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	h := holdNextCommit(s)
	errs := make([]error, 4)
	h.lead(putter(t, s, 0, &errs[0]))
	h.queue(putter(t, s, 1, &errs[1]), putter(t, s, 2, &errs[2]), putter(t, s, 3, &errs[3]))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h.done()
	for i, err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("write %d after Close: %v, want ErrClosed", i, err)
		}
	}
	again := open(t, dir)
	if l, err := again.List(); err != nil || len(l) != 0 {
		t.Fatalf("list after reopening: %d entries, %v; want none", len(l), err)
	}
}
