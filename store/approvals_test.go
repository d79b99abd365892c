package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func approvalOf(m *protocol.Message, raw []byte) Approval {
	return Approval{MessageID: m.Envelope.MessageID, From: m.Envelope.Sender.AgentID, To: m.Envelope.Recipient.AgentID,
		Type: string(m.Message.Type), Intent: string(m.Message.Intent), Raw: raw, ExpiresAt: m.Expires()}
}

func TestApprovals_HoldApproveReleaseSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := open(t, dir, WithClock(c.Now))
	if held, err := s.Held(); err != nil || len(held) != 0 {
		t.Fatalf("a new store holds %d, %v", len(held), err)
	}
	lim := ApprovalLimits{MaxCount: 10, MaxBytes: 1 << 20}
	m1, raw1 := msg(t, "a:h:bob", t0, 60, 10)
	m2, raw2 := msg(t, "a:h:bob", t0, 60, 10)
	for _, a := range []Approval{approvalOf(m1, raw1), approvalOf(m2, raw2)} {
		if err := s.Hold(a, lim); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Hold(approvalOf(m1, raw1), lim); protocol.CodeOf(err) != protocol.CodeDuplicate {
		t.Fatalf("holding an id twice: %v; want DUPLICATE", err)
	}
	c.Set(t0.Add(time.Second))
	a, fresh, err := s.Approve(m1.Envelope.MessageID, "alice")
	if err != nil || !fresh || a.ApprovedBy != "alice" || !a.ApprovedAt.Equal(t0.Add(time.Second)) || string(a.Raw) != string(raw1) {
		t.Fatalf("approve: %+v %v", a, err)
	}
	if a, fresh, err := s.Approve(m1.Envelope.MessageID, "mallory"); err != nil || fresh || a.ApprovedBy != "alice" {
		t.Fatalf("a second approval must keep the first: %+v %v", a, err)
	}
	if _, _, err := s.Approve("nope", "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("approve unknown: %v", err)
	}
	if _, err := s.Discard(m1.Envelope.MessageID); !errors.Is(err, ErrApproved) {
		t.Fatalf("discarding an approved message: %v; want ErrApproved", err)
	}
	c.Set(m2.Expires())
	if _, _, err := s.Approve(m2.Envelope.MessageID, "alice"); protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("approving an expired message: %v; want TIMEOUT", err)
	}
	c.Set(t0.Add(time.Second))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir, WithClock(c.Now))
	held, err := s.Held()
	if err != nil || len(held) != 2 {
		t.Fatalf("after reopening: %d held, %v", len(held), err)
	}
	for _, h := range held {
		want := h.MessageID == m1.Envelope.MessageID
		if h.Approved() != want || !h.HeldAt.Equal(t0) || !h.ExpiresAt.Equal(m1.Expires()) || h.To != "a:h:bob" || h.Intent != "notify" {
			t.Errorf("held after reopening: %+v", h)
		}
	}
	rep, err := func() (CheckReport, error) { _ = s.Close(); return Check(dir) }()
	if err != nil || !rep.OK() {
		t.Fatalf("check: %+v %v", rep, err)
	}
	s = open(t, dir, WithClock(c.Now))
	if a, err := s.Discard(m2.Envelope.MessageID); err != nil || a.MessageID != m2.Envelope.MessageID {
		t.Fatalf("discard: %+v %v", a, err)
	}
	if _, err := s.Release(m2.Envelope.MessageID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release twice: %v", err)
	}
	if held, _ := s.Held(); len(held) != 1 {
		t.Fatalf("%d held after a release, want 1", len(held))
	}
}

func TestApprovals_HoldIsBoundedAndRefusesBadInput(t *testing.T) {
	c := newClock()
	s := open(t, t.TempDir(), WithClock(c.Now))
	lim := ApprovalLimits{MaxCount: 2, MaxBytes: 1 << 20}
	for range 2 {
		m, raw := msg(t, "a:h:bob", t0, 60, 10)
		if err := s.Hold(approvalOf(m, raw), lim); err != nil {
			t.Fatal(err)
		}
	}
	m, raw := msg(t, "a:h:bob", t0, 60, 10)
	err := s.Hold(approvalOf(m, raw), lim)
	var full *ApprovalsFullError
	if !errors.As(err, &full) || protocol.CodeOf(err) != protocol.CodeRateLimited || full.Held != 2 {
		t.Fatalf("a third message over MaxCount 2: %v; want RATE_LIMITED", err)
	}
	big, bigRaw := msg(t, "a:h:bob", t0, 60, 2000)
	if err := s.Hold(approvalOf(big, bigRaw), ApprovalLimits{MaxCount: 10, MaxBytes: 1000}); !errors.Is(err, ErrApprovalsFull) {
		t.Fatalf("over MaxBytes: %v", err)
	}
	old, oldRaw := msg(t, "a:h:bob", t0.Add(-time.Hour), 60, 10)
	if err := s.Hold(approvalOf(old, oldRaw), ApprovalLimits{MaxCount: 10, MaxBytes: 1 << 20}); protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("an expired message: %v; want TIMEOUT", err)
	}
	bad := approvalOf(m, raw)
	bad.MessageID = "not-a-uuid"
	if err := s.Hold(bad, ApprovalLimits{MaxCount: 10, MaxBytes: 1 << 20}); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("a bad id: %v; want PAYLOAD_INVALID", err)
	}
}

func TestApprovals_ConcurrentReleaseGivesOneCaller(t *testing.T) {
	s := open(t, t.TempDir(), WithClock(newClock().Now))
	m, raw := msg(t, "a:h:bob", t0, 60, 10)
	if err := s.Hold(approvalOf(m, raw), ApprovalLimits{MaxCount: 1, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Release(m.Envelope.MessageID); err == nil {
				mu.Lock()
				got++
				mu.Unlock()
			} else if !errors.Is(err, ErrNotFound) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got != 1 {
		t.Fatalf("%d callers released the message, want 1", got)
	}
}
