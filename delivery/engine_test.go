package delivery_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Every goroutine an engine starts ends in Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	recipient = "test:host:b"
	retryMin  = time.Second
	retryMax  = 8 * time.Second
)

var recipientPeer = peer.ID("peer-b")

// expiry is one call of Config.Expired.
type expiry struct {
	m     *protocol.Message
	cause *protocol.Error
}

// rig is an engine over the fakes.
type rig struct {
	clock   *clock
	store   *fakeStore
	wire    *wire
	audit   *auditLog
	sender  *protocol.Builder
	expired chan expiry
	handed  chan *protocol.Message
	engine  *delivery.Engine
	// outboxDelay is the engines' Config.OutboxDelay (set before start; 0: the default).
	outboxDelay time.Duration
}

// newRig starts an engine whose retry loop looks every tick (an hour: only a wake moves it).
func newRig(t *testing.T, tick time.Duration) *rig { return newRigDelay(t, tick, 0) }

// newRigDelay is newRig with the engines' Config.OutboxDelay.
func newRigDelay(t *testing.T, tick, outboxDelay time.Duration) *rig {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r := &rig{clock: c, store: newFakeStore(c.Now), wire: newWire(), audit: &auditLog{},
		expired: make(chan expiry, 16), handed: make(chan *protocol.Message, 16), outboxDelay: outboxDelay}
	r.sender = newBuilder(t, "test:host:a", c.Now)
	r.engine = r.start(t, tick)
	return r
}

