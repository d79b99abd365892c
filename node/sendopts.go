package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
)

// Outcome is what became of a message Submit took.
type Outcome string

// The outcomes, as the local API names them (docs/api.md).
const (
	// OutcomeDelivered: the recipient's node acknowledged the message (a receipt or the
	// answer); it holds the message durably.
	OutcomeDelivered Outcome = "accepted"
	// OutcomeQueued: the recipient is known but could not be reached; the message waits in
	// the outbox, retried until a receipt or its TTL.
	OutcomeQueued Outcome = "queued"
	// OutcomeHeld: the message requires approval and is held, unsent, until the node's
	// operator decides.
	OutcomeHeld Outcome = "pending"
)

// SendOption changes how Send, Submit and Request treat one message.
type SendOption func(*sendOptions)

type sendOptions struct {
	queueUnknown bool
}

// QueueUnknown has a message to an agent nothing knows yet (no directory entry, trust pin or
// DHT record) queued for store-and-forward, for an agent that will join later, instead of
// refused at once with AGENT_NOT_FOUND.
func QueueUnknown() SendOption { return func(o *sendOptions) { o.queueUnknown = true } }

// errUnknown is wrapped by resolve's AGENT_NOT_FOUND when nothing knows the agent: no
// directory entry, no trust pin, and every resolver answered that it holds no record (or
// there is none), as opposed to a lookup that failed.
var errUnknown = errors.New("no directory entry, trust pin or agent record names it")

// unknownLookup bounds checkKnown's lookup of a recipient the node has not seen.
const unknownLookup = 5 * time.Second

// checkKnown refuses, with AGENT_NOT_FOUND and at once, a message to an agent that nothing
// knows, unless opts say QueueUnknown. A recipient the lookup could not settle (the DHT not
// reachable yet) is let through, to be queued as before.
func (n *Node) checkKnown(ctx context.Context, m *protocol.Message, opts []SendOption) error {
	var o sendOptions
	for _, f := range opts {
		f(&o)
	}
	to := m.Envelope.Recipient.AgentID
	if o.queueUnknown || to == n.cfg.AgentID || protocol.IsWildcard(to) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, unknownLookup)
	defer cancel()
	_, err := n.resolve(ctx, to)
	if err == nil || !errors.Is(err, errUnknown) {
		return nil
	}
	return &protocol.Error{Code: protocol.CodeAgentNotFound, Err: err, Message: fmt.Sprintf(
		"no agent %s is known to this node or the mesh's DHT; check the id, or queue the message for an agent that has not joined yet (queue_unknown)", to)}
}

// unknownAfter reports whether the resolvers' errors (one each) say that nothing knows the
// agent: no resolver at all, or each answered that it holds no record.
func unknownAfter(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, discovery.ErrNoRecord) {
			return false
		}
	}
	return true
}

// capTTL gives an unsigned request no longer a TTL than ctx's deadline leaves (at least a
// second): a request lives as long as its caller waits for it.
func (n *Node) capTTL(ctx context.Context, m *protocol.Message) {
	dl, ok := ctx.Deadline()
	if !ok || m.Envelope.Sender.IdentitySig != "" {
		return
	}
	left := int64(math.Ceil(dl.Sub(n.now()).Seconds()))
	ttl := m.Envelope.TTLSeconds
	if ttl == 0 {
		ttl = int64(n.cfg.DefaultTTL / time.Second)
	}
	if left < ttl {
		m.Envelope.TTLSeconds = max(left, 1)
	}
}

// dropUnanswered takes a request whose caller stopped waiting without its answer (w) out of
// the outbox: it is never sent again.
func (n *Node) dropUnanswered(m *protocol.Message, w *waiter) {
	if closed(w.done) {
		return
	}
	if _, err := n.engine.Cancel(m.Envelope.MessageID); err != nil {
		n.log.Warn("outbox: a request its caller gave up on could not be cancelled", "id", m.Envelope.MessageID, "err", err.Error())
	}
}

// CancelOutbox takes the message id out of the outbox (DELETE /v1/outbox/{id}): it is not
// sent again. It reports whether the outbox held it; without durable delivery there is no
// outbox, and it returns false. An attempt on the wire at that moment may still reach the
// recipient.
func (n *Node) CancelOutbox(id string) (bool, error) {
	if n.engine == nil {
		return false, nil
	}
	return n.engine.Cancel(id)
}
