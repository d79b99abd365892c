package node

import (
	"context"
	"errors"
	"log/slog"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Durable delivery (docs/delivery.md): with a store, every outgoing direct message is stored
// before Send returns and retried until a receipt or its TTL, and every accepted inbound
// message is stored before its receipt goes back and kept until the agent takes it. The
// delivery engine (package delivery) does all of that; the durable part opens what it works
// on, gives it the node's side (an attempt on the wire, the audit log, the directory, the
// agent) and is told when a recipient comes back.

// durable is the part that keeps what outlives an exchange: the store, the delivery engine
// over it and the gossip journal (its keeper: kept, or keepNothing when durable delivery is
// off, keeper.go), and the audit log with its refusal budget (its auditor: auditLog, or
// noAudit when the audit log is off, auditor.go). Nobody asks whether either is on, but Send:
// on says which of its two paths a message takes. What it needs of the rest of the node it is
// given as funcs (durableSide). Its goroutine (run: the journal's writes and the purge of the
// expired seen ids) is started by the node and ends with the node's context; close stops the
// engine and closes the store and the audit log.
type durable struct {
	keeper
	auditor
	// on is durable delivery: Send and Request store a message in the outbox before anything
	// else, and the engine retries it. It is the one place that says so.
	on   bool
	side durableSide
}

// durableSide is what the durable part needs of the rest of the node.
type durableSide struct {
	self    peer.ID // the node's peer, from which its own errors come
	agentID string
	builder *protocol.Builder
	log     *slog.Logger
	replay  *protocol.ReplayWindow // restored from the store's seen ids
	// deliver is one attempt on the wire (delivery.Config.Deliver); handOver gives the agent a
	// message from p, of size bytes on the wire (0 when it never travelled); answer gives
	// reply to whoever waits for the answer to id, and reports whether anyone did; bind binds
	// an accepted message's sender to the peer that delivered it; peerOf is the directory's
	// peer of an agent.
	deliver  func(ctx context.Context, m *protocol.Message, raw []byte, resend bool) error
	handOver func(m *protocol.Message, p peer.ID, size int) error
	answer   func(id string, reply *protocol.Message) bool
	bind     func(agentID string, p peer.ID)
	peerOf   func(agentID string) (peer.ID, bool)
}

// newDurable opens the store and the audit log as c says, restores the replay window from the
// store's seen ids, so that exactly-once holds across restarts, and builds the delivery engine
// over them (ctx bounds it). A newDurable that fails closes what it opened.
func newDurable(ctx context.Context, c *Config, side durableSide) (*durable, error) {
	d := &durable{keeper: keepNothing{}, auditor: noAudit{}, side: side}
	var st *store.Store
	if c.Durable {
		var err error
		if st, err = openStore(c, side); err != nil {
			return nil, err
		}
	}
	if c.Audit {
		lg, err := openAudit(c, side.log)
		if err != nil {
			if st != nil {
				st.Close()
			}
			return nil, err
		}
		d.auditor = lg
	}
	if st == nil {
		return d, nil
	}
	k, err := newKept(ctx, st, c, d)
	if err != nil {
		return nil, errors.Join(err, st.Close(), d.closeAudit())
	}
	d.keeper, d.on = k, true
	return d, nil
}

// start starts the engine's retry loop and offers again what the agent had not taken before a
// restart (pending), as the audit log reconciles it (auditor.reconcile).
func (d *durable) start(ctx context.Context, pending []store.InboxEntry) {
	d.begin(pending, d.reconcile(ctx, pending))
}

// close stops the delivery engine, then closes the store and the audit log.
func (d *durable) close() error { return errors.Join(d.closeKeeper(), d.closeAudit()) }

// accept stores a batch of inbound messages before their receipts (when durable), binds each
// new one's sender to the peer that delivered it and audits it. dups[i] reports a message
// accepted before: acknowledge it again, do not hand it over twice.
func (d *durable) accept(batch []inbound) (dups []bool, errs []error) {
	dups, errs = d.acceptAll(batch)
	for i, ib := range batch {
		if !dups[i] && errs[i] == nil {
			d.side.bind(ib.m.Envelope.Sender.AgentID, ib.peer)
			d.record(audit.EventReceived, ib.m)
		}
	}
	return dups, errs
}

// tell gives the sending agent an error about its m from the node itself (an expiry in the
// outbox, a rejected approval): correlated to m, to whoever waits for m's reply, else handed
// over like any inbound message.
func (d *durable) tell(m *protocol.Message, cause *protocol.Error) {
	em, err := d.side.builder.Error(m, d.side.agentID, cause)
	if err != nil {
		d.side.log.Error("build the error for the sender", "code", cause.Code, "err", err.Error())
		return
	}
	if d.side.answer(m.Envelope.MessageID, em) {
		return
	}
	if err := d.side.handOver(em, d.side.self, 0); err != nil {
		d.side.log.Warn("error for the agent could not be queued", "id", m.Envelope.MessageID, "code", cause.Code, "err", err.Error())
	}
}

// openDurable builds the durable part over the node's settings and gives it the node's side;
// what the store keeps for the other parts (the messages held for approval, the inbox's large
// messages) is wired to them here.
func (n *Node) openDurable() error {
	d, err := newDurable(n.ctx, &n.cfg, durableSide{
		self: n.ID(), agentID: n.cfg.AgentID, builder: n.builder, log: n.log, replay: n.wire.replay,
		deliver: n.wire.deliver, bind: n.peers.bind, peerOf: n.peers.directory.Peek,
		handOver: func(m *protocol.Message, p peer.ID, size int) error {
			return n.wire.handOver(&Request{Msg: m, Peer: p, n: n.wire, size: size})
		},
		answer: func(id string, reply *protocol.Message) bool {
			n.wire.waitersMu.Lock()
			w, ok := n.wire.waiters[id]
			n.wire.waitersMu.Unlock()
			if ok {
				w.complete(reply)
			}
			return ok
		},
	})
	if err != nil {
		return err
	}
	n.durable = d
	a := n.approvals
	a.log, a.now, a.tell, a.audit, a.attempt = n.log, n.now, d.tell, d.write, n.cfg.FrameTimeout
	if k, ok := d.keeper.(*kept); ok {
		a.store, a.limits, a.send = k.store, store.ApprovalLimits{MaxCount: n.cfg.ApprovalMax, MaxBytes: n.cfg.ApprovalMaxBytes}, k.sendOnly
		n.inbox.onAck, n.inbox.read = k.taken, k.engine.InboxRaw
	}
	return nil
}

// startDurable starts durable delivery once the mesh is up: the journal's writes and the purge
// (run), the engine's retry loop, what the agent had not taken before a restart (pending, read
// before the protocol was served: what was accepted since is handed over by its own
// acceptance), and the approvals' sweep; a connection to a recipient's peer has the engine
// retry its queue at once (only queued there: the swarm's notification must not wait for a
// store write).
func (n *Node) startDurable(pending []store.InboxEntry) {
	if !n.durable.on {
		return
	}
	n.host.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		n.durable.peerReturned(c.RemotePeer())
	}})
	n.wg.Go(func() { n.durable.run(n.ctx) })
	n.durable.start(n.ctx, pending)
	n.wg.Go(func() { n.approvals.sweep(n.ctx) }) // messages held for approval (approval.go)
}

// OutboxEntries lists what waits for delivery (nil when durability is off).
func (n *Node) OutboxEntries() ([]store.OutboxEntry, error) { return n.durable.outbox() }
