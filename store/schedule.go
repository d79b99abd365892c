package store

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Due returns up to limit entries (all when limit <= 0) whose next attempt is at or before
// now and which have not expired at now, earliest next attempt first and, among equal
// times, oldest first. Entries that have expired are left for Expired.
func (s *Store) Due(now time.Time, limit int) ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktOutDue).Cursor()
		for k, id := c.First(); k != nil && !keyTime(k).After(now); k, id = c.Next() {
			e, err := getOutbox(tx, id)
			if err != nil {
				return err
			}
			if e == nil || !e.ExpiresAt.After(now) {
				continue
			}
			out = append(out, *e)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		return nil
	})
	return out, s.wrap("due", err)
}

// Reschedule records a failed attempt: Attempts and Backoff grow by one, NextAttemptAt
// becomes next and LastError lastErr. It returns ErrNotFound if the entry is gone (delivered or expired
// meanwhile), which the caller can ignore.
func (s *Store) Reschedule(id string, next time.Time, lastErr string) error {
	var found bool
	err := s.batch(func(tx *bolt.Tx) error {
		found = false
		e, err := getOutbox(tx, []byte(id))
		if err != nil || e == nil {
			return err
		}
		found = true
		if err := tx.Bucket(bktOutDue).Delete(dueKey(e.NextAttemptAt, e.Seq)); err != nil {
			return err
		}
		e.Attempts++
		e.Backoff++
		e.NextAttemptAt, e.LastError = next, lastErr
		return putOutbox(tx, e)
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return s.wrap("reschedule", err)
}

// RetryNow makes every entry for recipient that is scheduled after now due at now, without
// counting an attempt, for when the recipient is seen again, and sets the Backoff of those
// entries to 0, so that a failure after the recipient's return waits the shortest delay
// again rather than the long one grown while it was away. It returns how many it moved.
func (s *Store) RetryNow(recipient string, now time.Time) (int, error) {
	s.mu.Lock()
	queued := s.outRcpt[recipient]
	s.mu.Unlock()
	if queued == 0 {
		return 0, nil // nothing queued for it: no write transaction
	}
	var moved int
	err := s.batch(func(tx *bolt.Tx) error {
		moved = 0
		entries, err := forRecipient(tx, recipient)
		if err != nil {
			return err
		}
		for i := range entries {
			e := &entries[i]
			if !e.NextAttemptAt.After(now) {
				continue
			}
			if err := tx.Bucket(bktOutDue).Delete(dueKey(e.NextAttemptAt, e.Seq)); err != nil {
				return err
			}
			e.NextAttemptAt, e.Backoff = now, 0
			if err := putOutbox(tx, e); err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	return moved, s.wrap("retry now", err)
}

// Delivered removes the entry once its receipt arrived. It reports whether an entry was
// removed (false: already delivered or expired), so that a caller records delivery once.
// When it returns the removal is committed (and fsynced unless WithNoSync).
func (s *Store) Delivered(id string) (bool, error) {
	return s.delivered(id, s.batch)
}

// DeliveredLazily is Delivered as a lazy write (commit.go): the removal starts no commit of
// its own but rides in the next commit of another write (the next Put, say), or commits on
// its own when none comes within DefaultLazyDelay or ctx ends. It returns once committed.
// For the removal of a message the recipient acknowledged: losing it in a crash only means
// that the message is delivered once more after the restart, and the recipient, which
// remembers its id, answers DUPLICATE.
func (s *Store) DeliveredLazily(ctx context.Context, id string) (bool, error) {
	return s.delivered(id, func(fn func(*bolt.Tx) error) error { return s.batchLazy(ctx, fn) })
}

// delivered removes the entry of id through write (batch or batchLazy).
func (s *Store) delivered(id string, write func(func(*bolt.Tx) error) error) (bool, error) {
	var removed *OutboxEntry
	err := write(func(tx *bolt.Tx) error {
		removed = nil
		e, err := getOutbox(tx, []byte(id))
		if err != nil || e == nil {
			return err
		}
		removed = e
		return deleteOutbox(tx, e)
	})
	if err != nil {
		return false, s.wrap("delivered", err)
	}
	if removed != nil {
		s.releaseOutbox(removed.Recipient, removed.Size())
	}
	return removed != nil, nil
}

// Expired removes and returns every entry whose expiry is at or before now, earliest expiry
// first, in one transaction: each expired entry is returned by exactly one call, so the
// caller can send the sending agent one TIMEOUT error per message.
func (s *Store) Expired(now time.Time) ([]OutboxEntry, error) {
	if !s.anyDue(now) {
		return nil, nil // the common case, polled every tick: no write transaction (and no fsync)
	}
	var out []OutboxEntry
	err := s.db.Update(func(tx *bolt.Tx) error {
		out = out[:0]
		c := tx.Bucket(bktOutExp).Cursor()
		var ids [][]byte
		for k, id := c.First(); k != nil && !keyTime(k).After(now); k, id = c.Next() {
			ids = append(ids, bytes.Clone(id))
		}
		for _, id := range ids {
			e, err := getOutbox(tx, id)
			if err != nil {
				return err
			}
			if e == nil {
				continue
			}
			if err := deleteOutbox(tx, e); err != nil {
				return err
			}
			out = append(out, *e)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("expired", err)
	}
	for i := range out {
		s.releaseOutbox(out[i].Recipient, out[i].Size())
	}
	return out, nil
}

// anyDue reports whether an outbox entry expires at or before now, in a read
// transaction (none at all when the outbox is empty). When the read fails it answers true,
// so that Expired's own transaction reports the error.
func (s *Store) anyDue(now time.Time) bool {
	s.mu.Lock()
	empty := s.outTotal == 0
	s.mu.Unlock()
	if empty {
		return false
	}
	var due bool
	err := s.db.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bktOutExp).Cursor().First()
		due = k != nil && !keyTime(k).After(now)
		return nil
	})
	return due || err != nil
}
