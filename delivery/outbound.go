package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Refusal is what Deliver returns when the recipient's node answered with a refusal, as
// opposed to a failure to reach it: the engine retries a refusal only when its code says the
// recipient may take the message later (RATE_LIMITED, INTERNAL_ERROR, AGENT_NOT_FOUND).
type Refusal struct{ Err error }

// Error returns the refusal's own message.
func (r *Refusal) Error() string { return r.Err.Error() }

// Unwrap returns the refusal.
func (r *Refusal) Unwrap() error { return r.Err }

// Send stores m, whose signed document is raw, in the outbox and makes the first delivery
// attempt, within ctx and AttemptTimeout. It returns nil once m is delivered or, when its
// recipient cannot be reached yet, safely queued for the retry loop (queued is then true);
// the recipient's refusal (unwrapped from its *Refusal) when it refused m; the store's
// refusal when m could not be queued (a full queue is RATE_LIMITED); DUPLICATE when m is
// being sent already.
//
// The first attempt does not wait for the outbox. The store checks m and reserves its room
// first (Store.PreparePut), so that nothing it would refuse is sent; then the attempt goes
// on the wire while the outbox write waits for its outcome (Config.OutboxDelay, see
// writeOutbox). A message the recipient acknowledged is durable there (its node stores it
// before its receipt), so it need not be written here at all; any other is committed, and
// Send reports it queued only once that commit returned. A crash before then loses nothing
// Send acknowledged: the recipient may hold m while the sender does not, and a resend of m
// is a DUPLICATE there.
//
// Recording the outcome (settle) is off Send's path: a removal lost in a crash only means one
// more delivery, which the recipient recognises as a duplicate.
func (e *Engine) Send(ctx context.Context, m *protocol.Message, raw []byte) (queued bool, err error) {
	id := m.Envelope.MessageID
	// The id is claimed before it is stored, so that the retry loop, which attempts what is
	// due, leaves this first attempt to Send. The claim is held until the outcome is settled,
	// so that the loop does not attempt it meanwhile either.
	if !e.claims.take(id, true) {
		return false, protocol.Errorf(protocol.CodeDuplicate, "message %s is already being sent; send a new message, or wait for this one", id)
	}
	p, err := e.cfg.Store.PreparePut(m, raw)
	if err != nil {
		e.claims.release(id)
		return false, err
	}
	outcome := make(chan error, 1)
	stored := e.writeOutbox(m, p, outcome)
	actx, cancel := context.WithTimeout(ctx, e.cfg.AttemptTimeout)
	err = e.cfg.Deliver(actx, m, raw, false)
	cancel()
	outcome <- err
	return e.sendOutcome(m, <-stored, err)
}

// written is what became of Send's outbox write: committed (err nil), failed, or not made
// because the first attempt was final first (skipped).
type written struct {
	skipped bool
	err     error
}

// writeOutbox makes Send's outbox write on a goroutine of its own and returns the channel its
// result comes on. It audits "sent" (while the attempt is on the wire), then waits for the
// first attempt's outcome (on outcome) at most OutboxDelay: a final one (a receipt, or a
// refusal not to retry) abandons the write; otherwise, or when the delay passed or Close came
// first, it commits p. After Close it does all that at once, on the caller's goroutine.
func (e *Engine) writeOutbox(m *protocol.Message, p store.PreparedPut, outcome <-chan error) <-chan written {
	stored := make(chan written, 1)
	write := func(wait bool) {
		e.record(audit.EventSent, m, nil)
		if wait && e.answeredForGood(outcome) {
			p.Abandon()
			stored <- written{skipped: true}
			return
		}
		stored <- written{err: p.Commit()}
	}
	if !e.spawn(func() { write(e.cfg.OutboxDelay > 0) }) {
		write(false)
	}
	return stored
}

// answeredForGood waits at most OutboxDelay (or until Close) for the first attempt's outcome,
// and reports whether it came and was final: a receipt, or a refusal not to retry.
func (e *Engine) answeredForGood(outcome <-chan error) bool {
	t := time.NewTimer(e.cfg.OutboxDelay)
	defer t.Stop()
	select {
	case err := <-outcome:
		return err == nil || !retryable(err)
	case <-t.C:
	case <-e.ctx.Done():
	}
	return false
}

