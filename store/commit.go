package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Group commit. Every write of the store (Put, AcceptAll, Ack, Delivered, Reschedule,
// RetryNow, RememberGossip) goes through Store.batch, which replaces bbolt's DB.Batch.
// DB.Batch makes a lone write wait MaxBatchDelay for company before it commits; a request
// and its answer cross two stores one write at a time, so that wait was most of a durable
// round trip. batch waits only while there is company to wait for:
//
//   - a write that finds no commit in flight commits at once, on its own goroutine;
//   - a write that finds one in flight queues; when that commit (and its fsync) is done, the
//     first queued write leads the next commit, which carries every write queued by then
//     (at most BatchSize), so concurrent writers share one commit and one fsync;
//   - when the store is busy (others queued with that leader, and the last commit carried
//     at least busyCommit writes), it first waits until BatchDelay has passed since it
//     arrived, or BatchSize writes are queued, whichever comes first: a busy store's commit
//     carries what arrives in one window, as with DB.Batch. Otherwise (the next request's
//     write behind the last one's Delivered, or an Ack and an AcceptAll of one round trip
//     each) it commits at once. Without
//     the wait, commits carry only what arrived during one fsync, and a CPU-bound node
//     spends its time on commits (BenchmarkOneWay lost a third of its durable rate). A write
//     that finds the store idle never waits.
//
// A write returns only when the commit that carried it has returned (committed and, unless
// WithNoSync, fsynced), or with the error that stopped it.
//
// A lazy write (batchLazy: DeliveredLazily, AckLazily) is one whose loss in a crash costs
// nothing but a repetition, or that its caller keeps a record of elsewhere, so it need not be
// durable on its own: it starts no commit, and rides in the next commit of other writes,
// which carries every lazy write waiting (in arrival order with its own writes). Only when
// no commit comes within lazyDelay, or its caller's context ends, does it commit as any
// write does. The commits a request/response used to make for its Delivered and its
// handler's Ack (two of the four) thus ride in the next request's.
type group struct {
	mu      sync.Mutex
	running bool          // a leader is committing; new writes queue behind it
	queue   []*call       // writes waiting for the next commit, in arrival order
	lazy    []*call       // lazy writes waiting for a commit to ride in, in arrival order
	full    chan struct{} // set while a leader waits for company: closed at BatchSize writes
	last    int           // writes the last commit carried

	// For tests: beforeCommit, when set, is called by the leader with the writes it is
	// about to commit; commits, queued and waits count the commits made, the writes that
	// found a commit in flight and the leaders that waited for company (guarded by mu).
	beforeCommit func(n int)
	commits      int
	queued       int
	waits        int
	lazyAlone    int // lazy writes that found no commit to ride in and joined the queue
}

// call is one write waiting in the group.
type call struct {
	fn   func(*bolt.Tx) error
	done chan outcome // one outcome: the write's result, or the lead of the next commit
	at   time.Time    // when the write arrived
}

type outcome struct {
	lead bool // the receiver leads the next commit; its result comes later
	err  error
}

// batch runs fn in a write transaction, together with the other writes queued while a
// commit was in flight. As with DB.Batch, fn may run more than once (when another write in
// its commit fails, the rest run again without it), so it must reset what it sets outside
// tx; it must not start transactions of its own.
func (s *Store) batch(fn func(*bolt.Tx) error) error {
	return s.join(&call{fn: fn, done: make(chan outcome, 1), at: time.Now()})
}

// join queues c for the next commit, leads it when no commit is in flight, and returns c's
// result.
func (s *Store) join(c *call) error {
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.full != nil && len(g.queue) >= s.cfg.batchSize {
		close(g.full)
		g.full = nil
	}
	if !g.running {
		g.running = true
		g.mu.Unlock()
		s.lead(time.Time{})
		return (<-c.done).err
	}
	g.queued++
	g.mu.Unlock()
	if o := <-c.done; !o.lead {
		return o.err
	}
	s.lead(c.at)
	return (<-c.done).err
}

// lead commits the writes at the head of the queue (the leader's among them) and hands the
// lead to the first write queued after them, or ends the group when none is. A leader whose
// commit follows another passes when it arrived: when others queued with it, it first waits
// for more until BatchDelay after that (see group). A zero time commits at once.
func (s *Store) lead(arrived time.Time) {
	g := &s.group
	g.mu.Lock()
	busy := len(g.queue) > 1 && g.last >= busyCommit
	if wait := time.Until(arrived.Add(s.cfg.batchDelay)); !arrived.IsZero() && busy && wait > 0 && len(g.queue) < s.cfg.batchSize {
		full := make(chan struct{})
		g.full = full
		g.waits++
		g.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-full:
		case <-t.C:
		}
		t.Stop()
		g.mu.Lock()
		g.full = nil
	}
	calls := g.take(s.cfg.batchSize)
	n := len(calls)
	g.last = n
	g.commits++
	hook := g.beforeCommit
	g.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	s.commitAll(calls)
	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].done <- outcome{lead: true}
	} else {
		g.running = false
	}
	g.mu.Unlock()
}

