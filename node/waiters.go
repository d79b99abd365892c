package node

import (
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// The waiters: a sender waits for the receipt of its message, and for a request the reply;
// frames that answer are matched to them (matchReply).

// waiter is a sender waiting for the receipt, and for a request the reply, of one message.
type waiter struct {
	peer      peer.ID       // guarded by wire.waitersMu
	resend    bool          // the outbox is resending: DUPLICATE is a receipt; guarded by wire.waitersMu
	receipted chan struct{} // closed by the first receipt, reply or error
	rOnce     sync.Once
	done      chan struct{} // closed when reply is set
	dOnce     sync.Once
	reply     *protocol.Message
	// credit is how many more frames claiming to answer this message are not charged to the
	// peer's message rate (solicited); guarded by wire.waitersMu. A receipt, a reply and a
	// DUPLICATE after a resend are all a well-behaved peer sends: a peer claiming more, valid
	// or not, pays for them like any other frame.
	credit int
}

func (w *waiter) receipt() { w.rOnce.Do(func() { close(w.receipted) }) }

func (w *waiter) complete(m *protocol.Message) {
	w.dOnce.Do(func() { w.reply = m; close(w.done) })
	w.receipt()
}

// register records a waiter for m's receipt and reply.
func (n *wire) register(m *protocol.Message) (*waiter, error) {
	w := &waiter{receipted: make(chan struct{}), done: make(chan struct{}), credit: replyCredit}
	n.waitersMu.Lock()
	defer n.waitersMu.Unlock()
	if _, dup := n.waiters[m.Envelope.MessageID]; dup {
		return nil, protocol.Errorf(protocol.CodeDuplicate, "message %s is already being sent", m.Envelope.MessageID)
	}
	n.waiters[m.Envelope.MessageID] = w
	return w, nil
}

// waiterFor returns the waiter a caller (Request) already registered for m, or registers one
// for this attempt; release unregisters what this call registered, and hands the agent a
// response that came back on the way (nobody else waits for it).
func (n *wire) waiterFor(m *protocol.Message) (*waiter, func(), error) {
	n.waitersMu.Lock()
	w, ok := n.waiters[m.Envelope.MessageID]
	n.waitersMu.Unlock()
	if ok {
		return w, func() {}, nil
	}
	w, err := n.register(m)
	if err != nil {
		return nil, nil, err
	}
	return w, func() {
		n.unregister(m.Envelope.MessageID)
		n.lateReply(w)
	}, nil
}

// lateReply gives the agent a response to a request it sent without waiting (Send, or the
// API's 202 path) that came back inline with the receipt: like any late reply, it goes to a
// handler or the inbox.
func (n *wire) lateReply(w *waiter) {
	select {
	case <-w.done:
	default:
		return
	}
	if w.reply.Message.Type != protocol.TypeResponse || receiptOf(w.reply) != nil {
		return
	}
	raw, err := protocol.EncodeJSON(w.reply)
	if err != nil {
		return
	}
	start, cancel, err := n.route(&Request{Msg: w.reply, Peer: w.peer, n: n, size: len(raw)})
	if err == nil {
		dups, errs := n.durable.accept([]inbound{{m: w.reply, raw: raw, peer: w.peer}})
		if err = errs[0]; err != nil || dups[0] {
			cancel() // a duplicate was handed over before
		} else {
			start()
		}
	}
	if err != nil {
		n.log.Warn("reply could not be handed to the agent", "id", w.reply.Envelope.MessageID, "err", err.Error())
	}
}

func (n *wire) unregister(id string) {
	n.waitersMu.Lock()
	defer n.waitersMu.Unlock()
	delete(n.waiters, id)
}

// matchReply hands a receipt, response or error to whoever waits for it, and reports whether
// anyone did. Receipts are always taken.
func (n *wire) matchReply(m *protocol.Message, remote peer.ID) bool {
	if ids := receiptOf(m); ids != nil {
		n.waitersMu.Lock()
		for _, id := range ids {
			if w, ok := n.waiters[id]; ok && w.peer == remote {
				w.receipt()
			}
		}
		n.waitersMu.Unlock()
		return true
	}
	n.waitersMu.Lock()
	w, ok := n.waiters[m.Envelope.CorrelationID]
	ok = ok && w.peer == remote
	resend := ok && w.resend
	n.waitersMu.Unlock()
	if !ok {
		return n.mesh.asks.offer(m, remote, n.now()) // an answer to a broadcast query (ask.go)
	}
	if isDuplicate(m) && (resend || n.answered.served(m.Envelope.CorrelationID)) {
		// The outbox resent a message the recipient had already accepted (its receipt was
		// late or lost), or the answer book gave the recipient this answer already, to its
		// request sent again: that is a receipt, and a request's answer is still to come. On
		// a first send, DUPLICATE otherwise means the message_id was used before, and is the
		// answer.
		w.receipt()
		return true
	}
	w.complete(m)
	return true
}

// isDuplicate reports whether m is a DUPLICATE error.
func isDuplicate(m *protocol.Message) bool {
	return m.Message.Type == protocol.TypeError && protocol.CodeOf(replyError(m)) == protocol.CodeDuplicate
}

func replyError(m *protocol.Message) error {
	e, err := protocol.ErrorOf(m)
	if err != nil {
		return err
	}
	return e
}

func timeoutError(m *protocol.Message, cause error) error {
	return &protocol.Error{Code: protocol.CodeTimeout, Message: fmt.Sprintf("no reply from %s to %s within its deadline", m.Envelope.Recipient.AgentID, m.Envelope.MessageID), Err: cause}
}