// sendOutcome settles Send's first attempt, whose outcome is err, off the caller's path, and
// returns what Send returns: queued when the outbox holds m for the retry loop. A message the outbox does not hold was answered for good by its
// recipient (w skipped), or its commit failed: then m is not queued, which is Send's error,
// unless the recipient took it or refused it for good (its durable copy is the recipient's,
// or there is nothing to keep).
func (e *Engine) sendOutcome(m *protocol.Message, w written, err error) (queued bool, _ error) {
	id := m.Envelope.MessageID
	var settle func()
	switch {
	case w.err != nil && retryable(err):
		e.record(audit.EventRefused, m, protocol.Errorf(protocol.CodeInternalError, "not queued: the outbox commit failed: %v", w.err))
		e.claims.release(id)
		return false, w.err
	case w.skipped || w.err != nil:
		if w.err != nil {
			e.cfg.Log.Error("outbox: commit failed after the first attempt was answered", "id", id, "err", w.err.Error())
		}
		settle = func() { e.answered(m, err) }
	default:
		settle = func() { e.settle(m, 0, err) }
	}
	run := func() {
		defer e.claims.release(id)
		settle()
	}
	if !e.spawn(run) {
		run()
	}
	if err == nil || retryable(err) {
		return err != nil && !w.skipped, nil
	}
	return false, refusalOf(err)
}

// answered records the final outcome of an attempt whose message the outbox does not hold:
// delivered, or refused.
func (e *Engine) answered(m *protocol.Message, err error) {
	e.record(outcomeEvent(err), m, refusalOf(err))
	if err != nil {
		e.cfg.Log.Info("message refused by its recipient", "id", m.Envelope.MessageID, "to", m.Envelope.Recipient.AgentID, "code", protocol.CodeOf(err))
	}
}

// outcomeEvent is the audit event of a final attempt's outcome: delivered, or refused.
func outcomeEvent(err error) audit.Event {
	if err == nil {
		return audit.EventDelivered
	}
	return audit.EventRefused
}

// refusalOf returns the refusal a *Refusal wraps, or err itself.
func refusalOf(err error) error {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Err
	}
	return err
}

// PeerReturned tells the engine that a connection to p was made: the messages queued for the
// agents p serves are due at once. It only queues p for the retry loop, which does the store
// write: it may be called from a connection notification, which must not wait for an fsync.
func (e *Engine) PeerReturned(p peer.ID) { e.returned(comeback{peer: p}) }

// AgentReturned tells the engine that agentID was seen alive: the messages queued for it are
// due at once, from the shortest delay again. Like PeerReturned it only queues agentID for
// the retry loop: it is called from gossip's liveness watcher, whose subscription drops what
// arrives while the watcher waits (for an fsync, say).
func (e *Engine) AgentReturned(agentID string) { e.returned(comeback{agent: agentID}) }

// AgentHeard tells the engine that a beat of agentID arrived. When the last attempt to
// agentID failed, its queue is due at once, as for AgentReturned: an agent that restarted
// before anyone suspected it makes no state change and, without a new connection to this
// node, would otherwise wait for its sender's backoff (up to RetryMax). Otherwise, the common
// case, it costs a map lookup: it may be called for every beat heard.
func (e *Engine) AgentHeard(agentID string) {
	e.silentMu.Lock()
	_, waiting := e.silent[agentID]
	delete(e.silent, agentID)
	e.silentMu.Unlock()
	if waiting {
		e.AgentReturned(agentID)
	}
}

// maxSilent bounds the recipients the engine remembers as silent; past it, a recipient's
// queue waits for its backoff, a connection or a liveness transition, as before.
const maxSilent = 4096

// failedTo notes whether the last attempt to agentID failed and will be tried again.
func (e *Engine) failedTo(agentID string, failed bool) {
	e.silentMu.Lock()
	defer e.silentMu.Unlock()
	if !failed {
		delete(e.silent, agentID)
	} else if len(e.silent) < maxSilent {
		e.silent[agentID] = struct{}{}
	}
}

