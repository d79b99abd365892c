package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The journal's other half (journal.go): admitting messages, applying them to bbolt, and
// acknowledging one that is not applied yet.

const (
	// applyDelay is how long the applier lets journaled messages gather before it commits
	// them to bbolt: 100 ms, so that a stream of round trips costs bbolt one commit (two
	// fdatasync) every 100 ms instead of one per message, and the journal's syncs on the
	// path seldom queue behind bbolt's on the disk.
	applyDelay = 100 * time.Millisecond
	// applyBatch and applyBytes are how many waiting messages, or bytes of them, make the
	// applier commit without waiting: what the journal holds in memory stays small.
	applyBatch = 512
	applyBytes = 4 << 20
	// applyRetry is how long the applier waits after a commit failed before it tries again
	// (the messages stay in the journal and in memory meanwhile).
	applyRetry = time.Second
)

// admit checks entries (nil ones were refused already) against the seen set, bbolt's and the
// journal's, fills their results, numbers the new ones and queues their write. It returns the
// write to wait for (nil when no entry needs one) and whether the caller leads the journal's
// next write.
func (s *Store) admit(entries []*InboxEntry, results []AcceptResult, now time.Time) (w *jwrite, lead bool, err error) {
	j := s.j
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return nil, false, ErrClosed
	case j.err != nil:
		return nil, false, j.err
	}
	w = &jwrite{done: make(chan outcome, 1)}
	wait := false // a duplicate of a message whose write has not returned waits for it
	inCall := map[string]int{}
	err = s.db.View(func(tx *bolt.Tx) error {
		seen, ids := tx.Bucket(bktSeen), tx.Bucket(bktInboxID)
		for i, e := range entries {
			if e == nil {
				continue
			}
			if first, ok := inCall[e.MessageID]; ok {
				results[i] = AcceptResult{Duplicate: true, Pending: true, Seq: results[first].Seq}
				continue
			}
			if je := j.pending[e.MessageID]; je != nil {
				results[i] = AcceptResult{Duplicate: true, Pending: !je.acked, Seq: je.e.Seq}
				wait = true
				continue
			}
			if v := seen.Get([]byte(e.MessageID)); v != nil {
				exp, _, err := decodeExpiry(kindSeen, v)
				if err != nil {
					return fmt.Errorf("seen id %s: %w", e.MessageID, err)
				}
				if exp.After(now) {
					results[i] = AcceptResult{Duplicate: true}
					if seq := ids.Get([]byte(e.MessageID)); seq != nil {
						results[i].Pending, results[i].Seq = true, beUint(seq)
					}
					continue
				}
			}
			j.seq++
			e.Seq = j.seq
			results[i] = AcceptResult{Pending: true, Seq: e.Seq}
			inCall[e.MessageID] = i
			je := &jentry{e: e, done: make(chan struct{})}
			j.pending[e.MessageID] = je
			w.entries = append(w.entries, je)
		}
		return nil
	})
	if err != nil {
		for _, je := range w.entries {
			delete(j.pending, je.e.MessageID)
		}
		return nil, false, err
	}
	if len(w.entries) == 0 && !wait {
		return nil, false, nil
	}
	j.queue = append(j.queue, w)
	j.writers.Add(1)
	lead = !j.writing
	j.writing = true
	return w, lead, nil
}

// applyTx writes a journaled message into bbolt: its seen id and, unless it was acknowledged
// meanwhile, its inbox entry. A message bbolt has seen already, or that has expired, is
// skipped: replaying a journal is idempotent. It reports whether it wrote the entry.
func applyTx(tx *bolt.Tx, e *InboxEntry, acked bool, now time.Time) (bool, error) {
	id := []byte(e.MessageID)
	seen, seenExp, inbox := tx.Bucket(bktSeen), tx.Bucket(bktSeenExp), tx.Bucket(bktInbox)
	if !e.ExpiresAt.After(now) {
		return false, nil
	}
	if v := seen.Get(id); v != nil {
		exp, _, err := decodeExpiry(kindSeen, v)
		if err != nil {
			return false, fmt.Errorf("seen id %s: %w", e.MessageID, err)
		}
		if exp.After(now) {
			return false, nil
		}
		if err := seenExp.Delete(timeKey(exp, id)); err != nil {
			return false, err
		}
	}
	if err := errors.Join(
		seen.Put(id, encodeExpiry(kindSeen, e.ExpiresAt, e.Peer)),
		seenExp.Put(timeKey(e.ExpiresAt, id), nil),
	); err != nil {
		return false, err
	}
	if e.Seq > inbox.Sequence() {
		if err := inbox.SetSequence(e.Seq); err != nil {
			return false, err
		}
	}
	if acked {
		return false, nil
	}
	v, err := encodeInbox(e)
	if err != nil {
		return false, err
	}
	return true, errors.Join(inbox.Put(be64(e.Seq), v), tx.Bucket(bktInboxID).Put(id, be64(e.Seq)))
}

// applyReady commits every synced journaled message to bbolt, in commits of the group of at
// most applyBytes of messages each (or one message), so that what a commit copies (bbolt
// writes each value into pages of its own) stays small whatever arrived at once. One apply
// runs at a time (the applier, a reader of the inbox, an acknowledgement or the journal's
// leader starting over).
func (s *Store) applyReady() error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.applyLocked()
}

// applyLocked is applyReady for a caller that holds applyMu.
func (s *Store) applyLocked() error {
	for {
		if more, err := s.applyOnce(); err != nil || !more {
			return err
		}
	}
}

