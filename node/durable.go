package node

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
)

// Durable delivery (docs/delivery.md): with a store, every outgoing direct message is stored
// before Send returns and retried until a receipt or its TTL, and every accepted inbound
// message is stored before its receipt goes back and kept until the agent takes it. The
// delivery engine (package delivery) does all of that; this file opens what it works on, gives
// it the node's side (an attempt on the wire, the audit log, the directory, the agent) and
// tells it when a recipient comes back.

// openDurable opens the store and the audit log as configured, restores the replay window
// from the store's seen ids, so that exactly-once holds across restarts, and builds the
// delivery engine over them.
func (n *Node) openDurable() error {
	c := &n.cfg
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
	if n.store == nil {
		return nil
	}
	return n.newEngine()
}

// newEngine builds the delivery engine over the open store and audit log.
func (n *Node) newEngine() error {
	cfg := delivery.Config{
		Store: n.store, Deliver: n.deliver, Expired: n.expired,
		HandOver: func(m *protocol.Message, size int) error {
			p, _ := protocol.PeerIDOf(m)
			return n.handOver(&Request{Msg: m, Peer: p, n: n, size: size})
		},
		PeerOf:   n.directory.Peek,
		Now:      n.now,
		RetryMin: n.cfg.RetryMin, RetryMax: n.cfg.RetryMax, AttemptTimeout: n.cfg.FrameTimeout, Jitter: retry.NewJitter(n.cfg.Seed, 3),
		Log: n.log,
	}
	if n.audit != nil {
		cfg.Audit = n.appendAudit
	}
	e, err := delivery.New(n.ctx, cfg)
	if err != nil {
		return err
	}
	n.engine = e
	n.inbox.onAck = n.taken
	n.inbox.read = e.InboxRaw
	return nil
}

// closeDurable stops the delivery engine, then closes the store and the audit log.
func (n *Node) closeDurable() error {
	if n.engine != nil {
		n.engine.Close()
	}
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

// record appends one audit entry about m (sent, delivered or received: the refusals and
// expiries of stored messages, which carry a cause, are the engine's to record); a failing
// audit log is reported, never fatal to delivery.
func (n *Node) record(ev audit.Event, m *protocol.Message) {
	if n.audit == nil {
		return
	}
	n.appendAudit(audit.FromMessage(ev, m))
}

// appendAudit appends e to the audit log, which is on; a failure is reported, never fatal to
// delivery.
func (n *Node) appendAudit(e audit.Entry) {
	if err := n.audit.Append(e); err != nil {
		n.log.Error("audit log append failed", "err", err.Error())
	}
}

// startDurable starts the engine's retry loop and the gossip journal, offers again what the
// agent had not taken before a restart (pending, read before the protocol was served: what
// was accepted since is handed over by its own acceptance), and has the engine retry a
// recipient's queue at once when a connection to its peer is made. The engine only queues the
// peer there: the swarm's notification must not wait for a store write.
func (n *Node) startDurable(pending []store.InboxEntry) {
	if n.engine == nil {
		return
	}
	n.host.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		n.engine.PeerReturned(c.RemotePeer())
	}})
	n.wg.Add(1)
	go n.journalLoop()
	n.engine.Start()
	n.engine.Redeliver(pending, n.audited(pending))
	n.wg.Add(1)
	go n.sweepApprovals() // messages held for approval (approval.go)
}

// follow subscribes to gossip items of kinds and has watchReturns take them; unavailable says
// what the node does without them.
func (n *Node) follow(kinds []pubsub.Kind, unavailable string) {
	sub, err := n.gossip.Subscribe(pubsub.Filter{Kinds: kinds}, 256)
	if err != nil {
		n.log.Warn(unavailable, "err", err.Error())
		return
	}
	n.wg.Add(1)
	go n.watchReturns(sub)
}

// watchReturns follows a subscription to gossip's liveness transitions, revocation lists or
// beats (with durable delivery).
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
			switch it.Kind {
			case pubsub.KindEvent:
				n.heardRevocations(it)
			case pubsub.KindHeartbeat:
				n.heardBeat(it)
			default:
				n.heardLiveness(it.Transition)
			}
		}
	}
}

// heardLiveness has the engine retry an agent's queue at once when gossip's liveness says it
// came back alive or busy. Gossip alone binds nothing: a heartbeat refreshes where an agent is
// only when its id is already bound to the peer that signed it (a direct message the node
// accepted pinned it, or the allowlist names it), and a heartbeat of a peer other than the
// bound one is recorded as a trust conflict and otherwise ignored.
func (n *Node) heardLiveness(tr pubsub.Transition) {
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
	if n.engine != nil {
		n.engine.AgentReturned(tr.AgentID)
	}
}