// comeback is a recipient that came back, waiting for the retry loop: a peer a connection
// was made to, or an agent heard alive.
type comeback struct {
	peer  peer.ID
	agent string
}

func (e *Engine) returned(c comeback) {
	select {
	case e.back <- c:
	default:
		e.backOver.Store(true)
	}
	e.poke()
}

// run is the retry loop: on every tick or wake it makes the returned recipients due, expires
// what outlived its TTL and resends what is due.
func (e *Engine) run() {
	defer e.wg.Done()
	tick := time.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	slots := make(chan struct{}, retryConcurrency)
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		case <-e.wake:
		}
		e.retryReturned()
		now := e.cfg.Now()
		e.expire(now)
		if !e.retry(now, slots) {
			return
		}
	}
}

// retryReturned makes due at once the queued messages of the agents that came back and of
// the agents the returned peers serve, looking only at the recipients that have messages
// queued (usually none), not at every agent the node knows: connections come and go all the
// time in a large mesh.
func (e *Engine) retryReturned() {
	peers, agents := map[peer.ID]bool{}, map[string]bool{}
drain:
	for range cap(e.back) {
		select {
		case c := <-e.back:
			if c.agent != "" {
				agents[c.agent] = true
			} else {
				peers[c.peer] = true
			}
		default:
			break drain
		}
	}
	all := e.backOver.Swap(false) || (len(peers) > 0 && e.cfg.PeerOf == nil)
	if len(peers) == 0 && len(agents) == 0 && !all {
		return
	}
	for _, agentID := range e.cfg.Store.Recipients() {
		if !all && !agents[agentID] {
			if len(peers) == 0 {
				continue
			}
			if q, ok := e.cfg.PeerOf(agentID); !ok || !peers[q] {
				continue
			}
		}
		if _, err := e.cfg.Store.RetryNow(agentID, e.cfg.Now()); err != nil && e.ctx.Err() == nil {
			e.cfg.Log.Warn("outbox: retry now", "to", agentID, "err", err.Error())
		}
	}
}

// expire takes the messages whose TTL passed out of the outbox and tells their senders: a
// TIMEOUT error correlated to each, from the node itself.
func (e *Engine) expire(now time.Time) {
	expired, err := e.cfg.Store.Expired(now)
	if err != nil && e.ctx.Err() == nil {
		e.cfg.Log.Error("outbox: expired", "err", err.Error())
	}
	for _, en := range expired {
		m, err := protocol.DecodeJSON(en.Raw)
		if err != nil {
			continue
		}
		cause := &protocol.Error{Code: protocol.CodeTimeout, Message: fmt.Sprintf("not delivered to %s before its TTL (%d attempts; last error: %s)", en.Recipient, en.Attempts, en.LastError)}
		e.record(audit.EventExpired, m, cause)
		if e.cfg.Expired != nil {
			e.cfg.Expired(m, cause)
		}
	}
}

// retry resends what is due, at most retryConcurrency at once, each id claimed for its
// attempt. It returns false when the engine is closing.
func (e *Engine) retry(now time.Time, slots chan struct{}) bool {
	due, err := e.cfg.Store.Due(now, retryConcurrency*4)
	if err != nil && e.ctx.Err() == nil {
		e.cfg.Log.Error("outbox: due", "err", err.Error())
	}
	for _, en := range due {
		if !e.claims.take(en.MessageID, false) {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-e.ctx.Done():
			e.claims.release(en.MessageID)
			return false
		}
		started := e.spawn(func() {
			defer func() { <-slots }()
			defer e.claims.release(en.MessageID)
			e.resendIfDue(en.MessageID, now)
		})
		if !started {
			<-slots
			e.claims.release(en.MessageID)
			return false
		}
	}
	return true
}

