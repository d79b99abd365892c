package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// crash leaves s as a killed process would: the applier stopped, whatever the journal holds
// not applied, both files closed without another write.
func crash(t *testing.T, s *Store) {
	t.Helper()
	close(s.applyStop)
	<-s.applyDone
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.j.f.Close(), s.db.Close())
	})
}

// stopApplier keeps journaled messages out of bbolt until the test applies them.
func stopApplier(s *Store) {
	close(s.applyStop)
	<-s.applyDone
	s.applyStop = make(chan struct{}) // for Close to close; applyDone stays closed
}

func accept(t *testing.T, s *Store, m *protocol.Message, raw []byte) AcceptResult {
	t.Helper()
	res, err := s.Accept(m, raw)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An accepted message is durable once Accept returns, before bbolt has it: a crash then
// loses nothing. The next Open replays the journal: the messages are pending in their order,
// a copy is a duplicate, and numbering goes on after them.
func TestJournal_AcceptedMessagesSurviveACrashBeforeBboltHasThem(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	stopApplier(s)
	c0, _ := groupStats(s)
	var ms []*protocol.Message
	var raws [][]byte
	for i := range 3 {
		m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
		if res := accept(t, s, m, raw); res.Duplicate || res.Seq != uint64(i+1) {
			t.Fatalf("accept %d: %+v", i, res)
		}
		ms, raws = append(ms, m), append(raws, raw)
	}
	if c, _ := groupStats(s); c != c0 {
		t.Fatalf("accepting made %d bbolt commits, want none (the journal holds them)", c-c0)
	}
	crash(t, s)
	if rep, err := Check(dir); err != nil || !rep.OK() || rep.Journaled != 3 {
		t.Fatalf("check after the crash: %d journal records, ok %v (%v); want 3, ok", rep.Journaled, rep.OK(), err)
	}

	s = open(t, dir)
	p, err := s.Pending()
	if err != nil || len(p) != 3 {
		t.Fatalf("pending after the crash: %d entries (%v), want 3", len(p), err)
	}
	for i, e := range p {
		if e.MessageID != ms[i].Envelope.MessageID || e.Seq != uint64(i+1) || !bytes.Equal(e.Raw, raws[i]) || e.Peer != "p1" {
			t.Fatalf("pending[%d] = %s seq %d peer %q, want %s seq %d", i, e.MessageID, e.Seq, e.Peer, ms[i].Envelope.MessageID, i+1)
		}
	}
	if res := accept(t, s, ms[1], raws[1]); !res.Duplicate || !res.Pending || res.Seq != 2 {
		t.Fatalf("a copy after the replay: %+v, want a pending duplicate of seq 2", res)
	}
	m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
	if res := accept(t, s, m, raw); res.Seq != 4 {
		t.Fatalf("the next message after the replay: seq %d, want 4", res.Seq)
	}
	if u := s.Usage(); u.InboxBySender["p1"] != int64(len(raws[0])+len(raws[1])+len(raws[2])) {
		t.Fatalf("inbox bytes of p1 after the replay: %d", u.InboxBySender["p1"])
	}
}

// Records stay in the file after bbolt has them. Replaying them again is harmless: an
// acknowledged message does not come back, a pending one is not doubled.
func TestJournal_ReplayingAppliedRecordsChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	m1, raw1 := msg(t, "a:h:me", time.Now(), 600, 100)
	m2, raw2 := msg(t, "a:h:me", time.Now(), 600, 100)
	accept(t, s, m1, raw1)
	accept(t, s, m2, raw2)
	if err := s.Ack(m1.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pending(); err != nil { // applies m2
		t.Fatal(err)
	}
	crash(t, s)
	if data, _ := os.ReadFile(filepath.Join(dir, JournalFile)); len(mustParse(data)) != 2 {
		t.Fatal("the journal no longer holds both records: this test tests nothing")
	}

	s = open(t, dir)
	p, err := s.Pending()
	if err != nil || len(p) != 1 || p[0].MessageID != m2.Envelope.MessageID {
		t.Fatalf("pending after replaying applied records: %d (%v), want only the second message", len(p), err)
	}
	if res := accept(t, s, m1, raw1); !res.Duplicate || res.Pending {
		t.Fatalf("the acknowledged message again: %+v, want a duplicate no longer pending", res)
	}
}

func mustParse(data []byte) []*InboxEntry {
	entries, _, _ := parseBytes(data)
	return entries
}

// parseBytes is parseJournal over data.
func parseBytes(data []byte) (entries []*InboxEntry, last uint64, end int) {
	entries, last, e, err := parseJournal(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		panic(err) // a bytes.Reader does not fail within its size
	}
	return entries, last, int(e)
}

// A record torn by a crash (its sync never returned, so nobody got a receipt for it) ends
// the journal: the records before it are replayed, nothing after.
func TestJournal_ATornRecordEndsTheJournal(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	stopApplier(s)
	var ms []*protocol.Message
	for range 3 {
		m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
		accept(t, s, m, raw)
		ms = append(ms, m)
	}
	crash(t, s)
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := parseBytes(data)
	if len(entries) != 3 {
		t.Fatalf("%d records in the journal, want 3", len(entries))
	}
	end1 := journalHeader + int(binary.LittleEndian.Uint32(data[0:4])) // where the first record ends
	data[end1+journalHeader+5] ^= 0xff                                 // inside the second record's body
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	p, err := s.Pending()
	if err != nil || len(p) != 1 || p[0].MessageID != ms[0].Envelope.MessageID {
		t.Fatalf("pending after a torn second record: %d (%v), want the first message only", len(p), err)
	}
}

// A crash that tears the first record of a lap leaves the older lap's records after it. The
// next run numbers its records afresh, and the record after its new first one is never taken
// for the old record that lies where that first one ends, even when the two first records are
// the same size.
func TestJournal_ANewRunNeverContinuesIntoAnOldLap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, JournalFile)
	c := newClock() // fixed times: records of the same size
	s := open(t, dir, WithClock(c.Now))
	stopApplier(s)
	for range 3 {
		m, raw := msg(t, "a:h:me", t0, 600, 100)
		accept(t, s, m, raw)
	}
	crash(t, s)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := binary.LittleEndian.Uint32(data[0:4])
	data[journalHeader+5] ^= 0xff // the first record torn: a crash during the next lap's first write
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir, WithClock(c.Now))
	stopApplier(s)
	m, raw := msg(t, "a:h:me", t0, 600, 100)
	accept(t, s, m, raw)
	crash(t, s)
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(data[0:4]); got != first {
		t.Fatalf("the new first record is %d bytes, the old one %d: the test needs them equal", got, first)
	}
	if entries, _, _ := parseBytes(data); len(entries) != 1 || entries[0].MessageID != m.Envelope.MessageID {
		t.Fatalf("%d records read after the new run's one, want that one only", len(entries))
	}
}

