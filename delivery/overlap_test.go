package delivery_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/protocol"
)

// Send's first attempt does not wait for the outbox. The outbox write waits for the
// attempt's outcome (Config.OutboxDelay): a message the recipient answered for good is never
// written; any other is committed, and Send reports nothing before that commit returned.
// These tests hold the fake store's commits and answer the attempts meanwhile; an
// OutboxDelay of an hour never passes, a negative one commits at once.

var errDisk = errors.New("disk gone")

// sent sends a new message, holding the store's commits when hold is set, and returns it
// with Send's result channel, its first attempt and the release of the held commits.
func (r *rig) sent(t *testing.T, hold bool) (*protocol.Message, <-chan error, attempt, func(error)) {
	t.Helper()
	release := func(error) {}
	if hold {
		release = r.store.holdCommits()
		t.Cleanup(func() { release(errDisk) }) // a test that failed must not hang its cleanup
	}
	m, raw := r.message(t, time.Hour)
	return m, r.send(m, raw), r.wire.next(t), release
}

// committing waits until n commits have waited on a hold.
func (r *rig) committing(t *testing.T, n int32) {
	t.Helper()
	eventually(t, &r.store.changes, "the outbox commit held", func() bool { return r.store.holding.Load() == n })
}

// A message its recipient acknowledges, or refuses for good, while the outbox write waits is
// never written to the outbox: Send returns the outcome, the audit log records it sent and
// then delivered or refused, and nothing was committed.
func TestAnAnsweredMessageIsNeverWrittenToTheOutbox(t *testing.T) {
	r := newRigDelay(t, time.Hour, time.Hour)
	m, done, a, _ := r.sent(t, true)
	a.answer <- nil
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	r.audited(t, m, audit.EventSent, audit.EventDelivered)
	denied := protocol.Errorf(protocol.CodePermissionDenied, "not you")
	m, done, a, _ = r.sent(t, true)
	a.answer <- &delivery.Refusal{Err: denied}
	if err := result(t, done); err != denied {
		t.Fatalf("Send of a refused message: %v, want the refusal", err)
	}
	r.audited(t, m, audit.EventSent, audit.EventRefused)
	if es := r.audit.of(m.Envelope.MessageID); es[1].Code != protocol.CodePermissionDenied {
		t.Fatalf("audit %+v, want the refusal's code", es)
	}
	if c, ab := r.store.holding.Load(), r.store.abandoned.Load(); c != 0 || ab != 2 || r.store.outboxLen() != 0 {
		t.Fatalf("%d commits, %d abandoned, %d queued; want 0, 2, 0", c, ab, r.store.outboxLen())
	}
}

// A recipient that cannot be reached: the outbox write commits, and Send's answer is the
// commit's. A message whose commit failed is not reported queued (the failure is returned,
// nothing is queued, the audit log records it sent and refused with INTERNAL_ERROR); one
// whose commit succeeded is.
func TestSendReportsQueuedOnlyOnceCommitted(t *testing.T) {
	r := newRigDelay(t, time.Hour, time.Hour)
	m, done, a, release := r.sent(t, true)
	a.answer <- unreachable
	r.committing(t, 1)
	release(errDisk)
	if err := result(t, done); !errors.Is(err, errDisk) {
		t.Fatalf("Send of an unreachable message whose commit failed: %v, want the store's failure", err)
	}
	if _, queued := r.store.queued(m.Envelope.MessageID); queued {
		t.Fatal("a message whose commit failed is queued")
	}
	r.audited(t, m, audit.EventSent, audit.EventRefused)
	if es := r.audit.of(m.Envelope.MessageID); es[1].Code != protocol.CodeInternalError {
		t.Fatalf("audit %+v, want the refusal INTERNAL_ERROR", es)
	}

	m, done, a, release = r.sent(t, true)
	a.answer <- unreachable
	r.committing(t, 2)
	release(nil)
	if err := result(t, done); err != nil {
		t.Fatalf("Send of an unreachable message, committed: %v, want nil (queued)", err)
	}
	r.rescheduled(t, m.Envelope.MessageID, 1)
}

