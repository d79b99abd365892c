package store

import (
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Seen returns the persistent seen set as replay entries that have not expired at now,
// earliest expiry first, ready for protocol.ReplayWindow.Restore: a node that keeps an
// in-memory window as a fast path in front of Accept can warm it after a restart.
func (s *Store) Seen(now time.Time) ([]protocol.ReplayEntry, error) {
	var out []protocol.ReplayEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktSeenExp).Cursor()
		for k, _ := c.Seek(timeKey(now.Add(1))); k != nil; k, _ = c.Next() {
			out = append(out, protocol.ReplayEntry{ID: string(k[8:]), Expires: keyTime(k).UTC()})
		}
		return nil
	})
	return out, s.wrap("seen", err)
}

// SaveReplay stores a snapshot of a named replay window (protocol.ReplayWindow.Snapshot),
// replacing the previous one, for windows outside the inbox (for example the gossip
// window). It is one synchronous transaction; call it on shutdown or on a schedule.
func (s *Store) SaveReplay(name string, entries []protocol.ReplayEntry) error {
	v, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return s.wrap("save replay", s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktReplay).Put([]byte(name), v)
	}))
}

// LoadReplay returns the entries of the named snapshot that have not expired at now (none
// if there is no snapshot), for protocol.ReplayWindow.Restore.
func (s *Store) LoadReplay(name string, now time.Time) ([]protocol.ReplayEntry, error) {
	var all []protocol.ReplayEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bktReplay).Get([]byte(name))
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &all)
	})
	if err != nil {
		return nil, s.wrap("load replay", err)
	}
	out := all[:0]
	for _, e := range all {
		if e.Expires.After(now) {
			out = append(out, e)
		}
	}
	return out, nil
}