// An acknowledgement of a message still in the journal is durable when Ack returns: the
// message does not come back after a crash, and its bytes leave the sender's share.
func TestJournal_AckBeforeBboltHasTheMessage(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	stopApplier(s)
	m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
	accept(t, s, m, raw)
	if err := s.Ack(m.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second ack: %v, want ErrNotFound", err)
	}
	if u := s.Usage(); u.InboxBytes != 0 {
		t.Fatalf("inbox bytes after the ack: %d, want 0", u.InboxBytes)
	}
	crash(t, s)

	s = open(t, dir)
	if p, err := s.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after the crash: %d (%v), want none", len(p), err)
	}
	if res := accept(t, s, m, raw); !res.Duplicate || res.Pending {
		t.Fatalf("the message again: %+v, want a duplicate no longer pending", res)
	}
}

// A message that expires in the journal, before the applier moves it into bbolt, is not
// stored, and its bytes leave the sender's share and the inbox then: no acknowledgement will
// ever come for it, and a sender must not fill the inbox with messages that expire at once.
func TestJournal_AMessageThatExpiresBeforeItsApplyFreesItsBytes(t *testing.T) {
	c := newClock()
	s := open(t, t.TempDir(), WithClock(c.Now))
	stopApplier(s)
	m, raw := msgFrom(t, "p1", "a:h:me", t0, 2, 100)
	accept(t, s, m, raw)
	if u := s.Usage(); u.InboxBytes == 0 || u.InboxBySender["p1"] == 0 {
		t.Fatalf("inbox bytes while journaled: %+v, want the message counted", u)
	}
	c.Set(t0.Add(3 * time.Second))
	if p, err := s.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after expiry: %d (%v), want none", len(p), err)
	}
	if u := s.Usage(); u.InboxBytes != 0 || len(u.InboxBySender) != 0 {
		t.Fatalf("inbox bytes after the message expired in the journal: %d %v, want none", u.InboxBytes, u.InboxBySender)
	}
	if err := s.Ack(m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ack of the expired message: %v, want ErrNotFound", err)
	}
}

// Two connections delivering one message at once: one accepts it, the other is told it is a
// duplicate, pending under the same number.
func TestJournal_ConcurrentCopiesAreOneMessage(t *testing.T) {
	s := open(t, t.TempDir())
	m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
	results := make([]AcceptResult, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = accept(t, s, m, raw) })
	}
	wg.Wait()
	firsts := 0
	for _, r := range results {
		if !r.Duplicate {
			firsts++
		}
		if !r.Pending || r.Seq != 1 {
			t.Fatalf("result %+v, want pending seq 1", r)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d copies accepted as new, want 1", firsts)
	}
	if p, _ := s.Pending(); len(p) != 1 {
		t.Fatalf("%d pending, want 1", len(p))
	}
}