// start starts another engine over the rig's store, as after a restart.
func (r *rig) start(t *testing.T, tick time.Duration) *delivery.Engine {
	t.Helper()
	e, err := delivery.New(context.Background(), delivery.Config{
		Store: r.store, Deliver: r.wire.Deliver, Audit: r.audit.Append, Now: r.clock.Now,
		Expired:  func(m *protocol.Message, cause *protocol.Error) { r.expired <- expiry{m, cause} },
		HandOver: func(m *protocol.Message, _ int) error { r.handed <- m; return nil },
		PeerOf: func(agentID string) (peer.ID, bool) {
			return recipientPeer, agentID == recipient
		},
		RetryMin: retryMin, RetryMax: retryMax, AttemptTimeout: time.Hour, Tick: tick, OutboxDelay: r.outboxDelay,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func (r *rig) message(t *testing.T, ttl time.Duration) (*protocol.Message, []byte) {
	t.Helper()
	m, err := r.sender.Event(recipient, protocol.IntentNotify, protocol.EventPayload{EventType: "x"}, protocol.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, raw
}

// send runs Engine.Send on its own goroutine and returns its result's channel.
func (r *rig) send(m *protocol.Message, raw []byte) <-chan error {
	done := make(chan error, 1)
	go func() { _, err := r.engine.Send(context.Background(), m, raw); done <- err }()
	return done
}

func result(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatal("Send never returned")
		return nil
	}
}

var unreachable = &protocol.Error{Code: protocol.CodeAgentNotFound, Message: "cannot reach the recipient"}

// queueUnreachable sends a message with the given TTL whose recipient cannot be reached:
// Send returns nil (queued), and the failure is rescheduled once.
func (r *rig) queueUnreachable(t *testing.T, ttl time.Duration) (*protocol.Message, []byte) {
	t.Helper()
	m, raw := r.message(t, ttl)
	done := r.send(m, raw)
	r.wire.next(t).answer <- unreachable
	if err := result(t, done); err != nil {
		t.Fatalf("Send of a message its recipient cannot take yet: %v, want nil (queued)", err)
	}
	r.rescheduled(t, m.Envelope.MessageID, 1)
	return m, raw
}

// rescheduled waits until the entry of id has recorded the given failed attempts.
func (r *rig) rescheduled(t *testing.T, id string, attempts int) {
	t.Helper()
	eventually(t, &r.store.changes, "the failure rescheduled", func() bool {
		e, _ := r.store.queued(id)
		return e.Attempts == attempts
	})
}

// outboxEmpties waits until nothing is queued.
func (r *rig) outboxEmpties(t *testing.T) {
	t.Helper()
	eventually(t, &r.store.changes, "the outbox empty", func() bool { return r.store.outboxLen() == 0 })
}

// An unreachable recipient: Send returns nil once the message is queued, and the retry loop
// attempts it again after a delay that grows with every failure, until a receipt.
func TestRetriesUntilDelivered(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, raw := r.message(t, time.Hour)
	id := m.Envelope.MessageID
	done := r.send(m, raw)
	first := r.wire.next(t)
	if first.resend {
		t.Fatal("Send's first attempt is marked as a resend")
	}
	first.answer <- unreachable
	if err := result(t, done); err != nil {
		t.Fatalf("Send of a message its recipient cannot take yet: %v, want nil (queued)", err)
	}
	for failures := 1; failures <= 2; failures++ {
		r.rescheduled(t, id, failures)
		e, _ := r.store.queued(id)
		// Attempt a waits RetryMin doubled a-1 times, with jitter over its upper half.
		if least := retryMin << (failures - 1) / 2; e.NextAttemptAt.Sub(r.clock.Now()) < least {
			t.Fatalf("failure %d rescheduled in %s, want at least %s", failures, e.NextAttemptAt.Sub(r.clock.Now()), least)
		}
		if !strings.Contains(e.LastError, "cannot reach") {
			t.Fatalf("last error %q, want the attempt's", e.LastError)
		}
		r.clock.advance(retryMax)
		a := r.wire.next(t)
		if !a.resend || a.m.Envelope.MessageID != id {
			t.Fatalf("retry of %s (resend %v), want a resend of %s", a.m.Envelope.MessageID, a.resend, id)
		}
		if failures < 2 {
			a.answer <- unreachable
		} else {
			a.answer <- nil
		}
	}
	eventually(t, &r.audit.changes, "delivered audited", func() bool { return len(r.audit.of(id)) == 2 })
	if got := r.audit.events(id); !slices.Equal(got, []audit.Event{audit.EventSent, audit.EventDelivered}) {
		t.Fatalf("audit %v, want sent then delivered", got)
	}
	if _, queued := r.store.queued(id); queued {
		t.Fatal("a delivered message is still queued")
	}
}

// A message still queued when its TTL passes leaves the outbox once; its sender is told with
// a TIMEOUT error and the audit log records it expired, with that error.
func TestExpiresAfterTTL(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, _ := r.queueUnreachable(t, 10*time.Second)
	r.clock.advance(11 * time.Second)
	var x expiry
	select {
	case x = <-r.expired:
	case <-time.After(hangGuard):
		t.Fatal("the sender was never told")
	}
	if x.m.Envelope.MessageID != m.Envelope.MessageID || x.cause.Code != protocol.CodeTimeout ||
		!strings.Contains(x.cause.Message, "1 attempts") || !strings.Contains(x.cause.Message, "cannot reach") {
		t.Fatalf("expiry of %s: %v, want a TIMEOUT naming the attempts and the last error", x.m.Envelope.MessageID, x.cause)
	}
	es := r.audit.of(m.Envelope.MessageID)
	if len(es) != 2 || es[1].Event != audit.EventExpired || es[1].Code != protocol.CodeTimeout || es[1].Reason != x.cause.Error() {
		t.Fatalf("audit %+v, want sent then expired with the TIMEOUT", es)
	}
	if r.store.outboxLen() != 0 {
		t.Fatal("an expired message is still queued")
	}
}

// While an attempt of a message is in flight, its id is claimed: neither the retry loop,
// which sees it due, nor a second Send attempts it again.
func TestClaimPreventsASecondAttemptInFlight(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, raw := r.message(t, time.Hour)
	done := r.send(m, raw)
	first := r.wire.next(t) // held: Send's attempt is in flight
	if _, err := r.engine.Send(context.Background(), m, raw); protocol.CodeOf(err) != protocol.CodeDuplicate {
		t.Fatalf("a second Send during the first: %v, want DUPLICATE", err)
	}
	// The entry is due (Put makes it due at once): two passes of the loop that end after it
	// was stored have each read it from Due and left it to its claim.
	since := r.store.dues()
	eventually(t, &r.store.changes, "two passes of the retry loop", func() bool { return r.store.dues() >= since+2 })
	select {
	case a := <-r.wire.attempts:
		t.Fatalf("attempt of %s while Send's was in flight", a.m.Envelope.MessageID)
	default:
	}
	first.answer <- nil
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	r.outboxEmpties(t)
}

// A recipient that comes back (a connection to its peer, or its liveness heard alive) has its
// queued messages attempted at once, without waiting for their delay.
func TestRedeliversWhenTheRecipientReturns(t *testing.T) {
	for _, how := range []string{"peer", "agent"} {
		t.Run(how, func(t *testing.T) {
			r := newRig(t, time.Millisecond) // the clock never moves: no delay ever passes
			m, _ := r.queueUnreachable(t, time.Hour)
			if how == "peer" {
				r.engine.PeerReturned(peer.ID("peer-other")) // serves nobody queued
				r.engine.PeerReturned(recipientPeer)
			} else {
				r.engine.AgentReturned(recipient)
			}
			a := r.wire.next(t) // the clock has not moved
			if a.m.Envelope.MessageID != m.Envelope.MessageID {
				t.Fatal("another message attempted")
			}
			a.answer <- nil
			r.outboxEmpties(t)
		})
	}
}

// A beat of a recipient whose last attempt failed is a sign of life even when nothing else
// changed (it restarted before anyone suspected it): its queue is attempted at once. Beats
// of other agents, and a second beat once the queue was made due, change nothing.
func TestABeatOfARecipientInBackoffRedeliversAtOnce(t *testing.T) {
	r := newRig(t, time.Millisecond) // the clock never moves: no delay ever passes
	m, _ := r.queueUnreachable(t, time.Hour)
	r.engine.AgentHeard("test:other:agent")
	select {
	case a := <-r.wire.attempts:
		t.Fatalf("a beat of another agent attempted %s", a.m.Envelope.MessageID)
	case <-time.After(50 * time.Millisecond):
	}
	r.engine.AgentHeard(recipient)
	a := r.wire.next(t)
	if a.m.Envelope.MessageID != m.Envelope.MessageID {
		t.Fatal("another message attempted")
	}
	a.answer <- nil
	r.outboxEmpties(t)
	r.engine.AgentHeard(recipient) // delivered: nothing is queued, nothing is attempted
	select {
	case a := <-r.wire.attempts:
		t.Fatalf("a beat after the delivery attempted %s", a.m.Envelope.MessageID)
	case <-time.After(50 * time.Millisecond):
	}
}

// A recipient's return only queues it for the retry loop, which does the store write: the
// callers (a connection notification, gossip's liveness watcher) never wait for an fsync.
func TestReturnsAreLeftToTheRetryLoop(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, _ := r.queueUnreachable(t, time.Hour)
	id := m.Envelope.MessageID
	r.engine.Close()
	e, err := delivery.New(context.Background(), delivery.Config{Store: r.store, Deliver: r.wire.Deliver,
		Now: r.clock.Now, RetryMin: retryMin, RetryMax: retryMax, AttemptTimeout: time.Hour, Tick: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	before, _ := r.store.queued(id)
	e.AgentReturned(recipient)
	e.PeerReturned(recipientPeer)
	if after, _ := r.store.queued(id); !after.NextAttemptAt.Equal(before.NextAttemptAt) || after.Backoff != before.Backoff {
		t.Fatal("a return wrote to the store on the caller's goroutine")
	}
	e.Start() // the loop, woken by the returns, makes the entry due
	a := r.wire.next(t)
	if a.m.Envelope.MessageID != id {
		t.Fatal("another message attempted")
	}
	a.answer <- nil
	r.outboxEmpties(t)
}

// After a restart, a new engine over the same store delivers what the old one had queued,
// and hands the agent again what it had accepted and the agent had not taken; a message a
// crash left without its "received" audit entry gets one, saying so.
func TestRestartRedeliversPending(t *testing.T) {
	r := newRig(t, time.Millisecond)
	out, _ := r.queueUnreachable(t, time.Hour)
	in := make([]*protocol.Message, 3)
	raws := make([][]byte, 3)
	for i := range in {
		in[i], raws[i] = r.message(t, time.Hour)
	}
	dups, errs := r.engine.Accept(in, raws)
	if slices.Contains(dups, true) || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("accept: duplicates %v, errors %v", dups, errs)
	}
	if err := r.engine.Taken(in[0].Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	r.engine.Close()

	again := r.start(t, time.Millisecond)
	if dups, _ := again.Accept(in[1:2], raws[1:2]); !dups[0] {
		t.Fatal("a message accepted before the restart is not a duplicate after it")
	}
	pending := again.Pending()
	again.Redeliver(pending, delivery.Audited{Unaudited: map[string]bool{in[2].Envelope.MessageID: true}})
	for _, want := range in[1:] {
		if got := <-r.handed; got.Envelope.MessageID != want.Envelope.MessageID {
			t.Fatalf("handed over %s, want %s (not taken, in arrival order)", got.Envelope.MessageID, want.Envelope.MessageID)
		}
	}
	if es := r.audit.of(in[1].Envelope.MessageID); len(es) != 0 {
		t.Fatalf("a message whose receipt was audited is audited again at restart: %+v", es)
	}
	if es := r.audit.of(in[2].Envelope.MessageID); len(es) != 1 || es[0].Event != audit.EventReceived || !strings.Contains(es[0].Reason, "restart") {
		t.Fatalf("audit of the unaudited message %+v, want received, recorded at restart", es)
	}
	r.clock.advance(retryMax)
	a := r.wire.next(t)
	if a.m.Envelope.MessageID != out.Envelope.MessageID || !a.resend {
		t.Fatal("the queued message is not resent after the restart")
	}
	a.answer <- nil
	r.outboxEmpties(t)
}

// The agent took a message: the audit log says so before the store forgets it, so that a
// crash between the two offers it again rather than leave it taken with no record.
func TestTakenIsAuditedBeforeTheStoreForgets(t *testing.T) {
	r := newRig(t, time.Hour)
	m, raw := r.message(t, time.Hour)
	r.engine.Accept([]*protocol.Message{m}, [][]byte{raw})
	var pendingAtAudit int
	e, err := delivery.New(context.Background(), delivery.Config{Store: r.store, Deliver: r.wire.Deliver,
		Audit: func(audit.Entry) { p, _ := r.store.Pending(); pendingAtAudit = len(p) }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Taken(m.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if p, _ := r.store.Pending(); pendingAtAudit != 1 || len(p) != 0 {
		t.Fatalf("pending at the audit %d, after %d; want 1 then 0", pendingAtAudit, len(p))
	}
	if err := e.Taken(m.Envelope.MessageID); err != nil {
		t.Fatalf("taken twice: %v, want nil (nothing left to forget)", err)
	}
}

// A refusal the recipient's node answered is final unless its code says later: the message
// leaves the outbox, Send returns the refusal itself, the audit log records it refused. A
// RATE_LIMITED refusal is retried, no sooner than the retry_after it asked for; a TIMEOUT
// refusal is retried too.
func TestRefusals(t *testing.T) {
	r := newRig(t, time.Hour)
	m, raw := r.message(t, time.Hour)
	done := r.send(m, raw)
	denied := protocol.Errorf(protocol.CodePermissionDenied, "not you")
	r.wire.next(t).answer <- &delivery.Refusal{Err: denied}
	if err := result(t, done); err != denied {
		t.Fatalf("Send returned %v, want the refusal itself", err)
	}
	eventually(t, &r.audit.changes, "refused audited", func() bool { return len(r.audit.of(m.Envelope.MessageID)) == 2 })
	if es := r.audit.of(m.Envelope.MessageID); es[1].Event != audit.EventRefused || es[1].Code != protocol.CodePermissionDenied {
		t.Fatalf("audit %+v, want sent then refused with its code", es)
	}
	if r.store.outboxLen() != 0 {
		t.Fatal("a refused message is still queued")
	}

	m, raw = r.message(t, time.Hour)
	done = r.send(m, raw)
	r.wire.next(t).answer <- &delivery.Refusal{Err: &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: time.Hour}}
	if err := result(t, done); err != nil {
		t.Fatalf("Send of a rate-limited message: %v, want nil (queued)", err)
	}
	r.rescheduled(t, m.Envelope.MessageID, 1)
	if e, _ := r.store.queued(m.Envelope.MessageID); e.NextAttemptAt.Sub(r.clock.Now()) < time.Hour {
		t.Fatalf("rescheduled in %s, want at least the hour asked for", e.NextAttemptAt.Sub(r.clock.Now()))
	}

	// A recipient that could not check the message in time (it was fetching the sender's
	// certificate, under load) has not refused it for good.
	m, raw = r.message(t, time.Hour)
	done = r.send(m, raw)
	r.wire.next(t).answer <- &delivery.Refusal{Err: protocol.Errorf(protocol.CodeTimeout, "cannot fetch the certificate of peer p")}
	if err := result(t, done); err != nil {
		t.Fatalf("Send of a message its recipient could not check in time: %v, want nil (queued)", err)
	}
	r.rescheduled(t, m.Envelope.MessageID, 1)
}

// Close cancels the attempts in flight and waits for them (goleak checks that nothing is
// left); a Send after Close still settles its outcome, on the caller's goroutine.
func TestCloseWaitsForAttemptsInFlight(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, _ := r.queueUnreachable(t, time.Hour)
	r.clock.advance(retryMax)
	r.wire.next(t) // a retry in flight, never answered
	r.engine.Close()
	e, _ := r.store.queued(m.Envelope.MessageID)
	if e.Attempts != 2 {
		t.Fatalf("%d attempts recorded after Close, want the cancelled retry recorded too", e.Attempts)
	}

	m, raw := r.message(t, time.Hour)
	done := r.send(m, raw)
	r.wire.next(t).answer <- nil
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	if _, queued := r.store.queued(m.Envelope.MessageID); queued {
		t.Fatal("Send after Close returned before settling")
	}
}

// New says what is missing.
func TestNewNeedsAStoreAndAWire(t *testing.T) {
	if _, err := delivery.New(context.Background(), delivery.Config{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Fatalf("New without a store: %v", err)
	}
}

// The retry loop reads what is due, then claims each message. The attempt that held the claim
// meanwhile may have settled the message (here Send's first, rescheduling it): the loop
// attempts what the outbox holds by then, so the message is not sent again at once, and its
// next wait counts every failure.
func TestTheRetryLoopDoesNotResendWhatWasSettledSinceItRead(t *testing.T) {
	r := newRig(t, time.Millisecond)
	m, raw := r.message(t, time.Hour)
	id := m.Envelope.MessageID
	read, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.store.onDueRead(func(due []store.OutboxEntry) {
		for _, e := range due {
			if e.MessageID == id {
				once.Do(func() { close(read); <-goOn })
			}
		}
	})
	done := r.send(m, raw)
	first := r.wire.next(t)
	select {
	case <-read: // the loop read the message as due while Send's attempt held its claim
	case <-time.After(hangGuard):
		t.Fatal("the retry loop never read the message as due")
	}
	first.answer <- unreachable
	if err := result(t, done); err != nil {
		t.Fatal(err)
	}
	r.rescheduled(t, id, 1)
	time.Sleep(50 * time.Millisecond) // Send releases its claim right after the reschedule
	close(goOn)
	select {
	case a := <-r.wire.attempts:
		t.Fatalf("the loop attempted %s again at once (resend %v), from what it read before the reschedule", a.m.Envelope.MessageID, a.resend)
	case <-time.After(200 * time.Millisecond):
	}
	r.clock.advance(retryMax)
	a := r.wire.next(t)
	a.answer <- nil
	r.outboxEmpties(t)
}
