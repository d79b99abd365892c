package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Approval (docs/coordination.md "Approval"): a message whose security member says
// require_approval is held in the store, unsent, until the node's operator approves or
// rejects it through the local API (Approve, Reject). Approved, it goes through the outbox
// like any Send, with its own id and signature; rejected, or expired while it waited, it is
// dropped, and the sending agent gets a PERMISSION_DENIED or TIMEOUT error correlated to it.

// Approval event kinds (ApprovalEvent.Kind).
const (
	// ApprovalHeld: a message started waiting for approval.
	ApprovalHeld = "held"
	// ApprovalApproved: a held message was approved and handed to the outbox.
	ApprovalApproved = "approved"
	// ApprovalRejected: a held message was rejected and dropped unsent.
	ApprovalRejected = "rejected"
	// ApprovalExpired: a held message's TTL passed while it waited; dropped unsent.
	ApprovalExpired = "expired"
)

// MaxApprovalBy and MaxApprovalReason bound who decided and why, as Approve and Reject take
// them (the audit log keeps both).
const (
	MaxApprovalBy     = 128
	MaxApprovalReason = 1024
)

// ErrNotHeld is matched (errors.Is) by the error of Approve and Reject for an id that is not
// held: decided or expired already, or never held.
var ErrNotHeld = errors.New("no such message waits for approval")

// maxApprovalEvents bounds the approval events kept for the event stream.
const maxApprovalEvents = 256

// approvalSweep is how often held messages are checked: expired ones dropped, approved ones
// not yet in the outbox (a restart, a full outbox) handed to it again.
const approvalSweep = time.Second

// WithApprovals bounds the messages held for approval: at most max messages and maxBytes
// of them (Config.ApprovalMax, ApprovalMaxBytes; defaults 256 and 64 MiB).
func WithApprovals(max int, maxBytes int64) Option {
	return func(c *Config) error { c.ApprovalMax, c.ApprovalMaxBytes = max, maxBytes; return nil }
}