// take removes from the queue and the lazy writes what the next commit carries: at most
// limit queued writes, then lazy ones up to limit in all, in arrival order. g.mu is held.
func (g *group) take(limit int) []*call {
	n := min(len(g.queue), limit)
	k := min(len(g.lazy), limit-n)
	calls := make([]*call, 0, n+k)
	calls = append(append(calls, g.queue[:n]...), g.lazy[:k]...)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	g.lazy = append(g.lazy[:0], g.lazy[k:]...)
	if k > 0 {
		slices.SortStableFunc(calls, func(a, b *call) int { return a.at.Compare(b.at) })
	}
	return calls
}

// batchLazy runs fn like batch, as a lazy write (see group): it waits for the next commit of
// other writes and rides in it, or commits as batch does after lazyDelay or when ctx ends.
// It returns once the commit that carried it has returned.
func (s *Store) batchLazy(ctx context.Context, fn func(*bolt.Tx) error) error {
	c := &call{fn: fn, done: make(chan outcome, 1), at: time.Now()}
	g := &s.group
	g.mu.Lock()
	g.lazy = append(g.lazy, c)
	g.mu.Unlock()
	t := time.NewTimer(s.cfg.lazyDelay)
	defer t.Stop()
	select {
	case o := <-c.done:
		return o.err
	case <-t.C:
	case <-ctx.Done():
	}
	g.mu.Lock()
	i := slices.Index(g.lazy, c)
	if i < 0 { // a commit took it meanwhile
		g.mu.Unlock()
		return (<-c.done).err
	}
	g.lazy = slices.Delete(g.lazy, i, i+1)
	g.lazyAlone++
	g.mu.Unlock()
	c.at = time.Now()
	return s.join(c)
}

// commitAll runs calls in one transaction and sends each its result. When one fails, the
// transaction is rolled back, that call runs again alone (so that its error is its own, as
// with DB.Batch) and the others are committed without it.
func (s *Store) commitAll(calls []*call) {
	for len(calls) > 0 {
		failed := -1
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := safely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range calls {
				c.done <- outcome{err: err}
			}
			return
		}
		c := calls[failed]
		calls = append(calls[:failed], calls[failed+1:]...)
		if len(calls) == 0 {
			c.done <- outcome{err: err} // it ran alone already
			return
		}
		c.done <- outcome{err: s.db.Update(func(tx *bolt.Tx) error { return safely(c.fn, tx) })}
	}
}

// busyCommit is the fewest writes of the last commit that make the store busy: 4, more than
// the writes a round trip makes in one store at once (a request's AcceptAll and the last
// one's lazy Ack, or a Put and a lazy Delivered), so sequential round trips never wait for
// company, even on a loaded machine where their writes overlap.
const busyCommit = 4

// DefaultLazyDelay is the longest a lazy write (DeliveredLazily, AckLazily) waits for a commit of other
// writes to ride in before it commits on its own: 100 ms.
const DefaultLazyDelay = 100 * time.Millisecond

// safely runs fn, turning a panic into an error, so that one write's bug fails that write
// and does not leave the writes queued behind it waiting for ever.
func safely(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	return fn(tx)
}
