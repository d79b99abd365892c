package node

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
)

// deliverLocal delivers m, a message of this node's agent to itself, without the network:
// a request to its own handlers, the answer to that request, an event it sends itself. m is
// signed like any message (Send sealed it) and takes the inbound path from the routing on:
// the document's rules (Validate), the node's policy and the replay window, then routing
// (handler or inbox, with room reserved), acceptance (stored before the receipt, audited
// "received") and hand-over. The receipt is w's, at once. An answer goes to the waiter of its
// request (matchReply), as one from another peer would. Peer checks do not apply: no peer
// sent it, and no certificate, pin or token is asked of the node's own agent.
func (n *Node) deliverLocal(m *protocol.Message, raw []byte, w *waiter) error {
	self := n.host.ID()
	n.waitersMu.Lock()
	w.peer = self
	resend := w.resend
	n.waitersMu.Unlock()
	now := n.now()
	if err := protocol.Validate(m, now, len(raw), n.limits); err != nil {
		return err
	}
	if err := n.policy.check(m.Envelope.Sender.AgentID, m.Message.Type, m.Message.Intent); err != nil {
		return err
	}
	if err := n.replay.Add(m.Envelope.MessageID, self.String(), m.Expires(), now); err != nil {
		if protocol.CodeOf(err) != protocol.CodeDuplicate || !resend {
			return err
		}
		// The outbox sent again what the agent already has (a crash before the outbox heard
		// of its delivery): a receipt, and a request's answer again when it was given.
		if a, ok := n.answered.lookup(m, now); ok {
			n.matchReply(a, self)
		}
		w.receipt()
		return nil
	}
	isReply := m.Message.Type == protocol.TypeResponse || m.Message.Type == protocol.TypeError
	if isReply && n.matchReply(m, self) {
		w.receipt()
		return nil
	}
	if err := n.acceptLocal(m, raw, self); err != nil {
		n.replay.Remove(m.Envelope.MessageID) // refused: a retry is not a replay
		return err
	}
	w.receipt()
	return nil
}

// acceptLocal routes, accepts and hands over m as an inbound message from the node itself.
func (n *Node) acceptLocal(m *protocol.Message, raw []byte, self peer.ID) error {
	start, cancel, err := n.route(&Request{Msg: m, Peer: self, n: n, size: len(raw)})
	if err != nil {
		return err
	}
	dups, errs := n.accept([]inbound{{m: m, raw: raw, peer: self}})
	switch {
	case errs[0] != nil:
		cancel()
		return errs[0]
	case dups[0]:
		cancel() // handed over before
	default:
		start()
	}
	return nil
}
