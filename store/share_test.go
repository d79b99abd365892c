package store

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/iacp-node/iacp-node/protocol"
)

// One peer filling its share of the inbox is refused; another peer is still accepted, and
// nothing already stored is dropped (one peer filled the inbox and every other
// sender got RATE_LIMITED).
func TestSenderShareRefusesTheFloodingPeerOnly(t *testing.T) {
	clk := newClock()
	m, raw := msgFrom(t, "peerA", "a:h:me", t0, 600, 1000)
	share := 3 * int64(len(raw))
	s := open(t, t.TempDir(), WithClock(clk.Now), WithMaxInboxBytes(8*share), WithMaxSenderInboxBytes(share))
	var accepted []string
	for i := range 3 {
		if i > 0 {
			m, raw = msgFrom(t, "peerA", "a:h:me", t0, 600, 1000)
		}
		if _, err := s.Accept(m, raw); err != nil {
			t.Fatalf("message %d within peerA's share: %v", i, err)
		}
		accepted = append(accepted, m.Envelope.MessageID)
	}
	over, overRaw := msgFrom(t, "peerA", "a:h:me", t0, 600, 1000)
	_, err := s.Accept(over, overRaw)
	var qf *QueueFullError
	if !errors.As(err, &qf) || qf.Limit != LimitSender || qf.Sender != "peerA" || qf.Max != share ||
		!errors.Is(err, ErrQueueFull) || !errors.Is(err, protocol.ErrRateLimited) {
		t.Fatalf("peerA over its share: %v, want a LimitSender QueueFullError naming peerA", err)
	}
	// AcceptAll refuses the same message on its own and accepts the other peer's beside it.
	other, otherRaw := msgFrom(t, "peerB", "a:h:me", t0, 600, 1000)
	_, errs, err := s.AcceptAll([]*protocol.Message{over, other}, [][]byte{overRaw, otherRaw})
	if err != nil || !errors.As(errs[0], &qf) || qf.Limit != LimitSender || errs[1] != nil {
		t.Fatalf("accept all: %v %v, want peerA refused and peerB accepted", errs, err)
	}
	p, _ := s.Pending()
	if len(p) != 4 {
		t.Fatalf("pending: %d messages, want peerA's 3 and peerB's 1", len(p))
	}
	for i, id := range accepted {
		if p[i].MessageID != id || p[i].Peer != "peerA" {
			t.Fatalf("pending[%d] = %s from %q, want %s from peerA: nothing may be dropped", i, p[i].MessageID, p[i].Peer, id)
		}
	}
	if seen, _ := s.Seen(t0); len(seen) != 4 {
		t.Fatalf("seen holds %d ids; a refused message must not be marked seen", len(seen))
	}
	u := s.Usage()
	if u.InboxBySender["peerA"] != share || u.InboxBySender["peerB"] != int64(len(otherRaw)) || u.MaxSenderInboxBytes != share {
		t.Fatalf("usage by sender %v (max %d)", u.InboxBySender, u.MaxSenderInboxBytes)
	}
	// Taking one message makes room in peerA's share again.
	if err := s.Ack(accepted[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(over, overRaw); err != nil {
		t.Fatalf("peerA after the agent took one of its messages: %v", err)
	}
}

func TestSenderCountersRecomputedOnOpen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	want := map[string]int64{}
	for _, peer := range []string{"peerA", "peerA", "peerB"} {
		m, raw := msgFrom(t, peer, "a:h:me", t0, 600, 100)
		if _, err := s.Accept(m, raw); err != nil {
			t.Fatal(err)
		}
		want[peer] += int64(len(raw))
	}
	// Two records written before the sender was kept: one whose document names its peer,
	// one whose document does not.
	for _, peer := range []string{"peerC", ""} {
		m, raw := msgFrom(t, peer, "a:h:me", t0, 600, 100)
		putLegacyInbox(t, s, m, raw)
		want[peer] += int64(len(raw))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	got := s.Usage().InboxBySender
	if len(got) != len(want) {
		t.Fatalf("by sender after reopen %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("by sender after reopen %v, want %v", got, want)
		}
	}
}

// putLegacyInbox stores an inbox record as the store wrote it before the sender peer was
// kept in the metadata, and its seen id in the old 8-byte format.
func putLegacyInbox(t *testing.T, s *Store, m *protocol.Message, raw []byte) {
	t.Helper()
	if err := s.applyReady(); err != nil { // the journal's messages first: one inbox sequence
		t.Fatal(err)
	}
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bktInbox)
		seq, err := inbox.NextSequence()
		s.j.seq = seq
		if err != nil {
			return err
		}
		v, err := encodeRecord(struct {
			ID   string `json:"id"`
			From string `json:"from"`
			To   string `json:"to"`
			Seq  uint64 `json:"seq"`
			Recv int64  `json:"recv"`
			Exp  int64  `json:"exp"`
		}{m.Envelope.MessageID, m.Envelope.Sender.AgentID, m.Envelope.Recipient.AgentID, seq, t0.UnixNano(), m.Expires().UnixNano()}, raw)
		if err != nil {
			return err
		}
		id := []byte(m.Envelope.MessageID)
		return errors.Join(inbox.Put(be64(seq), v), tx.Bucket(bktInboxID).Put(id, be64(seq)),
			tx.Bucket(bktSeen).Put(id, timeKey(m.Expires())), tx.Bucket(bktSeenExp).Put(timeKey(m.Expires(), id), nil))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSenderShareOption(t *testing.T) {
	for _, opts := range [][]Option{
		{WithMaxSenderInboxBytes(0)},
		{WithMaxSenderInboxBytes(-1)},
		{WithMaxInboxBytes(100), WithMaxSenderInboxBytes(101)},
	} {
		if _, err := Open(t.TempDir(), opts...); err == nil {
			t.Fatalf("options %d accepted", len(opts))
		}
	}
	if u := open(t, t.TempDir()).Usage(); u.MaxSenderInboxBytes != DefaultMaxSenderInboxBytes {
		t.Fatalf("default share %d, want %d", u.MaxSenderInboxBytes, DefaultMaxSenderInboxBytes)
	}
	// An inbox smaller than the default share, with no share given: the share is the inbox.
	if u := open(t, t.TempDir(), WithMaxInboxBytes(1<<20)).Usage(); u.MaxSenderInboxBytes != 1<<20 {
		t.Fatalf("share under a 1 MiB inbox: %d", u.MaxSenderInboxBytes)
	}
}
