package store

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestPutSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	m, raw := msg(t, "a:h:bob", t0, 60, 100)
	if err := s.Put(m, raw); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	got, err := s.Get(m.Envelope.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Raw, raw) || got.Recipient != "a:h:bob" || !got.EnqueuedAt.Equal(t0) ||
		!got.ExpiresAt.Equal(t0.Add(60*time.Second)) || !got.NextAttemptAt.Equal(t0) || got.Attempts != 0 {
		t.Fatalf("after reopen: %+v", got)
	}
}

func TestPutRefusesInvalidAndIsIdempotent(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	old, raw := msg(t, "a:h:bob", t0.Add(-2*time.Minute), 60, 10)
	if err := s.Put(old, raw); !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("expired message: got %v, want TIMEOUT", err)
	}
	bad, raw := msg(t, "a:h:bob", t0, 60, 10)
	bad.Envelope.MessageID = "not-a-uuid"
	if err := s.Put(bad, raw); !errors.Is(err, protocol.ErrPayloadInvalid) {
		t.Fatalf("bad id: got %v, want PAYLOAD_INVALID", err)
	}
	m, raw := msg(t, "a:h:bob", t0, 60, 10)
	for range 2 {
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := s.List()
	if len(l) != 1 || s.Usage().OutboxBytes != int64(len(raw)) {
		t.Fatalf("double put: %d entries, %d bytes; want 1, %d", len(l), s.Usage().OutboxBytes, len(raw))
	}
}

