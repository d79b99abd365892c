package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
)

// Durable delivery (docs/delivery.md): with a store, every outgoing direct message is stored
// before Send returns and retried until a receipt or its TTL, and every accepted inbound
// message is stored before its receipt goes back and kept until the agent takes it.

// retryConcurrency bounds the delivery attempts the retry loop runs at once.
const retryConcurrency = 32

// retryTick is how often the retry loop looks for due and expired messages when nothing
// wakes it earlier.
const retryTick = 250 * time.Millisecond

// outbox is the node's view of the store's outbox: which ids have an attempt in flight, so
// that the retry loop and Send do not deliver the same message twice at once. Guarded by mu.
type outbox struct {
	mu       sync.Mutex
	inFlight map[string]bool
	wake     chan struct{}
	// back holds peers that just connected, for the retry loop (peerConnected); backOver is
	// set when it was full.
	back     chan peer.ID
	backOver atomic.Bool
}

func (o *outbox) claim(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inFlight[id] {
		return false
	}
	o.inFlight[id] = true
	return true
}

func (o *outbox) release(id string) {
	o.mu.Lock()
	delete(o.inFlight, id)
	o.mu.Unlock()
}

func (o *outbox) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// openDurable opens the store and the audit log as configured and restores the replay window
// from the store's seen ids, so that exactly-once holds across restarts.
func (n *Node) openDurable() error {
	c := &n.cfg
	n.out = &outbox{inFlight: make(map[string]bool), wake: make(chan struct{}, 1), back: make(chan peer.ID, 256)}
	if c.Durable {
		opts := append([]store.Option{store.WithClock(c.Clock), store.WithLogger(n.log.With("subsystem", "store")),
			store.WithMaxSenderInboxBytes(c.InboxSenderBytes)}, c.StoreOptions...)
		st, err := store.Open(filepath.Join(c.DataDir, "store"), opts...)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		n.store = st
		seen, err := st.Seen(n.now())
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if dropped := n.replay.Restore(seen, n.now()); dropped > 0 {
			n.log.Warn("replay window full while restoring; newest ids dropped", "dropped", dropped)
		}
		n.inbox.onAck = n.taken
	}
	if c.Audit {
		lg, err := audit.Open(filepath.Join(c.DataDir, "audit"), audit.WithOmitPayloads(!c.AuditPayloads),
			audit.WithMaxTotalBytes(c.AuditMaxBytes), audit.WithMaxAge(c.AuditMaxAge),
			audit.WithClock(c.Clock), audit.WithLogger(n.log.With("subsystem", "audit")))
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		n.audit = lg
		if b := lg.Broken(); b != nil {
			n.log.Error("THE AUDIT LOG WAS DAMAGED: a new anchored segment was started and delivery goes on; "+
				"run `iacp-node audit verify` to see where, and keep the damaged files as evidence", "break", b.Error())
		}
	}
	return nil
}

func (n *Node) closeDurable() error {
	var errs []error
	if n.store != nil {
		n.flushJournal()
		errs = append(errs, n.store.Close())
	}
	if n.audit != nil {
		errs = append(errs, n.audit.Close())
	}
	return errors.Join(errs...)
}

// record appends one audit entry; a failing audit log is reported, never fatal to delivery.
func (n *Node) record(ev audit.Event, m *protocol.Message, cause error) {
	if n.audit == nil {
		return
	}
	e := audit.FromMessage(ev, m)
	if cause != nil {
		e.Code = protocol.CodeOf(cause)
		e.Reason = cause.Error()
	}
	if err := n.audit.Append(e); err != nil {
		n.log.Error("audit log append failed", "err", err.Error())
	}
}

// startDurable starts the retry loop, re-offers pending (what the agent had not taken before
// a restart, read before the protocol was served: what was accepted since is offered by its
// own acceptance), and retries a recipient's queue at once when it comes back.
func (n *Node) startDurable(pending []store.InboxEntry) {
	if n.store == nil {
		return
	}
	n.host.Network().Notify(&network.NotifyBundle{ConnectedF: n.peerConnected})
	n.wg.Add(2)
	go n.retryLoop()
	go n.journalLoop()
	n.redeliverPending(pending)
}

