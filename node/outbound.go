package node

import (
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/protocol"
)

// replyCredit is a waiter's initial credit: a receipt, the reply, one resend's DUPLICATE, and
// one to spare.
const replyCredit = 4

// Send delivers m to its recipient and returns once the recipient's node has acknowledged it
// (a receipt, or for a request its reply), or with the recipient's refusal as an
// *protocol.Error. m may leave out what the node fills in (see protocol.Builder.Seal); an
// unsigned m is sealed and signed here. A message to the node's own agent is delivered
// locally (local.go), signed, audited and receipted like any other.
//
// A recipient that nothing knows (no directory entry, trust pin or DHT record: a mistyped id,
// most often) is refused at once with AGENT_NOT_FOUND, unless QueueUnknown is given.
//
// With durable delivery on, m is stored before anything else; when the recipient cannot be
// reached yet, Send returns nil once m is safely queued, and the node retries until a receipt
// or the TTL (then the agent gets a TIMEOUT error correlated to m). A full queue is refused
// with RATE_LIMITED. Submit says which of these happened.
//
// An m whose security member requires approval is held in the store instead, unsent, and Send
// returns nil once it is (docs/coordination.md "Approval"): Approve sends it, Reject drops it
// and the agent gets a PERMISSION_DENIED error correlated to it.
func (n *wire) send(ctx context.Context, m *protocol.Message, opts ...SendOption) error {
	_, err := n.submit(ctx, m, opts...)
	return err
}

// Submit is Send, and says what became of m: delivered, queued in the outbox, or held for
// approval.
func (n *wire) submit(ctx context.Context, m *protocol.Message, opts ...SendOption) (Outcome, error) {
	if err := n.seal(m); err != nil {
		return "", err
	}
	n.answered.answer(m, n.Now()) // an answer, kept for the request sent again (answered.go)
	if err := n.checkKnown(ctx, m, opts); err != nil {
		return "", err
	}
	if held, err := requiresApproval(m); err != nil || held {
		if err != nil {
			return "", err
		}
		return OutcomeHeld, n.approvals.hold(m)
	}
	if n.durable.on {
		raw, err := protocol.EncodeJSON(m)
		if err != nil {
			return "", err
		}
		queued, err := n.durable.send(ctx, m, raw)
		if queued {
			return OutcomeQueued, err
		}
		return OutcomeDelivered, err
	}
	w, release, err := n.waiterFor(m)
	if err != nil {
		return "", err
	}
	defer release()
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return "", err
	}
	n.durable.record(audit.EventSent, m)
	if err := n.transmit(ctx, m, raw, w); err != nil {
		return "", err
	}
	select {
	case <-w.done:
		if w.reply.Message.Type == protocol.TypeError && w.reply.Envelope.CorrelationID == m.Envelope.MessageID {
			return "", replyError(w.reply)
		}
	default:
	}
	n.durable.record(audit.EventDelivered, m)
	return OutcomeDelivered, nil
}

// Request sends a request and waits for the correlated response until ctx ends or the
// request's TTL passes, whichever is first; then it returns a TIMEOUT error. An `error`
// reply is returned as the message and as an *protocol.Error with its code. With durable
// delivery the request is queued like any Send and retried while Request waits; the
// request's life is its caller's: an unsigned m gets a TTL no longer than ctx's deadline,
// and a request still queued when Request returns without its answer is taken out of the
// outbox, so that it never reaches the agent after its caller gave up.
//
// A request that requires approval is held (see Send) while Request waits: approved, it is
// sent and Request returns its answer; rejected, Request returns a PERMISSION_DENIED error;
// nobody deciding within its TTL is TIMEOUT.
func (n *wire) requestReply(ctx context.Context, m *protocol.Message, opts ...SendOption) (*protocol.Message, error) {
	return n.request(ctx, m, n.durable.on, opts)
}

