package store

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Large messages go from the bytes they were read into to the journal without a copy: their
// records are written in pieces (the head, then the message), counted and checksummed whole,
// so that a crash before bbolt has them replays them as they came, small ones around them.
func TestLarge_JournaledFromTheirOwnBytesSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	stopApplier(s)
	var ms []*protocol.Message
	var raws [][]byte
	for _, size := range []int{100, 1 << 20, 100, 3 << 20, journalInline + 1} {
		m, raw := msgFrom(t, "p1", "a:h:me", time.Now(), 600, size)
		ms, raws = append(ms, m), append(raws, raw)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, errs, err := s.AcceptAll(ms, raws); err != nil || firstErr(errs) != nil {
		t.Fatalf("accept: %v %v", err, errs)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("journaling %d MiB of messages allocated %d KiB: a copy of them", (len(raws[1])+len(raws[3]))>>20, grew>>10)
	}
	crash(t, s)
	if rep, err := Check(dir); err != nil || !rep.OK() || rep.Journaled != len(ms) {
		t.Fatalf("check after the crash: %d journal records, ok %v (%v); want %d, ok", rep.Journaled, rep.OK(), err, len(ms))
	}
	s = open(t, dir, WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	p, err := s.Pending()
	if err != nil || len(p) != len(ms) {
		t.Fatalf("pending after the crash: %d entries (%v), want %d", len(p), err, len(ms))
	}
	for i, e := range p {
		raw := e.Raw
		if len(raws[i]) >= BodyFileBytes {
			if raw != nil {
				t.Fatalf("pending[%d] holds its %d bytes: a large message is left in its file", i, len(raw))
			}
			if raw, err = s.InboxRaw(e.MessageID); err != nil {
				t.Fatal(err)
			}
		}
		if e.MessageID != ms[i].Envelope.MessageID || !bytes.Equal(raw, raws[i]) || e.Size != int64(len(raws[i])) {
			t.Fatalf("pending[%d] is %s (%d bytes), want %s (%d bytes)", i, e.MessageID, len(raw), ms[i].Envelope.MessageID, len(raws[i]))
		}
	}
}

// The applier commits at most applyBytes of messages at a time (or one message): what bbolt
// copies into its pages for a burst of messages just under BodyFileBytes (larger ones are in
// files of their own) is a few of them, not all of them.
func TestLarge_AppliedAtMostApplyBytesACommit(t *testing.T) {
	s := open(t, t.TempDir(), WithMaxInboxBytes(64<<20), WithMaxSenderInboxBytes(64<<20))
	stopApplier(s)
	for range 10 {
		m, raw := msg(t, "a:h:me", time.Now(), 600, 100)
		accept(t, s, m, raw)
	}
	const large, size = 8, BodyFileBytes - 64<<10 // under journalLimit, which would apply them
	for range large {
		m, raw := msg(t, "a:h:me", time.Now(), 600, size)
		accept(t, s, m, raw)
	}
	c0, _ := groupStats(s)
	if err := s.applyReady(); err != nil {
		t.Fatal(err)
	}
	want := large / (applyBytes / (size + 1<<10)) // the small ones ride with the first
	if c, _ := groupStats(s); c-c0 != want {
		t.Fatalf("applying %d messages of %d KiB and 10 small ones took %d commits, want %d", large, size>>10, c-c0, want)
	}
	if p, err := s.Pending(); err != nil || len(p) != large+10 {
		t.Fatalf("pending: %d (%v)", len(p), err)
	}
}

// firstErr returns the first non-nil error of errs.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