// peerConnected runs in the swarm's notification path: it only queues the peer for the retry
// loop, which makes that peer's agents due (a store write, with its fsync: never inside the
// swarm's notification, which would hold up the connection it announces). When the queue is
// full the loop looks at every recipient with queued messages instead.
func (n *Node) peerConnected(_ network.Network, c network.Conn) {
	select {
	case n.out.back <- c.RemotePeer():
	default:
		n.out.backOver.Store(true)
	}
	n.out.poke()
}

// retryReturned makes due at once the queued messages of the agents the peers that just
// connected serve, looking only at the recipients that have messages queued (usually none),
// not at every agent the node knows: connections come and go all the time in a large mesh.
func (n *Node) retryReturned() {
	back := map[peer.ID]bool{}
	for len(back) < cap(n.out.back) {
		select {
		case p := <-n.out.back:
			back[p] = true
			continue
		default:
		}
		break
	}
	all := n.out.backOver.Swap(false)
	if len(back) == 0 && !all {
		return
	}
	for agentID := range n.store.Usage().ByRecipient {
		if q, ok := n.peerOf(agentID); !ok || (!all && !back[q]) {
			continue
		}
		if _, err := n.store.RetryNow(agentID, n.now()); err != nil && n.ctx.Err() == nil {
			n.log.Warn("outbox: retry now", "to", agentID, "err", err.Error())
		}
	}
}

// peerOf returns the peer the directory binds agentID to.
func (n *Node) peerOf(agentID string) (peer.ID, bool) { return n.directory.Peek(agentID) }

// watchReturns retries an agent's queue at once when gossip's liveness says it came back
// alive or busy. Gossip alone binds nothing: a heartbeat refreshes where an agent is only
// when its id is already bound to the peer that signed it (a direct message the node
// accepted pinned it, or the allowlist names it), and a heartbeat of a peer other than the
// bound one is recorded as a trust conflict and otherwise ignored.
func (n *Node) watchReturns(sub *pubsub.Subscription) {
	defer n.wg.Done()
	defer sub.Cancel()
	for {
		select {
		case <-n.ctx.Done():
			return
		case it, ok := <-sub.C():
			if !ok {
				return
			}
			if it.Kind == pubsub.KindEvent {
				n.heardRevocations(it)
				continue
			}
			n.returned(it.Transition)
		}
	}
}

// returned handles one liveness transition for watchReturns.
func (n *Node) returned(tr pubsub.Transition) {
	if to := tr.To; to != pubsub.StateAlive && to != pubsub.StateBusy {
		return
	}
	if tr.AgentID == n.cfg.AgentID {
		return
	}
	if n.certs != nil {
		// Gossip took the heartbeat only with a verified certificate for its author.
		if n.certs.check(tr.AgentID, tr.PeerID) != nil {
			return
		}
		n.learn(tr.AgentID, tr.PeerID)
	} else if n.trust.check(tr.AgentID, tr.PeerID, claimHeartbeat) != nil {
		return
	} else if n.trust.pinnedTo(tr.AgentID, tr.PeerID) {
		n.learn(tr.AgentID, tr.PeerID) // gossip refreshes a binding, never makes one
	}
	if n.store != nil {
		if k, err := n.store.RetryNow(tr.AgentID, n.now()); err == nil && k > 0 {
			n.out.poke()
		}
	}
}

// retryLoop delivers due messages and turns expired ones into TIMEOUT errors for the agent.
func (n *Node) retryLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(retryTick)
	defer tick.Stop()
	slots := make(chan struct{}, retryConcurrency)
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		case <-n.out.wake:
		}
		n.retryReturned()
		now := n.now()
		expired, err := n.store.Expired(now)
		if err != nil && n.ctx.Err() == nil {
			n.log.Error("outbox: expired", "err", err.Error())
		}
		for _, e := range expired {
			n.expire(e)
		}
		due, err := n.store.Due(now, retryConcurrency*4)
		if err != nil && n.ctx.Err() == nil {
			n.log.Error("outbox: due", "err", err.Error())
		}
		for _, e := range due {
			if !n.out.claim(e.MessageID) {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-n.ctx.Done():
				n.out.release(e.MessageID)
				return
			}
			started := n.spawn(func() {
				defer func() { <-slots }()
				defer n.out.release(e.MessageID)
				m, err := protocol.DecodeJSON(e.Raw)
				if err != nil {
					n.log.Error("outbox entry does not decode; dropping it", "id", e.MessageID, "err", err.Error())
					_, _ = n.store.Delivered(e.MessageID)
					return
				}
				ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FrameTimeout)
				defer cancel()
				n.settle(m, e.Backoff, n.attempt(ctx, m, e.Raw, true))
			})
			if !started {
				<-slots
				n.out.release(e.MessageID)
				return
			}
		}
	}
}