// RequestOnce is Request with one attempt and nothing kept: the request is transmitted once
// (durable delivery or not), never written to the outbox and never resent by the node. It is
// for a caller that retries or fails over by itself (package coord): with Request, an agent
// the caller gave up on would still be asked again by the outbox, behind its back. Once the
// recipient's node acknowledged the request it is durable there, as with Request.
func (n *wire) requestOnce(ctx context.Context, m *protocol.Message, opts ...SendOption) (*protocol.Message, error) {
	return n.request(ctx, m, false, opts)
}

func (n *wire) request(ctx context.Context, m *protocol.Message, durable bool, opts []SendOption) (*protocol.Message, error) {
	if m.Message.Type == "" {
		m.Message.Type = protocol.TypeRequest
	}
	if m.Message.Type != protocol.TypeRequest {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "Request sends requests, not %s; use Send", m.Message.Type)
	}
	n.capTTL(ctx, m)
	if err := n.seal(m); err != nil {
		return nil, err
	}
	if err := n.checkKnown(ctx, m, opts); err != nil {
		return nil, err
	}
	held, err := requiresApproval(m)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, m.Expires())
	defer cancel()
	w, err := n.register(m)
	if err != nil {
		return nil, err
	}
	defer n.unregister(m.Envelope.MessageID)
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return nil, err
	}
	switch {
	case held:
		err = n.approvals.hold(m)
	case durable:
		_, err = n.durable.send(ctx, m, raw)
		defer n.dropUnanswered(m, w)
	default:
		n.durable.record(audit.EventSent, m)
		err = n.transmit(ctx, m, raw, w)
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-w.done:
		n.durable.record(audit.EventReceived, w.reply) // the answer Request took: its conversation lists it
		if w.reply.Message.Type == protocol.TypeError {
			return w.reply, replyError(w.reply)
		}
		return w.reply, nil
	case <-ctx.Done():
		return nil, timeoutError(m, ctx.Err())
	}
}

func (n *wire) seal(m *protocol.Message) error {
	if m.Envelope.Sender.IdentitySig != "" && m.Envelope.Sender.AgentID == n.cfg.AgentID {
		return nil
	}
	m.Envelope.Sender.IdentitySig = ""
	return n.builder.Seal(m)
}

// deliver makes one delivery attempt of a stored message for the delivery engine
// (delivery.Config.Deliver) and returns its outcome: nil for a receipt (or, when resend is
// set, DUPLICATE: the recipient already has it), the recipient's refusal as a
// *delivery.Refusal, or the failure to reach it.
func (n *wire) deliver(ctx context.Context, m *protocol.Message, raw []byte, resend bool) error {
	w, release, err := n.waiterFor(m)
	if err != nil {
		return err
	}
	defer release()
	n.waitersMu.Lock()
	w.resend = resend
	n.waitersMu.Unlock()
	if err := n.transmit(ctx, m, raw, w); err != nil {
		return err
	}
	select {
	case <-w.done:
		if w.reply.Message.Type == protocol.TypeError && w.reply.Envelope.CorrelationID == m.Envelope.MessageID {
			return &delivery.Refusal{Err: replyError(w.reply)} // a resend's DUPLICATE is a receipt (matchReply)
		}
	default:
	}
	return nil
}

// recipient resolves agentID to the peer a message for it goes to. Nothing meant for an agent
// goes to a peer the authority did not certify for it: a peer whose certificate fails (revoked,
// expired, another peer holds the id) is forgotten and the agent looked up once more, since it
// may have moved; found nowhere else, the answer is AGENT_NOT_FOUND, which a durable send
// queues. A peer that could not be reached for its certificate is still where the agent is.
func (n *wire) recipient(ctx context.Context, agentID string) (peer.ID, error) {
	var refused error
	for range 2 {
		p, err := n.peers.resolve(ctx, agentID)
		if err != nil {
			if refused != nil {
				return "", protocol.Errorf(protocol.CodeAgentNotFound, "agent %s: its last known peer is no longer certified for it (%v), and no other peer is known for it: %v", agentID, refused, err)
			}
			return "", err
		}
		err = n.trust.Recipient(ctx, agentID, p)
		switch {
		case err == nil:
			return p, nil
		case protocol.CodeOf(err) != protocol.CodeIdentityInvalid:
			return "", err
		}
		n.peers.directory.Remove(agentID)
		refused = err
	}
	return "", refused
}