// resendIfDue attempts the queued message id if it is still due at now. The retry loop read
// it as due before it took its claim, and the attempt that held the claim meanwhile (Send's
// first, or the loop's previous) may have settled it since: delivered, or rescheduled with
// one failure more. Attempting what was read sent it again at once, its next wait reckoned
// from the failures counted before (TestRetriesUntilDelivered caught it, once in a CI run).
func (e *Engine) resendIfDue(id string, now time.Time) {
	en, err := e.cfg.Store.Get(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return // settled for good meanwhile
	case err != nil:
		if e.ctx.Err() == nil {
			e.cfg.Log.Error("outbox: get", "id", id, "err", err.Error())
		}
		return // the next round reads it again
	case en.NextAttemptAt.After(now):
		return // rescheduled meanwhile
	}
	e.resend(en)
}

// resend makes one attempt of a queued message and settles it. A message the loop attempts
// may have reached the recipient before, even with no attempt recorded (a crash between the
// two): its attempt is a resend.
func (e *Engine) resend(en store.OutboxEntry) {
	m, err := protocol.DecodeJSON(en.Raw)
	if err != nil {
		e.cfg.Log.Error("outbox entry does not decode; dropping it", "id", en.MessageID, "err", err.Error())
		_, _ = e.cfg.Store.Delivered(en.MessageID)
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.AttemptTimeout)
	defer cancel()
	e.settle(m, en.Backoff, e.cfg.Deliver(ctx, m, en.Raw, true))
}

// settle records the outcome of an attempt in the store and the audit log. backoff is the
// entry's failed attempts since its recipient was last seen (store.OutboxEntry.Backoff).
func (e *Engine) settle(m *protocol.Message, backoff int, err error) {
	id := m.Envelope.MessageID
	e.failedTo(m.Envelope.Recipient.AgentID, err != nil && retryable(err))
	switch {
	case err != nil && e.claims.cancelled(id):
		e.drop(m, err) // cancelled while this attempt was on the wire (Cancel)
	case err == nil:
		// The removal rides in the store's next commit: losing it in a crash only means one
		// more delivery, which the recipient answers DUPLICATE.
		if ok, _ := e.cfg.Store.DeliveredLazily(e.ctx, id); ok {
			e.record(audit.EventDelivered, m, nil)
		}
	case retryable(err):
		next := e.cfg.Now().Add(e.delay(backoff+1, err))
		if rerr := e.cfg.Store.Reschedule(id, next, err.Error()); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			e.cfg.Log.Error("outbox: reschedule", "id", id, "err", rerr.Error())
		}
	default:
		if ok, _ := e.cfg.Store.Delivered(id); ok {
			e.record(audit.EventRefused, m, err)
			e.cfg.Log.Info("message refused by its recipient", "id", id, "to", m.Envelope.Recipient.AgentID, "code", protocol.CodeOf(err))
		}
	}
}

// retryable reports whether a failed attempt should be tried again later. A recipient's
// refusal is final unless it says later: over its rate, a fault of its own, the agent not
// there (yet), or a check it could not finish in time (a certificate of the sender it could
// not fetch, say).
func retryable(err error) bool {
	var r *Refusal
	if errors.As(err, &r) {
		switch protocol.CodeOf(err) {
		case protocol.CodeRateLimited, protocol.CodeInternalError, protocol.CodeAgentNotFound, protocol.CodeTimeout:
			return true
		}
		return false
	}
	switch protocol.CodeOf(err) {
	case protocol.CodeAgentNotFound, protocol.CodeTimeout, protocol.CodeRateLimited, protocol.CodeInternalError:
		return true
	}
	return false
}

// delay is the wait before attempt a (from 1): RetryMin doubled per attempt, capped at
// RetryMax, with jitter over its upper half so that senders that lost the same recipient do
// not come back in lockstep; and at least the retry_after a RATE_LIMITED refusal asked for.
func (e *Engine) delay(a int, err error) time.Duration {
	d := retry.Backoff{Min: e.cfg.RetryMin, Max: e.cfg.RetryMax}.Delay(a, e.cfg.Jitter.Int64N)
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.RetryAfter > d {
		d = pe.RetryAfter
	}
	return d
}
