package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Seen returns each id with its owner, the peer that sent it, across a reopen, so the node
// restores its replay window charging each id to that peer.
func TestSeenOwnersSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	a, rawA := msgFrom(t, "peerA", "a:h:me", t0, 100, 10)
	b, rawB := msgFrom(t, "peerB", "a:h:me", t0, 50, 10)
	if _, errs, err := s.AcceptAll([]*protocol.Message{a, b}, [][]byte{rawA, rawB}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("accept all: %v %v", errs, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	seen, err := s.Seen(t0)
	want := []protocol.ReplayEntry{
		{ID: b.Envelope.MessageID, Expires: b.Expires().UTC(), Owner: "peerB"},
		{ID: a.Envelope.MessageID, Expires: a.Expires().UTC(), Owner: "peerA"},
	}
	if err != nil || len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("seen after reopen: %v %v, want %v (earliest expiry first)", seen, err, want)
	}
	w := protocol.NewReplayWindow(0)
	w.Restore(seen, t0)
	if err := w.Add(a.Envelope.MessageID, "peerA", a.Expires(), t0); protocol.CodeOf(err) != protocol.CodeDuplicate {
		t.Fatalf("restored window on a replay: %v, want DUPLICATE", err)
	}
}

// Seen values written before owners were kept (8 bytes of expiry) still read: Seen gives
// them no owner, Accept still treats their ids as duplicates, PurgeSeen still removes them.
func TestSeenReadsOldValues(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	m, raw := msgFrom(t, "peerA", "a:h:me", t0, 60, 10)
	putLegacyInbox(t, s, m, raw)
	seen, err := s.Seen(t0)
	if err != nil || len(seen) != 1 || seen[0].ID != m.Envelope.MessageID || seen[0].Owner != "" || !seen[0].Expires.Equal(m.Expires()) {
		t.Fatalf("seen with an old value: %v %v", seen, err)
	}
	if res, err := s.Accept(m, raw); err != nil || !res.Duplicate || !res.Pending {
		t.Fatalf("accept of an id seen in the old format: %+v %v, want a pending duplicate", res, err)
	}
	if n, err := s.PurgeSeen(m.Expires()); n != 1 || err != nil {
		t.Fatalf("purge of an old value: %d %v", n, err)
	}
	if n, _ := s.SeenLen(); n != 0 {
		t.Fatalf("seen after purge: %d ids", n)
	}
}

// PurgeSeen removes at most MaxPurgePerCall ids per call, so a backlog is worked off over
// several calls; with nothing expired it writes nothing.
func TestPurgeSeenBoundedAndReadOnlyWhenIdle(t *testing.T) {
	s := open(t, t.TempDir(), WithClock(newClock().Now))
	const seen, gossip = MaxPurgePerCall + 4000, 2000
	fillExpiring(t, s, bktSeen, bktSeenExp, kindSeen, seen, t0.Add(time.Minute))
	fillExpiring(t, s, bktGossip, bktGossipExp, kindGossip, gossip, t0.Add(time.Minute))
	idle := txID(t, s)
	if n, err := s.PurgeSeen(t0); n != 0 || err != nil {
		t.Fatalf("purge before anything expired: %d %v", n, err)
	}
	if txID(t, s) != idle {
		t.Fatal("PurgeSeen committed a write transaction with nothing to purge")
	}
	later := t0.Add(time.Hour)
	for i, want := range []int{MaxPurgePerCall, seen + gossip - MaxPurgePerCall, 0} {
		if n, err := s.PurgeSeen(later); n != want || err != nil {
			t.Fatalf("purge call %d: removed %d %v, want %d", i+1, n, err, want)
		}
	}
	if n, _ := s.SeenLen(); n != 0 {
		t.Fatalf("seen after purging the backlog: %d ids", n)
	}
	if g, _ := s.GossipSeen(t0); len(g) != 0 {
		t.Fatalf("gossip after purging the backlog: %d ids", len(g))
	}
}

func fillExpiring(t *testing.T, s *Store, ids, exps []byte, kind byte, n int, exp time.Time) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for range n {
			id := []byte(uuid.NewString())
			if err := errors.Join(tx.Bucket(ids).Put(id, encodeExpiry(kind, exp, "peer")),
				tx.Bucket(exps).Put(timeKey(exp, id), nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// txID is the id of the last committed write transaction.
func txID(t *testing.T, s *Store) int {
	t.Helper()
	var id int
	if err := s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// The gossip journal keeps the ids of delivered broadcast and group messages across a
// restart, with their owners and the later of two expiries, until PurgeSeen forgets them.
func TestGossipJournal(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	if err := s.RememberGossip([]protocol.ReplayEntry{
		{ID: a, Expires: t0.Add(30 * time.Second), Owner: "relay1"},
		{ID: b, Expires: t0.Add(10 * time.Second), Owner: "relay2"},
		{ID: c, Expires: t0.Add(20 * time.Second), Owner: "relay1"},
	}); err != nil {
		t.Fatal(err)
	}
	// b again with a later expiry (it wins), a again with an earlier one (it does not).
	if err := s.RememberGossip([]protocol.ReplayEntry{
		{ID: b, Expires: t0.Add(40 * time.Second), Owner: "relay3"},
		{ID: a, Expires: t0.Add(5 * time.Second), Owner: "relay3"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.RememberGossip([]protocol.ReplayEntry{{ID: "not-a-uuid", Expires: t0.Add(time.Hour)}}); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("remember a non-UUID id: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	got, err := s.GossipSeen(t0.Add(20 * time.Second))
	want := []protocol.ReplayEntry{
		{ID: a, Expires: t0.Add(30 * time.Second), Owner: "relay1"},
		{ID: b, Expires: t0.Add(40 * time.Second), Owner: "relay3"},
	}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("gossip seen after reopen at +20s: %v %v, want %v", got, err, want)
	}
	if n, err := s.PurgeSeen(t0.Add(30 * time.Second)); n != 2 || err != nil {
		t.Fatalf("purge at +30s: %d %v, want c and a", n, err)
	}
	if got, _ := s.GossipSeen(t0); len(got) != 1 || got[0].ID != b {
		t.Fatalf("gossip seen after purge: %v, want only b", got)
	}
	if seen, _ := s.Seen(t0); len(seen) != 0 {
		t.Fatalf("gossip ids leaked into the inbox seen set: %v", seen)
	}
}