// heardBeat tells the engine of a beat (delivery.Engine.AgentHeard), when it comes from the
// peer the node would deliver the agent's messages to, or the node knows no peer of the agent
// (it left, and is resolved again): a recipient whose last attempt failed is then retried at
// once, even when its liveness row did not change (it restarted before anyone suspected it).
// The beat binds nothing: the retry resolves the agent as any attempt does. A beat of another
// peer than the one the directory names changes nothing.
func (n *Node) heardBeat(it *pubsub.Item) {
	if it.Message == nil {
		return
	}
	agent := it.Message.Envelope.Sender.AgentID
	if p, ok := n.directory.Peek(agent); !ok || p == it.Author {
		n.engine.AgentHeard(agent)
	}
}

// expired tells the sending agent that m's TTL passed in the outbox (delivery.Config.Expired):
// a TIMEOUT error correlated to m, from the node itself, to whoever waits for m's reply, else
// handed over like any inbound message.
func (n *Node) expired(m *protocol.Message, cause *protocol.Error) { n.tellSender(m, cause) }

// tellSender gives the sending agent an error about its m from the node itself (an expiry, a
// rejected approval): correlated to m, to whoever waits for m's reply, else handed over like
// any inbound message.
func (n *Node) tellSender(m *protocol.Message, cause *protocol.Error) {
	em, err := n.builder.Error(m, n.cfg.AgentID, cause)
	if err != nil {
		n.log.Error("build the error for the sender", "code", cause.Code, "err", err.Error())
		return
	}
	n.waitersMu.Lock()
	w, ok := n.waiters[m.Envelope.MessageID]
	n.waitersMu.Unlock()
	if ok {
		w.complete(em)
		return
	}
	if err := n.handOver(&Request{Msg: em, Peer: n.ID(), n: n}); err != nil {
		n.log.Warn("error for the agent could not be queued", "id", m.Envelope.MessageID, "code", cause.Code, "err", err.Error())
	}
}

// accept stores a batch of inbound messages before their receipts (when durable), binds each
// new one's sender to the peer that delivered it (bind) and audits it. dups[i] reports a
// message accepted before: acknowledge it again, do not hand it over twice.
func (n *Node) accept(batch []inbound) (dups []bool, errs []error) {
	if n.engine != nil {
		ms, raws := make([]*protocol.Message, len(batch)), make([][]byte, len(batch))
		for i := range batch {
			ms[i], raws[i] = batch[i].m, batch[i].raw
		}
		dups, errs = n.engine.Accept(ms, raws)
	} else {
		dups, errs = make([]bool, len(batch)), make([]error, len(batch))
	}
	for i, ib := range batch {
		if !dups[i] && errs[i] == nil {
			n.bind(ib.m.Envelope.Sender.AgentID, ib.peer)
			n.record(audit.EventReceived, ib.m)
		}
	}
	return dups, errs
}

// taken tells the engine that the agent took an inbound message (nothing without a store).
func (n *Node) taken(id string) error {
	if n.engine == nil {
		return nil
	}
	return n.engine.Taken(id)
}

// handled tells the engine that a handler took an inbound message: like taken, but the
// store's removal rides in its next commit (delivery.Engine.TakenLazily), since nobody waits
// for it; the audit log's "acked" entry is what a restart goes by.
func (n *Node) handled(id string) error {
	if n.engine == nil {
		return nil
	}
	return n.engine.TakenLazily(id)
}

// pendingAtStart reads what the agent had not taken before a restart (nil without a store).
func (n *Node) pendingAtStart() []store.InboxEntry {
	if n.engine == nil {
		return nil
	}
	return n.engine.Pending()
}

// audited reads what the audit log says about the pending messages (delivery.Audited): those
// it has no "received" entry for (the store and the audit log are two files, and a crash
// between the store's commit and the audit append leaves the message stored but
// unrecorded), and those it has an "acked" entry for (a handler took them, and the store's
// removal, a lazy write, was lost in a crash). It reads the whole log, only at start and only
// when messages are pending.
func (n *Node) audited(pending []store.InboxEntry) delivery.Audited {
	if n.audit == nil || len(pending) == 0 {
		return delivery.Audited{}
	}
	// Only the pending ids are kept: the log names every message the node ever took.
	isPending, missing, acked := make(map[string]bool, len(pending)), make(map[string]bool, len(pending)), map[string]bool{}
	for _, e := range pending {
		isPending[e.MessageID], missing[e.MessageID] = true, true
	}
	err := audit.Tail(n.ctx, filepath.Join(n.cfg.DataDir, "audit"), 0, false, func(e audit.Entry) error {
		switch {
		case !isPending[e.MessageID]:
		case e.Event == audit.EventReceived:
			delete(missing, e.MessageID)
		case e.Event == audit.EventAcked:
			acked[e.MessageID] = true
		}
		return nil
	})
	if err != nil {
		n.log.Warn("audit log not readable at start; not reconciling it", "err", err.Error())
		return delivery.Audited{}
	}
	return delivery.Audited{Unaudited: missing, Acked: acked}
}

// OutboxEntries lists what waits for delivery (nil when durability is off).
func (n *Node) OutboxEntries() ([]store.OutboxEntry, error) {
	if n.store == nil {
		return nil, nil
	}
	return n.store.List()
}