// HeldMessage is one message waiting for approval, as Approvals lists it.
type HeldMessage struct {
	// MessageID, From, To, Type and Intent are the message's.
	MessageID string `json:"message_id"`
	From      string `json:"from"`
	To        string `json:"to"`
	Type      string `json:"type"`
	Intent    string `json:"intent"`
	// HeldAt is when it started waiting; ExpiresAt when it is dropped (TIMEOUT) if nobody
	// decided by then.
	HeldAt    time.Time `json:"held_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// ApprovedBy is set once approved: the message waits only for the outbox to take it.
	ApprovedBy string `json:"approved_by,omitempty"`
	// Payload is the message's payload.
	Payload json.RawMessage `json:"payload"`
}

// ApprovalEvent is one change to the held messages, for the event stream.
type ApprovalEvent struct {
	// Seq numbers the approval events of this node since it started, from 1.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// Kind is ApprovalHeld, ApprovalApproved, ApprovalRejected or ApprovalExpired.
	Kind      string `json:"kind"`
	MessageID string `json:"message_id"`
	From      string `json:"from"`
	To        string `json:"to"`
	Intent    string `json:"intent,omitempty"`
	// ExpiresAt is the message's expiry (held events).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// By and Reason are who decided and why (approved, rejected).
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// approvalBook is the node's side of approvals: the events kept for the stream and the ids
// being handed to the outbox. The held messages themselves are in the store.
type approvalBook struct {
	mu      sync.Mutex
	events  []ApprovalEvent // the last maxApprovalEvents, oldest first
	seq     uint64
	changed chan struct{} // closed and replaced at each event
	sending map[string]bool
}

func newApprovalBook() *approvalBook {
	return &approvalBook{changed: make(chan struct{}), sending: map[string]bool{}}
}

func (b *approvalBook) emit(e ApprovalEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e.Seq = b.seq
	if len(b.events) == maxApprovalEvents {
		b.events = append(b.events[:0], b.events[1:]...)
	}
	b.events = append(b.events, e)
	close(b.changed)
	b.changed = make(chan struct{})
}

// claim marks id as being handed to the outbox; false when it is already.
func (b *approvalBook) claim(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sending[id] {
		return false
	}
	b.sending[id] = true
	return true
}

func (b *approvalBook) unclaim(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sending, id)
}

// ApprovalEvents returns the approval events kept with a Seq above after (the last 256),
// the Seq of the last event, and a channel closed at the next one.
func (n *Node) ApprovalEvents(after uint64) ([]ApprovalEvent, uint64, <-chan struct{}) {
	b := n.approvals
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ApprovalEvent
	for _, e := range b.events {
		if e.Seq > after {
			out = append(out, e)
		}
	}
	return out, b.seq, b.changed
}

func (n *Node) approvalEvent(kind string, a *store.Approval, by, reason string) {
	e := ApprovalEvent{At: n.now().UTC(), Kind: kind, MessageID: a.MessageID, From: a.From, To: a.To, Intent: a.Intent, By: by, Reason: reason}
	if kind == ApprovalHeld {
		e.ExpiresAt = a.ExpiresAt.UTC()
	}
	n.approvals.emit(e)
}

// requiresApproval reports whether m asks to be held for approval; a malformed security
// member is its PAYLOAD_INVALID error.
func requiresApproval(m *protocol.Message) (bool, error) {
	sec, err := m.Security()
	return sec.RequireApproval, err
}

// hold stores the sealed m, whose security member requires approval, until a decision.
func (n *Node) hold(m *protocol.Message) error {
	if n.store == nil {
		return protocol.Errorf(protocol.CodeCapabilityMismatch,
			"message %s requires approval, and approvals are held in the store: switch durable delivery on (durable: true), or send it without security.require_approval", m.Envelope.MessageID)
	}
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return err
	}
	a := store.Approval{MessageID: m.Envelope.MessageID, From: m.Envelope.Sender.AgentID, To: m.Envelope.Recipient.AgentID,
		Type: string(m.Message.Type), Intent: string(m.Message.Intent), Raw: raw, ExpiresAt: m.Expires()}
	if err := n.store.Hold(a, store.ApprovalLimits{MaxCount: n.cfg.ApprovalMax, MaxBytes: n.cfg.ApprovalMaxBytes}); err != nil {
		return err
	}
	n.record(audit.EventHeld, m)
	n.approvalEvent(ApprovalHeld, &a, "", "")
	n.log.Info("message held for approval", "id", a.MessageID, "to", a.To, "intent", a.Intent)
	return nil
}

// Approvals lists the messages held for approval, oldest first: those waiting for a decision
// and those approved and not yet taken by the outbox. Empty without durable delivery.
func (n *Node) Approvals() ([]HeldMessage, error) {
	if n.store == nil {
		return nil, nil
	}
	held, err := n.store.Held()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(held, func(a, b store.Approval) int { return a.HeldAt.Compare(b.HeldAt) })
	out := make([]HeldMessage, 0, len(held))
	for _, a := range held {
		h := HeldMessage{MessageID: a.MessageID, From: a.From, To: a.To, Type: a.Type, Intent: a.Intent,
			HeldAt: a.HeldAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(), ApprovedBy: a.ApprovedBy}
		if m, err := protocol.DecodeJSON(a.Raw); err == nil {
			h.Payload = m.Message.Payload
		}
		out = append(out, h)
	}
	return out, nil
}

// Approve approves the held message id on behalf of by (who decides: 1 to 128 printable
// characters) and hands it to the outbox, which sends it as any Send does, with its own id.
// It returns the first attempt's outcome as Send does: nil once delivered or queued, or the
// recipient's refusal (which the sending agent is told of too). Approving a message approved
// before does nothing more. A message not held is ErrNotHeld (PAYLOAD_INVALID: it was decided
// or expired already, or never held); one whose TTL passed is TIMEOUT.
func (n *Node) Approve(ctx context.Context, id, by string) error {
	if err := n.approvalReady(by, ""); err != nil {
		return err
	}
	a, fresh, err := n.store.Approve(id, by)
	if err != nil {
		return n.decisionError(id, err)
	}
	if fresh {
		e := n.heldEntry(audit.EventApproved, &a)
		e.By = by
		n.appendAuditOn(e)
		n.approvalEvent(ApprovalApproved, &a, by, "")
		n.log.Info("held message approved", "id", id, "by", by)
	}
	return n.dispatch(ctx, a)
}

// Reject rejects the held message id on behalf of by, for reason (may be empty, at most 1
// KiB): it is dropped unsent, the audit log records who and why, and the sending agent gets
// a PERMISSION_DENIED error correlated to it (to Request, or in its inbox). A message approved
// already cannot be rejected (PERMISSION_DENIED).
func (n *Node) Reject(ctx context.Context, id, by, reason string) error {
	if err := n.approvalReady(by, reason); err != nil {
		return err
	}
	a, err := n.store.Discard(id)
	if errors.Is(err, store.ErrApproved) {
		return protocol.Errorf(protocol.CodePermissionDenied, "message %s was approved by %s already and is on its way; it cannot be rejected now", id, a.ApprovedBy)
	}
	if err != nil {
		return n.decisionError(id, err)
	}
	e := n.heldEntry(audit.EventRejected, &a)
	e.By, e.Code, e.Reason = by, protocol.CodePermissionDenied, reason
	n.appendAuditOn(e)
	n.approvalEvent(ApprovalRejected, &a, by, reason)
	n.log.Info("held message rejected", "id", id, "by", by, "reason", reason)
	why := ""
	if reason != "" {
		why = ": " + reason
	}
	n.tellHeldSender(&a, &protocol.Error{Code: protocol.CodePermissionDenied,
		Message: fmt.Sprintf("message %s was rejected by %s, who approves this node's messages%s", id, by, why)})
	return nil
}

// approvalReady checks what Approve and Reject need: a store, and a sound by and reason.
func (n *Node) approvalReady(by, reason string) error {
	switch {
	case n.store == nil:
		return protocol.Errorf(protocol.CodeCapabilityMismatch, "durable delivery is off on this node, so no message is held for approval")
	case by == "" || len(by) > MaxApprovalBy || strings.IndexFunc(by, unicode.IsControl) >= 0:
		return protocol.Errorf(protocol.CodePayloadInvalid, "by: say who decides, 1 to %d printable characters", MaxApprovalBy)
	case len(reason) > MaxApprovalReason || strings.IndexFunc(reason, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) >= 0:
		return protocol.Errorf(protocol.CodePayloadInvalid, "reason: at most %d bytes of text", MaxApprovalReason)
	}
	return nil
}

// decisionError turns the store's answer to a decision into the caller's error.
func (n *Node) decisionError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &protocol.Error{Code: protocol.CodePayloadInvalid, Err: ErrNotHeld,
			Message: fmt.Sprintf("no message %s waits for approval: it was decided or expired already, or never held (`iacp-node approvals` lists those that wait)", id)}
	}
	return err
}

// dispatch hands the approved a to the outbox, once at a time per id. It releases a from the
// approvals unless the outbox could not take it (full, or the store closing): then it stays
// approved and the sweep tries again.
func (n *Node) dispatch(ctx context.Context, a store.Approval) error {
	if !n.approvals.claim(a.MessageID) {
		return nil // being handed over already
	}
	defer n.approvals.unclaim(a.MessageID)
	m, err := protocol.DecodeJSON(a.Raw)
	if err != nil {
		n.log.Error("held message unreadable; dropped", "id", a.MessageID, "err", err.Error())
		_, _ = n.store.Release(a.MessageID)
		return err
	}
	_, err = n.engine.Send(ctx, m, a.Raw)
	var pe *protocol.Error
	switch {
	case err == nil, protocol.CodeOf(err) == protocol.CodeDuplicate:
		// Delivered or queued (a DUPLICATE: the outbox or the recipient has it already, after
		// a crash before the release).
	case errors.Is(err, store.ErrQueueFull), !errors.As(err, &pe):
		n.log.Warn("approved message not taken by the outbox yet; trying again", "id", a.MessageID, "err", err.Error())
		return err
	default:
		if pe.Code == protocol.CodeTimeout {
			e := n.heldEntry(audit.EventExpired, &a)
			e.Code, e.Reason = protocol.CodeTimeout, "expired before the outbox took it after approval"
			n.appendAuditOn(e)
		}
		n.tellHeldSender(&a, pe)
	}
	if _, rerr := n.store.Release(a.MessageID); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
		n.log.Warn("approved message not released from the approvals", "id", a.MessageID, "err", rerr.Error())
	}
	return err
}

// tellHeldSender gives the sending agent an error correlated to the held a, from the node
// itself: to whoever waits for its reply (Request), else handed over like any inbound message.
func (n *Node) tellHeldSender(a *store.Approval, cause *protocol.Error) {
	m, err := protocol.DecodeJSON(a.Raw)
	if err != nil {
		return
	}
	n.tellSender(m, cause)
}

// heldEntry is an audit entry about the held a.
func (n *Node) heldEntry(ev audit.Event, a *store.Approval) audit.Entry {
	if m, err := protocol.DecodeJSON(a.Raw); err == nil {
		return audit.FromMessage(ev, m)
	}
	return audit.Entry{Event: ev, MessageID: a.MessageID, From: a.From, To: a.To, Type: a.Type, Intent: a.Intent}
}

// appendAuditOn appends e when the audit log is on.
func (n *Node) appendAuditOn(e audit.Entry) {
	if n.audit != nil {
		n.appendAudit(e)
	}
}

// sweepApprovals runs until the node closes: every approvalSweep (and at once at start) it
// drops the held messages whose TTL passed (TIMEOUT to their sender) and hands the approved
// ones the outbox has not taken (after a restart, or a full outbox) to it again.
func (n *Node) sweepApprovals() {
	defer n.wg.Done()
	t := time.NewTicker(approvalSweep)
	defer t.Stop()
	for {
		n.sweepOnce()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) sweepOnce() {
	held, err := n.store.Held()
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("approvals not readable", "err", err.Error())
		}
		return
	}
	now := n.now()
	for _, a := range held {
		switch {
		case a.Approved():
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.FrameTimeout)
			_ = n.dispatch(ctx, a)
			cancel()
		case !a.ExpiresAt.After(now):
			n.expireHeld(a.MessageID)
		}
	}
}

// expireHeld drops the held message id, whose TTL passed while it waited, and tells its
// sender TIMEOUT.
func (n *Node) expireHeld(id string) {
	a, err := n.store.Discard(id)
	if err != nil {
		return // decided meanwhile
	}
	e := n.heldEntry(audit.EventExpired, &a)
	e.Code, e.Reason = protocol.CodeTimeout, "expired while it waited for approval"
	n.appendAuditOn(e)
	n.approvalEvent(ApprovalExpired, &a, "", "")
	n.log.Info("held message expired before anyone approved it", "id", id)
	n.tellHeldSender(&a, &protocol.Error{Code: protocol.CodeTimeout,
		Message: fmt.Sprintf("message %s expired at %s while it waited for approval; nobody approved it", id, a.ExpiresAt.UTC().Format(time.RFC3339))})
}