// takeReady takes from the journal's ready messages the first applyBytes of them (at least
// one) for one commit; j.mu is held.
func (j *journal) takeReady() []*jentry {
	n, bytes := 0, int64(0)
	for n < len(j.ready) && (n == 0 || bytes+int64(len(j.ready[n].e.Raw)) <= applyBytes) {
		bytes += int64(len(j.ready[n].e.Raw))
		n++
	}
	batch := j.ready[:n:n]
	if j.ready = j.ready[n:]; len(j.ready) == 0 {
		j.ready = nil
	}
	j.readyBytes -= bytes
	return batch
}

// applyOnce commits one batch of the ready messages (takeReady) and reports whether more are
// ready.
func (s *Store) applyOnce() (more bool, err error) {
	j := s.j
	j.mu.Lock()
	batch := j.takeReady()
	acked := make([]bool, len(batch))
	for i, je := range batch {
		je.taken, acked[i] = true, je.acked
	}
	j.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	now := s.cfg.now()
	wrote := make([]bool, len(batch))
	err = s.batch(func(tx *bolt.Tx) error {
		for i, je := range batch {
			var err error
			if wrote[i], err = applyTx(tx, je.e, acked[i], now); err != nil {
				return err
			}
		}
		return nil
	})
	j.mu.Lock()
	if err != nil {
		for _, je := range batch {
			je.taken = false
			j.readyBytes += int64(len(je.e.Raw))
		}
		j.ready = append(batch, j.ready...)
		j.mu.Unlock()
		return false, s.wrap("apply journal", err)
	}
	for _, je := range batch {
		delete(j.pending, je.e.MessageID)
		close(je.done)
	}
	if len(j.pending) == 0 && !j.writing && len(j.queue) == 0 {
		j.off = 0 // everything is in bbolt: the next record starts over
	}
	more = len(j.ready) > 0
	j.mu.Unlock()
	// What bbolt did not store leaves the inbox's counters now: a message acknowledged while
	// journaled, and one that expired before its apply (no acknowledgement will find it).
	for i, je := range batch {
		if !wrote[i] {
			s.releaseInbox(je.e.Peer, je.e.Size)
			s.bodies.remove(je.e.body) // acknowledged or expired before its apply
		}
	}
	return more, nil
}

// wakeApplier tells the applier that messages are waiting.
func (s *Store) wakeApplier() {
	select {
	case s.applyWake <- struct{}{}:
	default:
	}
}

// applyLoop is the applier: woken by a synced journal write, it lets messages gather for
// applyDelay (or until applyBatch wait) and commits them. It runs until Close.
func (s *Store) applyLoop() {
	defer close(s.applyDone)
	for {
		select {
		case <-s.applyStop:
			return
		case <-s.applyWake:
		}
		t := time.NewTimer(applyDelay)
	gather:
		for !s.manyReady() {
			select {
			case <-s.applyStop:
				t.Stop()
				return
			case <-t.C:
				break gather
			case <-s.applyWake:
			}
		}
		t.Stop()
		if err := s.applyReady(); err != nil && !errors.Is(err, ErrClosed) {
			s.log.Error("store: applying the journal failed; its messages stay in the journal and are tried again", "err", err.Error())
			select {
			case <-s.applyStop:
				return
			case <-time.After(applyRetry):
				s.wakeApplier()
			}
		}
	}
}

// manyReady reports whether enough messages wait for the applier to commit them at once.
func (s *Store) manyReady() bool {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	return len(s.j.ready) >= applyBatch || s.j.readyBytes >= applyBytes
}

// ackJournaled acknowledges id if the journal holds it: it marks the message acknowledged, so
// that its apply writes only its seen id, and returns once that apply committed; lazily, it
// returns at once and the applier's next commit carries it (the caller keeps its own record,
// and nobody waits for it). It reports false when id is not in the journal, for the caller
// to remove it from bbolt.
func (s *Store) ackJournaled(ctx context.Context, id string, lazily bool) (bool, error) {
	j := s.j
	j.mu.Lock()
	je := j.pending[id]
	switch {
	case je == nil:
		j.mu.Unlock()
		return false, nil
	case je.acked:
		j.mu.Unlock()
		return true, ErrNotFound
	case je.taken: // an apply is committing it unacknowledged: then remove it from bbolt
		j.mu.Unlock()
		select {
		case <-je.done:
			return je.err != nil, je.err
		case <-ctx.Done():
			return true, ctx.Err()
		}
	}
	je.acked = true
	j.mu.Unlock()
	if lazily {
		return true, nil
	}
	if err := s.applyReady(); err != nil {
		j.mu.Lock()
		if !je.taken {
			je.acked = false
		}
		j.mu.Unlock()
		return true, err
	}
	select {
	case <-je.done:
		return true, je.err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// closeJournal stops the applier, waits for the writes in flight, applies what is left and
// closes the file. Whoever still waits for a message's apply is released.
func (s *Store) closeJournal() error {
	j := s.j
	close(s.applyStop)
	<-s.applyDone
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	j.writers.Wait()
	// applyMu is held from the last apply to the release below, so that no reader's apply
	// (racing Close) commits a batch between them and releases its waiters a second time.
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	err := s.applyLocked()
	j.mu.Lock()
	for id, je := range j.pending {
		delete(j.pending, id)
		je.err = ErrClosed
		close(je.done)
	}
	// What the last apply could not commit stays in the file for the next Open.
	j.ready, j.readyBytes = nil, 0
	j.mu.Unlock()
	return errors.Join(err, j.f.Close())
}
