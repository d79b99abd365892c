package store

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Seen returns the persistent seen set as replay entries that have not expired at now,
// earliest expiry first, each with its owner (the peer that sent it; "" for ids stored before
// owners were kept), ready for protocol.ReplayWindow.Restore: a node that keeps an in-memory
// window as a fast path in front of Accept warms it after a restart, charging each id to its
// peer.
func (s *Store) Seen(now time.Time) ([]protocol.ReplayEntry, error) {
	if err := s.applyReady(); err != nil {
		return nil, err
	}
	out, err := s.expiring(bktSeen, bktSeenExp, kindSeen, now)
	return out, s.wrap("seen", err)
}

// RememberGossip records the ids of gossip messages (broadcast and group) the node delivered
// to its agent, with their expiry and owner, in one batched commit, so that after a restart
// GossipSeen restores the gossip replay window and nobody can replay them to the agent. An id
// already remembered keeps the later of its two expiries (and the owner that came with it).
// Every id must be a UUID; otherwise nothing is stored and the error names the entry.
func (s *Store) RememberGossip(entries []protocol.ReplayEntry) error {
	if len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		if _, err := uuid.Parse(e.ID); err != nil {
			return protocol.Errorf(protocol.CodePayloadInvalid, "store: gossip entry %d: id %q is not a UUID", i, e.ID)
		}
	}
	return s.wrap("remember gossip", s.batch(func(tx *bolt.Tx) error {
		ids, exps := tx.Bucket(bktGossip), tx.Bucket(bktGossipExp)
		for _, e := range entries {
			id := []byte(e.ID)
			if v := ids.Get(id); v != nil {
				old, _, err := decodeExpiry(kindGossip, v)
				if err == nil && !e.Expires.After(old) {
					continue // the stored expiry is the later one
				}
				if err := exps.Delete(timeKey(old, id)); err != nil {
					return err
				}
			}
			if err := errors.Join(
				ids.Put(id, encodeExpiry(kindGossip, e.Expires, e.Owner)),
				exps.Put(timeKey(e.Expires, id), nil),
			); err != nil {
				return err
			}
		}
		return nil
	}))
}

// GossipSeen returns the remembered gossip ids that have not expired at now, earliest expiry
// first, owners included, for the gossip protocol.ReplayWindow's Restore.
func (s *Store) GossipSeen(now time.Time) ([]protocol.ReplayEntry, error) {
	out, err := s.expiring(bktGossip, bktGossipExp, kindGossip, now)
	return out, s.wrap("gossip seen", err)
}

// expiring lists the ids of an id -> expiry+owner set through its expiry index, from the
// first expiry after now on.
func (s *Store) expiring(ids, exps []byte, kind byte, now time.Time) ([]protocol.ReplayEntry, error) {
	var out []protocol.ReplayEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		byID := tx.Bucket(ids)
		c := tx.Bucket(exps).Cursor()
		for k, _ := c.Seek(timeKey(now.Add(1))); k != nil; k, _ = c.Next() {
			e := protocol.ReplayEntry{ID: string(k[8:]), Expires: keyTime(k).UTC()}
			if v := byID.Get(k[8:]); v != nil {
				_, owner, err := decodeExpiry(kind, v)
				if err != nil {
					return fmt.Errorf("%s id %s: %w", ids, e.ID, err)
				}
				e.Owner = owner
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// PurgeSeen forgets the seen ids and the gossip ids whose messages expired at or before now
// and returns how many it removed. Such a message can no longer be accepted (Accept refuses
// it as expired, and so does the gossip path), so forgetting it cannot let a replay through.
//
// The owner calls it on a schedule, e.g. every minute. It first applies the journal's
// waiting messages (journal.go); then, when nothing has expired, it writes nothing (no write
// transaction, no fsync). One call removes at most
// MaxPurgePerCall ids, so that a large backlog never holds the writer lock for long; a call
// that returns MaxPurgePerCall may have left more, and the caller can call again at once.
func (s *Store) PurgeSeen(now time.Time) (int, error) {
	if err := s.applyReady(); err != nil {
		return 0, err
	}
	if !s.anyExpired(now) {
		return 0, nil
	}
	var n int
	err := s.db.Update(func(tx *bolt.Tx) error {
		n = 0
		for _, set := range [][2][]byte{{bktSeen, bktSeenExp}, {bktGossip, bktGossipExp}} {
			byID, exps := tx.Bucket(set[0]), tx.Bucket(set[1])
			var keys [][]byte
			c := exps.Cursor()
			for k, _ := c.First(); k != nil && n+len(keys) < MaxPurgePerCall && !keyTime(k).After(now); k, _ = c.Next() {
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range keys {
				if err := errors.Join(exps.Delete(k), deleteIfExpires(byID, k)); err != nil {
					return err
				}
			}
			n += len(keys)
		}
		return nil
	})
	return n, s.wrap("purge seen", err)
}

// deleteIfExpires deletes the id of the index key k = expiry + id unless the id was stored
// again with a later expiry (which then has an index key of its own).
func deleteIfExpires(byID *bolt.Bucket, k []byte) error {
	v := byID.Get(k[8:])
	if len(v) < 8 || !bytes.Equal(v[:8], k[:8]) {
		return nil
	}
	return byID.Delete(k[8:])
}

// anyExpired reports, in a read transaction, whether a seen or gossip id expired at or before
// now. When the read fails it answers true, so that PurgeSeen's own transaction reports it.
func (s *Store) anyExpired(now time.Time) bool {
	var due bool
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bktSeenExp, bktGossipExp} {
			k, _ := tx.Bucket(b).Cursor().First()
			due = due || (k != nil && !keyTime(k).After(now))
		}
		return nil
	})
	return due || err != nil
}

// SeenLen returns how many ids the seen set holds, expired ones not yet purged included (the
// journal's waiting messages applied first).
func (s *Store) SeenLen() (int, error) {
	if err := s.applyReady(); err != nil {
		return 0, err
	}
	var n int
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bktSeen).Stats().KeyN
		return nil
	})
	return n, s.wrap("seen len", err)
}