// attempt makes one delivery attempt of a stored message and returns its outcome: nil for a
// receipt (or, when resend is set, DUPLICATE: the recipient already has it), the refusal or
// the failure otherwise. resend is set by the retry loop: a message it delivers may have
// reached the recipient before, even with no attempt recorded (a crash between the two).
func (n *Node) attempt(ctx context.Context, m *protocol.Message, raw []byte, resend bool) error {
	w, release, err := n.waiterFor(m)
	if err != nil {
		return err
	}
	defer release()
	n.waitersMu.Lock()
	w.resend = resend
	n.waitersMu.Unlock()
	if err := n.deliverRaw(ctx, m, raw, w); err != nil {
		return err
	}
	select {
	case <-w.done:
		if w.reply.Message.Type == protocol.TypeError && w.reply.Envelope.CorrelationID == m.Envelope.MessageID {
			return &refusal{replyError(w.reply)} // a resend's DUPLICATE is a receipt (takeReply)
		}
	default:
	}
	return nil
}

// refusal marks an error the recipient's node answered, as opposed to a failure to reach it.
type refusal struct{ error }

func (r *refusal) Unwrap() error { return r.error }

// retryable reports whether a failed attempt should be tried again later.
func retryable(err error) bool {
	var r *refusal
	if errors.As(err, &r) {
		switch protocol.CodeOf(err) {
		case protocol.CodeRateLimited, protocol.CodeInternalError, protocol.CodeAgentNotFound:
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

// settle records the outcome of an attempt in the store and the audit log. backoff is the
// entry's failed attempts since its recipient was last seen (store.OutboxEntry.Backoff).
func (n *Node) settle(m *protocol.Message, backoff int, err error) {
	id := m.Envelope.MessageID
	switch {
	case err == nil:
		if ok, _ := n.store.Delivered(id); ok {
			n.record(audit.EventDelivered, m, nil)
		}
	case retryable(err):
		wait := retryDelay(&n.cfg, backoff+1, err)
		if rerr := n.store.Reschedule(id, n.now().Add(wait), err.Error()); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			n.log.Error("outbox: reschedule", "id", id, "err", rerr.Error())
		}
	default:
		if ok, _ := n.store.Delivered(id); ok {
			n.record(audit.EventRefused, m, err)
			n.log.Info("message refused by its recipient", "id", id, "to", m.Envelope.Recipient.AgentID, "code", protocol.CodeOf(err))
		}
	}
}

// retryDelay is the wait before attempt a: exponential with jitter between RetryMin and
// RetryMax, and at least the retry_after a RATE_LIMITED refusal asked for.
func retryDelay(c *Config, a int, err error) time.Duration {
	d := backoffDelay(c.RetryMin, c.RetryMax, a)
	var e *protocol.Error
	if errors.As(err, &e) && e.RetryAfter > d {
		d = e.RetryAfter
	}
	return d
}

// expire tells the sending agent that a queued message's TTL passed: a TIMEOUT error
// correlated to it, from the node itself.
func (n *Node) expire(e store.OutboxEntry) {
	m, err := protocol.DecodeJSON(e.Raw)
	if err != nil {
		return
	}
	cause := &protocol.Error{Code: protocol.CodeTimeout, Message: fmt.Sprintf("not delivered to %s before its TTL (%d attempts; last error: %s)", e.Recipient, e.Attempts, e.LastError)}
	n.record(audit.EventExpired, m, cause)
	em, err := n.builder.Error(m, n.cfg.AgentID, cause)
	if err != nil {
		n.log.Error("build TIMEOUT error", "err", err.Error())
		return
	}
	n.waitersMu.Lock()
	w, ok := n.waiters[m.Envelope.MessageID]
	n.waitersMu.Unlock()
	if ok {
		w.complete(em)
		return
	}
	if err := n.dispatch(&Request{Msg: em, Peer: n.ID(), n: n}); err != nil {
		n.log.Warn("TIMEOUT error for the agent could not be queued", "id", m.Envelope.MessageID, "err", err.Error())
	}
}

// accept stores an inbound message before its receipt (exactly once across restarts).
// duplicate means it was accepted before: acknowledge again, do not hand it over twice.
func (n *Node) accept(m *protocol.Message, raw []byte, from peer.ID) (duplicate bool, err error) {
	dups, errs := n.acceptAll([]inbound{{m: m, raw: raw, peer: from}})
	return dups[0], errs[0]
}

// acceptAll stores a batch of inbound messages in one transaction, binds each new one's
// sender to the peer that delivered it (bind) and audits it.
func (n *Node) acceptAll(batch []inbound) (dups []bool, errs []error) {
	dups, errs = make([]bool, len(batch)), make([]error, len(batch))
	if n.store != nil {
		ms, raws := make([]*protocol.Message, len(batch)), make([][]byte, len(batch))
		for i := range batch {
			ms[i], raws[i] = batch[i].m, batch[i].raw
		}
		res, each, err := n.store.AcceptAll(ms, raws)
		for i := range batch {
			switch {
			case err != nil:
				errs[i] = protocol.Errorf(protocol.CodeInternalError, "store inbound message: %w", err)
			case each[i] != nil:
				errs[i] = each[i]
			default:
				dups[i] = res[i].Duplicate
			}
		}
	}
	for i, ib := range batch {
		if !dups[i] && errs[i] == nil {
			n.bind(ib.m.Envelope.Sender.AgentID, ib.peer)
			n.record(audit.EventReceived, ib.m, nil)
		}
	}
	return dups, errs
}

// taken marks an inbound message as taken by the agent. The audit entry is written first:
// a crash between it and the store's commit re-offers the message (and the audit shows a
// second ack), where the other order could leave a taken message with no audit record.
func (n *Node) taken(id string) error {
	if n.store == nil {
		return nil
	}
	if n.audit != nil {
		if err := n.audit.Append(audit.Entry{Event: audit.EventAcked, MessageID: id}); err != nil {
			n.log.Error("audit log append failed", "err", err.Error())
		}
	}
	if err := n.store.Ack(id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err // ErrNotFound: never stored (a local error, a reply a waiter took)
	}
	return nil
}

// pendingAtStart reads what the agent had not taken before a restart (nil without a store).
func (n *Node) pendingAtStart() []store.InboxEntry {
	if n.store == nil {
		return nil
	}
	pending, err := n.store.Pending()
	if err != nil {
		n.log.Error("inbox: pending", "err", err.Error())
	}
	return pending
}

// redeliverPending offers the agent again what it had not taken before a restart.
func (n *Node) redeliverPending(pending []store.InboxEntry) {
	unaudited := n.unaudited(pending)
	for _, e := range pending {
		m, err := protocol.DecodeJSON(e.Raw)
		if err != nil {
			continue
		}
		if unaudited[e.MessageID] && n.audit != nil {
			ae := audit.FromMessage(audit.EventReceived, m)
			ae.Reason = "recorded at restart: a crash came between storing the message and its audit entry"
			if err := n.audit.Append(ae); err != nil {
				n.log.Error("audit log append failed", "err", err.Error())
			}
		}
		p, _ := protocol.PeerIDOf(m)
		if err := n.dispatch(&Request{Msg: m, Peer: p, n: n, size: len(e.Raw)}); err != nil {
			n.log.Warn("re-offering a message after restart failed; it stays stored", "id", e.MessageID, "err", err.Error())
		}
	}
	if len(pending) > 0 {
		n.log.Info("re-offered messages the agent had not taken before the restart", "count", len(pending))
	}
}

// unaudited returns the pending messages that the audit log has no "received" entry for: the
// store and the audit log are two files, and a crash between the store's commit and the audit
// append leaves the message stored but unrecorded. It reads the whole log, only at start and
// only when messages are pending.
func (n *Node) unaudited(pending []store.InboxEntry) map[string]bool {
	if n.audit == nil || len(pending) == 0 {
		return nil
	}
	missing := make(map[string]bool, len(pending))
	for _, e := range pending {
		missing[e.MessageID] = true
	}
	err := audit.Tail(n.ctx, filepath.Join(n.cfg.DataDir, "audit"), 0, false, func(e audit.Entry) error {
		if e.Event == audit.EventReceived {
			delete(missing, e.MessageID)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("audit log not readable at start; not reconciling it", "err", err.Error())
		return nil
	}
	return missing
}

// OutboxEntries lists what waits for delivery (nil when durability is off).
func (n *Node) OutboxEntries() ([]store.OutboxEntry, error) {
	if n.store == nil {
		return nil, nil
	}
	return n.store.List()
}