// When the outbox delay passes first (here at once), the commit runs while the attempt is on
// the wire. A receipt that comes before the commit returned: Send still waits for it, so the
// message is audited sent before Send returns, and delivered after. A commit that fails
// after the receipt is no failure: the recipient holds the message durably.
func TestACommitThatOverlapsTheAttemptIsWaitedFor(t *testing.T) {
	r := newRigDelay(t, time.Hour, -1)
	m, done, a, release := r.sent(t, true)
	r.committing(t, 1) // the attempt is on the wire and the commit in flight
	a.answer <- nil
	release(nil)
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if got := r.audit.events(m.Envelope.MessageID); len(got) == 0 || got[0] != audit.EventSent {
		t.Fatalf("audit %v when Send returned, want sent first", got)
	}
	r.audited(t, m, audit.EventSent, audit.EventDelivered)
	r.outboxEmpties(t)

	m, done, a, release = r.sent(t, true)
	r.committing(t, 2)
	a.answer <- nil
	release(errDisk)
	if err := result(t, done); err != nil {
		t.Fatalf("Send of a message the recipient acknowledged: %v, want nil", err)
	}
	r.audited(t, m, audit.EventSent, audit.EventDelivered)
}

// audited waits until the audit log holds as many entries about m as want, and checks that
// they are want.
func (r *rig) audited(t *testing.T, m *protocol.Message, want ...audit.Event) {
	t.Helper()
	id := m.Envelope.MessageID
	eventually(t, &r.audit.changes, "the audit entries", func() bool { return len(r.audit.of(id)) >= len(want) })
	if got := r.audit.events(id); !slices.Equal(got, want) {
		t.Fatalf("audit %v, want %v", got, want)
	}
}

// A crash after the first attempt reached the recipient but before the outbox commit
// returned loses nothing that was acknowledged: Send had not returned (it waits for the
// commit), and after the restart the sender has nothing queued, so the recipient, which
// acknowledged the message, is the only one to hold it; nothing is sent twice. (Had the
// commit landed, the restarted sender would resend it, and the recipient answer DUPLICATE,
// which the retry loop takes as a receipt: TestRetriesUntilDelivered's resend path.)
func TestCrashBeforeTheCommitLosesNothingAcknowledged(t *testing.T) {
	r := newRigDelay(t, time.Hour, -1)
	_, done, a, release := r.sent(t, true)
	r.committing(t, 1)
	a.answer <- nil // the recipient stored it and sent its receipt
	select {
	case err := <-done:
		t.Fatalf("Send returned %v before its outbox commit did", err)
	default:
	}
	// The crash: the commit never lands. A new engine starts over what the store holds.
	dues := r.store.dues()
	r.start(t, time.Millisecond)
	eventually(t, &r.store.changes, "the restarted retry loop to look twice", func() bool { return r.store.dues() >= dues+2 })
	if n := r.store.outboxLen(); n != 0 {
		t.Fatalf("%d messages queued after the crash, want none", n)
	}
	select {
	case again := <-r.wire.attempts:
		t.Fatalf("%s sent again after the restart", again.m.Envelope.MessageID)
	default:
	}
	release(errDisk) // the dead process's goroutines, for goleak
	<-done
}

// A handler's acknowledgement (TakenLazily) writes the "acked" entry before the store forgets
// the message, without waiting for the store; after a restart, Redeliver goes by the audit
// log: a pending message it says was acked is forgotten, not handed over again.
func TestTakenLazilyAuditsFirstAndRestartGoesByTheLog(t *testing.T) {
	r := newRig(t, time.Hour)
	in := make([]*protocol.Message, 2)
	raws := make([][]byte, 2)
	for i := range in {
		in[i], raws[i] = r.message(t, time.Hour)
	}
	r.engine.Accept(in, raws)
	if err := r.engine.TakenLazily(in[0].Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if got := r.audit.events(in[0].Envelope.MessageID); !slices.Equal(got, []audit.Event{audit.EventAcked}) {
		t.Fatalf("audit %v when TakenLazily returned, want acked", got)
	}
	eventually(t, &r.store.changes, "the store to forget it", func() bool { p, _ := r.store.Pending(); return len(p) == 1 })
	r.engine.Close()

	again := r.start(t, time.Hour)
	pending := again.Pending()
	// As if the store's removal of in[1] had been lost in a crash after its "acked" entry.
	again.Redeliver(pending, delivery.Audited{Acked: map[string]bool{in[1].Envelope.MessageID: true}})
	if p, _ := r.store.Pending(); len(p) != 0 {
		t.Fatalf("%d pending after Redeliver, want the acked message forgotten", len(p))
	}
	select {
	case m := <-r.handed:
		t.Fatalf("%s handed over again though the audit log says it was taken", m.Envelope.MessageID)
	default:
	}
}