// Past journalLimit the next write applies everything first and starts over at offset 0, so
// a busy node's journal does not grow without bound.
func TestJournal_StartsOverPastItsLimit(t *testing.T) {
	s := open(t, t.TempDir(), WithNoSync(true))
	stopApplier(s)
	n := 0
	for s.j.off < journalLimit {
		m, raw := msg(t, "a:h:me", time.Now(), 600, 64<<10)
		accept(t, s, m, raw)
		n++
	}
	m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
	accept(t, s, m, raw)
	if s.j.off > 4<<10 {
		t.Fatalf("after %d messages past the limit the journal goes on at %d, want a start over", n, s.j.off)
	}
	if p, err := s.Pending(); err != nil || len(p) != n+1 {
		t.Fatalf("pending %d (%v), want %d", len(p), err, n+1)
	}
}

// The applier moves journaled messages into bbolt by itself, several to a commit.
func TestJournal_TheApplierMovesMessagesIntoBbolt(t *testing.T) {
	s := open(t, t.TempDir())
	for range 5 {
		m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
		accept(t, s, m, raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.j.mu.Lock()
		left := len(s.j.pending)
		s.j.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still waiting for the applier after 10 s", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if c, _ := groupStats(s); c > 5 {
		t.Fatalf("the applier made %d commits for 5 messages", c)
	}
}

// FuzzParseJournal: whatever the file holds, reading it stops at the first invalid record,
// never panics, and every record it takes encodes back to the bytes it read.
func FuzzParseJournal(f *testing.F) {
	var valid []byte
	for i := range 3 {
		m, raw, err := newMsg("a:h:me", t0, 600, 10*i)
		if err != nil {
			f.Fatal(err)
		}
		e := &InboxEntry{MessageID: m.Envelope.MessageID, From: "a:h:sender", To: "a:h:me", Peer: "p", Raw: raw,
			Seq: uint64(i + 1), ReceivedAt: t0, ExpiresAt: m.Expires()}
		valid, err = appendRecord(valid, e, uint64(i+7))
		if err != nil {
			f.Fatal(err)
		}
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, last, end := parseBytes(data)
		if end > len(data) || (len(entries) == 0) != (end == 0) || (len(entries) > 0 && last < uint64(len(entries)-1)) {
			t.Fatalf("%d entries end at %d of %d, the last numbered %d", len(entries), end, len(data), last)
		}
		for _, e := range entries {
			rec, err := appendRecord(nil, e, 1)
			if err != nil {
				t.Fatalf("a record read from the journal does not encode: %v", err)
			}
			back := mustParse(rec)
			if len(back) != 1 || back[0].MessageID != e.MessageID || back[0].Seq != e.Seq || !bytes.Equal(back[0].Raw, e.Raw) {
				t.Fatalf("a record read from the journal does not read back the same: %+v", e)
			}
		}
	})
}

// A lazy acknowledgement of a message still in the journal returns at once; the apply then
// stores only its seen id, and its bytes leave the inbox.
func TestJournal_LazyAckOfAJournaledMessage(t *testing.T) {
	s := open(t, t.TempDir())
	stopApplier(s)
	m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, 100)
	accept(t, s, m, raw)
	c0, _ := groupStats(s)
	if err := s.AckLazily(context.Background(), m.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if c, _ := groupStats(s); c != c0 {
		t.Fatalf("a lazy ack of a journaled message made %d commits, want none", c-c0)
	}
	if err := s.AckLazily(context.Background(), m.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a second lazy ack: %v, want ErrNotFound", err)
	}
	if p, err := s.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after the apply: %d (%v), want none", len(p), err)
	}
	if u := s.Usage(); u.InboxBytes != 0 {
		t.Fatalf("inbox bytes after the apply: %d, want 0", u.InboxBytes)
	}
	if res := accept(t, s, m, raw); !res.Duplicate || res.Pending {
		t.Fatalf("the message again: %+v, want a duplicate no longer pending", res)
	}
}

// Opening a store reads its journal record by record: a journal emptied by its applier, or
// just allocated (journalPrealloc bytes of zeros), costs the node a header's read, not its
// size in memory (it cost the idle node 4 MiB of heap at every start).
func TestJournal_ReadingAnEmptyJournalHoldsNoneOfItsSize(t *testing.T) {
	f, err := createJournal(filepath.Join(t.TempDir(), JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	entries, _, end, err := parseJournal(f, st.Size())
	runtime.ReadMemStats(&after)
	if err != nil || len(entries) != 0 || end != 0 {
		t.Fatalf("an allocated journal read as %d entries ending at %d (%v), want none", len(entries), end, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > journalPrealloc/8 {
		t.Fatalf("reading a %d-byte empty journal allocated %d bytes, want a buffer's worth", st.Size(), got)
	}
}

// A journal left without its allocation (a crash between its creation and its fallocate) is
// allocated when the store opens, so that appends do not grow the file.
func TestJournal_AnUnallocatedJournalIsAllocatedAtOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	st, err := os.Stat(filepath.Join(dir, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < journalPrealloc {
		t.Fatalf("the journal is %d bytes after Open, want at least %d", st.Size(), journalPrealloc)
	}
}