func TestLimitsRefuseAndDropNothing(t *testing.T) {
	clk := newClock()
	_, probe := msg(t, "a:h:bob", t0, 60, 1000)
	size := int64(len(probe))
	s := open(t, t.TempDir(), WithClock(clk.Now), WithMaxRecipientBytes(3*size+10), WithMaxTotalBytes(5*size+50))
	var queued []string
	put := func(to string) error {
		m, raw := msg(t, to, t0, 60, 1000)
		err := s.Put(m, raw)
		if err == nil {
			queued = append(queued, m.Envelope.MessageID)
		}
		return err
	}
	for i := range 3 {
		if err := put("a:h:bob"); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	err := put("a:h:bob")
	var qf *QueueFullError
	if !errors.As(err, &qf) || qf.Limit != LimitRecipient || qf.Recipient != "a:h:bob" || qf.Queued != 3*size {
		t.Fatalf("4th put for bob: got %v, want per-recipient QueueFullError", err)
	}
	if !errors.Is(err, ErrQueueFull) || !errors.Is(err, protocol.ErrRateLimited) || protocol.CodeOf(err) != protocol.CodeRateLimited {
		t.Fatalf("error %v does not match ErrQueueFull and RATE_LIMITED", err)
	}
	for i := range 2 {
		if err := put("a:h:carol"); err != nil {
			t.Fatalf("carol put %d: %v", i, err)
		}
	}
	err = put("a:h:dave")
	if !errors.As(err, &qf) || qf.Limit != LimitTotal || !errors.Is(err, protocol.ErrRateLimited) {
		t.Fatalf("6th put overall: got %v, want total QueueFullError", err)
	}
	l, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if !equal(ids(l), queued) {
		t.Fatalf("queue after refusals: %v, want %v", ids(l), queued)
	}
	// Draining one of bob's frees room for bob again.
	if ok, err := s.Delivered(queued[0]); !ok || err != nil {
		t.Fatalf("delivered: %v %v", ok, err)
	}
	if err := put("a:h:bob"); err != nil {
		t.Fatalf("put after drain: %v", err)
	}
}

func TestCountersRecomputedOnOpen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	var total int64
	for i := range 4 {
		to := fmt.Sprintf("a:h:r%d", i%2)
		m, raw := msg(t, to, t0, 60, 500)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
		total += int64(len(raw))
	}
	in, raw := msg(t, "a:h:me", t0, 60, 300)
	if _, err := s.Accept(in, raw); err != nil {
		t.Fatal(err)
	}
	before := s.Usage()
	if before.OutboxBytes != total || before.InboxBytes != int64(len(raw)) {
		t.Fatalf("usage before close: %+v", before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen with a total limit just above what is stored: the next Put must be refused, which
	// proves the counter was recomputed rather than started at zero.
	s = open(t, dir, WithClock(clk.Now), WithMaxRecipientBytes(total), WithMaxTotalBytes(total+10))
	after := s.Usage()
	if after.OutboxBytes != before.OutboxBytes || after.InboxBytes != before.InboxBytes ||
		after.ByRecipient["a:h:r0"] != before.ByRecipient["a:h:r0"] || after.ByRecipient["a:h:r1"] != before.ByRecipient["a:h:r1"] {
		t.Fatalf("usage after reopen %+v, want %+v", after, before)
	}
	m, raw := msg(t, "a:h:r0", t0, 60, 500)
	if err := s.Put(m, raw); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("put over recomputed total: %v", err)
	}
}

func TestDueRescheduleDelivered(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	var all []string
	for i := range 3 {
		clk.Set(t0.Add(time.Duration(i) * time.Second))
		m, raw := msg(t, "a:h:bob", t0, 300, 10)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
		all = append(all, m.Envelope.MessageID)
	}
	due, err := s.Due(t0, 0)
	if err != nil || !equal(ids(due), all[:1]) {
		t.Fatalf("due at t0: %v %v, want %v", ids(due), err, all[:1])
	}
	due, _ = s.Due(t0.Add(10*time.Second), 2)
	if !equal(ids(due), all[:2]) {
		t.Fatalf("due limit 2: %v, want %v", ids(due), all[:2])
	}
	// The oldest fails and is rescheduled 30 s out: it leaves the due set until then.
	if err := s.Reschedule(all[0], t0.Add(30*time.Second), "dial: no route"); err != nil {
		t.Fatal(err)
	}
	due, _ = s.Due(t0.Add(10*time.Second), 0)
	if !equal(ids(due), all[1:]) {
		t.Fatalf("due after reschedule: %v, want %v", ids(due), all[1:])
	}
	due, _ = s.Due(t0.Add(30*time.Second), 0)
	if !equal(ids(due), []string{all[1], all[2], all[0]}) {
		t.Fatalf("due at +30s: %v", ids(due))
	}
	if due[2].Attempts != 1 || due[2].LastError != "dial: no route" || !due[2].NextAttemptAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("rescheduled entry: %+v", due[2])
	}
	if ok, err := s.Delivered(all[1]); !ok || err != nil {
		t.Fatalf("delivered: %v %v", ok, err)
	}
	if ok, err := s.Delivered(all[1]); ok || err != nil {
		t.Fatalf("second delivered: %v %v, want false nil", ok, err)
	}
	if err := s.Reschedule(all[1], t0, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reschedule delivered: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(all[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get delivered: %v", err)
	}
	due, _ = s.Due(t0.Add(time.Hour), 0) // past every TTL: Due leaves them to Expired
	if len(due) != 0 {
		t.Fatalf("due past TTL: %v", ids(due))
	}
}

func TestExpiredRemovesOnce(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	short, raw1 := msg(t, "a:h:bob", t0, 10, 10)
	long, raw2 := msg(t, "a:h:bob", t0, 100, 10)
	for _, p := range []struct {
		m   *protocol.Message
		raw []byte
	}{{short, raw1}, {long, raw2}} {
		if err := s.Put(p.m, p.raw); err != nil {
			t.Fatal(err)
		}
	}
	if exp, _ := s.Expired(t0.Add(9 * time.Second)); len(exp) != 0 {
		t.Fatalf("expired before TTL: %v", ids(exp))
	}
	// Many concurrent callers: the expired entry comes out exactly once.
	var mu sync.Mutex
	var got []OutboxEntry
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			exp, err := s.Expired(t0.Add(10 * time.Second))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got = append(got, exp...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 1 || got[0].MessageID != short.Envelope.MessageID || !bytes.Equal(got[0].Raw, raw1) {
		t.Fatalf("expired: %v, want once %s", ids(got), short.Envelope.MessageID)
	}
	if s.Usage().OutboxBytes != int64(len(raw2)) {
		t.Fatalf("bytes after expiry: %d, want %d", s.Usage().OutboxBytes, len(raw2))
	}
	l, _ := s.List()
	if !equal(ids(l), []string{long.Envelope.MessageID}) {
		t.Fatalf("left: %v", ids(l))
	}
}

func TestForRecipientAndRetryNow(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), WithClock(clk.Now))
	var bob []string
	for i := range 4 {
		to := "a:h:bob"
		if i%2 == 1 {
			to = "a:h:bobby" // shares bob's prefix: must not leak into bob's list
		}
		m, raw := msg(t, to, t0, 300, 10)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
		if to == "a:h:bob" {
			bob = append(bob, m.Envelope.MessageID)
			if err := s.Reschedule(m.Envelope.MessageID, t0.Add(time.Minute), "offline"); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.ForRecipient("a:h:bob")
	if err != nil || !equal(ids(got), bob) {
		t.Fatalf("for bob: %v %v, want %v", ids(got), err, bob)
	}
	now := t0.Add(5 * time.Second)
	if n, err := s.RetryNow("a:h:bob", now); n != 2 || err != nil {
		t.Fatalf("retry now: %d %v", n, err)
	}
	due, _ := s.Due(now, 0)
	if len(due) != 4 {
		t.Fatalf("due after retry now: %d entries, want 4", len(due))
	}
	for _, e := range due {
		if e.Recipient == "a:h:bob" && e.Attempts != 1 {
			t.Fatalf("retry now counted an attempt: %+v", e)
		}
	}
}

// A recipient that comes back is retried from the shortest delay again: RetryNow resets
// Backoff, while Attempts keeps counting for reports.
func TestRetryNowResetsBackoff(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, WithClock(clk.Now))
	m, raw := msg(t, "a:h:bob", t0, 3600, 10)
	if err := s.Put(m, raw); err != nil {
		t.Fatal(err)
	}
	id := m.Envelope.MessageID
	for i := range 3 {
		if err := s.Reschedule(id, t0.Add(time.Duration(i+1)*time.Minute), "unreachable"); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := s.Get(id); e.Attempts != 3 || e.Backoff != 3 {
		t.Fatalf("after 3 failures: attempts %d backoff %d, want 3 and 3", e.Attempts, e.Backoff)
	}
	if n, err := s.RetryNow("a:h:bob", t0.Add(time.Second)); n != 1 || err != nil {
		t.Fatalf("retry now: %d %v", n, err)
	}
	if e, _ := s.Get(id); e.Attempts != 3 || e.Backoff != 0 {
		t.Fatalf("after the recipient came back: attempts %d backoff %d, want 3 and 0", e.Attempts, e.Backoff)
	}
	if err := s.Reschedule(id, t0.Add(time.Minute), "refused"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, WithClock(clk.Now))
	if e, _ := s.Get(id); e.Attempts != 4 || e.Backoff != 1 {
		t.Fatalf("after reopen: attempts %d backoff %d, want 4 and 1", e.Attempts, e.Backoff)
	}
}

func TestClose(t *testing.T) {
	s := open(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	m, raw := msg(t, "a:h:bob", time.Now(), 60, 10)
	if err := s.Put(m, raw); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if _, err := s.Due(time.Now(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("due after close: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, opts := range [][]Option{
		{WithMaxRecipientBytes(0)},
		{WithMaxRecipientBytes(10), WithMaxTotalBytes(5)},
		{WithMaxInboxBytes(-1)},
		{WithBatchDelay(2 * time.Second)},
		{WithBatchSize(0)},
		{WithClock(nil)},
		{WithLogger(nil)},
	} {
		if _, err := Open(t.TempDir(), opts...); err == nil {
			t.Fatalf("options %d accepted", len(opts))
		}
	}
}

func TestConcurrentPut(t *testing.T) {
	s := open(t, t.TempDir(), WithBatchDelay(time.Millisecond))
	const writers, each = 8, 25
	var wg sync.WaitGroup
	var total int64
	var mu sync.Mutex
	for w := range writers {
		wg.Go(func() {
			for range each {
				m, raw := msg(t, fmt.Sprintf("a:h:r%d", w), time.Now(), 600, 200)
				if err := s.Put(m, raw); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += int64(len(raw))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	l, err := s.List()
	if err != nil || len(l) != writers*each {
		t.Fatalf("list: %d entries, %v; want %d", len(l), err, writers*each)
	}
	if u := s.Usage(); u.OutboxBytes != total || len(u.ByRecipient) != writers {
		t.Fatalf("usage %+v, want %d bytes over %d recipients", u, total, writers)
	}
}

// Recipients lists the recipients that have messages queued, each once, and forgets one whose
// last message left the outbox.
func TestRecipients(t *testing.T) {
	s := open(t, t.TempDir())
	now := time.Now()
	var first *protocol.Message
	for i := range 3 {
		m, raw := msg(t, fmt.Sprintf("a:h:r%d", i%2), now, 60, 10)
		if err := s.Put(m, raw); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			first = m
		}
	}
	got := s.Recipients()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a:h:r0", "a:h:r1"}) {
		t.Fatalf("recipients %v, want a:h:r0 and a:h:r1", got)
	}
	if _, err := s.Delivered(first.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if got := s.Recipients(); !slices.Equal(got, []string{"a:h:r0"}) {
		t.Fatalf("recipients after a:h:r1's only message was delivered: %v, want a:h:r0", got)
	}
}