// transmit resolves m's recipient, writes raw on a session to its peer and waits for the
// receipt. A session that dies before the receipt is replaced once. A message to the node's
// own agent goes no further than the node (deliverLocal).
func (n *wire) transmit(ctx context.Context, m *protocol.Message, raw []byte, w *waiter) error {
	if m.Envelope.Recipient.AgentID == n.cfg.AgentID {
		return n.deliverLocal(m, raw, w)
	}
	to, since := m.Envelope.Recipient.AgentID, n.now()
	p, err := n.recipient(ctx, to)
	if err != nil {
		return err
	}
	s, p, err := n.reach(ctx, to, p, since)
	n.mesh.watch(to, p)
	n.waitersMu.Lock()
	w.peer = p
	n.waitersMu.Unlock()
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			s, err = n.session(ctx, p)
		}
		if err != nil {
			return &protocol.Error{Code: protocol.CodeAgentNotFound, Message: fmt.Sprintf("cannot reach agent %s at peer %s", to, p), Err: err}
		}
		if attempt > 0 {
			// The first copy may have arrived before its session broke: a DUPLICATE now is a
			// receipt (see matchReply).
			n.waitersMu.Lock()
			w.resend = true
			n.waitersMu.Unlock()
		}
		if err := s.write(raw); err != nil {
			lastErr = err
			continue
		}
		heard, err := awaitReceipt(ctx, w, s)
		if heard {
			return nil
		}
		if ctx.Err() != nil {
			n.dropStalled(s)
			return timeoutError(m, err)
		}
		lastErr = err
	}
	return &protocol.Error{Code: protocol.CodeAgentNotFound, Message: fmt.Sprintf("connection to agent %s failed before its receipt", to), Err: lastErr}
}

// reach opens a session to p, the peer agentID resolved to in a resolve begun at since. When p
// cannot be reached, a resolver that had cached that answer before since drops it
// (CachingResolver), and the agent is resolved once more, from the mesh: a node that reserved a
// relay or moved since its record was cached is reached where it is now. An answer looked up
// for this send is not looked up again. A dial that used up the send's time (an address that
// drops packets holds it until the deadline) still drops the cached answer, so the next
// attempt asks the mesh. It returns the session, the peer it is with, and the dial's error.
func (n *wire) reach(ctx context.Context, agentID string, p peer.ID, since time.Time) (*session, peer.ID, error) {
	s, err := n.session(ctx, p)
	if err == nil {
		return s, p, nil
	}
	if !n.peers.unreachable(agentID, p, since) || ctx.Err() != nil {
		return nil, p, err
	}
	q, rerr := n.recipient(ctx, agentID)
	if rerr != nil {
		return nil, p, err
	}
	s, err = n.session(ctx, q)
	return s, q, err
}

// awaitReceipt waits for w's receipt (or reply) on session s. It reports heard when one came,
// even if s ended as well: a peer that answers and then closes the stream, as a node does
// after refusing a peer over its rate (inbound.go), was heard, and its answer is what Send
// returns; sending again would only meet the peer's penalty. Otherwise it returns why it
// stopped waiting: the session's end or ctx's.
func awaitReceipt(ctx context.Context, w *waiter, s *session) (heard bool, err error) {
	select {
	case <-w.receipted:
		return true, nil
	case <-s.done:
		err = s.err
	case <-ctx.Done():
		err = ctx.Err()
	}
	if closed(w.receipted) {
		return true, nil
	}
	return false, err
}
