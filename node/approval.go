package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// approvals is the part that holds messages for approval: the held messages themselves are
// in the store; it keeps the events for the stream and the ids being handed to the outbox
// (mu), and runs the sweep, on a goroutine its owner starts and waits for (sweep ends with
// its context). Without durable delivery (no store) nothing is held: hold and the decisions
// say why.
type approvals struct {
	store  *store.Store // nil without durable delivery
	limits store.ApprovalLimits
	// send hands an approved message to the outbox (the delivery engine's Send); tell gives
	// the sending agent an error about its message; audit appends to the audit log (a no-op
	// when it is off).
	send  func(ctx context.Context, m *protocol.Message, raw []byte) error
	tell  func(m *protocol.Message, cause *protocol.Error)
	audit func(audit.Entry)
	// attempt bounds a dispatch by the sweep.
	attempt time.Duration
	log     *slog.Logger
	now     func() time.Time

	mu      sync.Mutex
	events  []ApprovalEvent // the last maxApprovalEvents, oldest first
	seq     uint64
	changed chan struct{} // closed and replaced at each event
	sending map[string]bool
}

func newApprovals() *approvals {
	return &approvals{changed: make(chan struct{}), sending: map[string]bool{}, log: slog.New(slog.DiscardHandler),
		now: time.Now, audit: func(audit.Entry) {}}
}

func (b *approvals) emit(e ApprovalEvent) {
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
func (b *approvals) claim(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sending[id] {
		return false
	}
	b.sending[id] = true
	return true
}

func (b *approvals) unclaim(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sending, id)
}

// eventsAfter returns the approval events kept with a Seq above after (the last 256), the
// Seq of the last event, and a channel closed at the next one.
func (b *approvals) eventsAfter(after uint64) ([]ApprovalEvent, uint64, <-chan struct{}) {
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

func (b *approvals) event(kind string, a *store.Approval, by, reason string) {
	e := ApprovalEvent{At: b.now().UTC(), Kind: kind, MessageID: a.MessageID, From: a.From, To: a.To, Intent: a.Intent, By: by, Reason: reason}
	if kind == ApprovalHeld {
		e.ExpiresAt = a.ExpiresAt.UTC()
	}
	b.emit(e)
}

// requiresApproval reports whether m asks to be held for approval; a malformed security
// member is its PAYLOAD_INVALID error.
func requiresApproval(m *protocol.Message) (bool, error) {
	sec, err := m.Security()
	return sec.RequireApproval, err
}

// hold stores the sealed m, whose security member requires approval, until a decision.
func (b *approvals) hold(m *protocol.Message) error {
	if b.store == nil {
		return protocol.Errorf(protocol.CodeCapabilityMismatch,
			"message %s requires approval, and approvals are held in the store: switch durable delivery on (durable: true), or send it without security.require_approval", m.Envelope.MessageID)
	}
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return err
	}
	a := store.Approval{MessageID: m.Envelope.MessageID, From: m.Envelope.Sender.AgentID, To: m.Envelope.Recipient.AgentID,
		Type: string(m.Message.Type), Intent: string(m.Message.Intent), Raw: raw, ExpiresAt: m.Expires()}
	if err := b.store.Hold(a, b.limits); err != nil {
		return err
	}
	b.audit(audit.FromMessage(audit.EventHeld, m))
	b.event(ApprovalHeld, &a, "", "")
	b.log.Info("message held for approval", "id", a.MessageID, "to", a.To, "intent", a.Intent)
	return nil
}

// list lists the messages held for approval, oldest first: those waiting for a decision and
// those approved and not yet taken by the outbox. Empty without durable delivery.
func (b *approvals) list() ([]HeldMessage, error) {
	if b.store == nil {
		return nil, nil
	}
	held, err := b.store.Held()
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

// approve approves the held message id on behalf of by and hands it to the outbox (Node.Approve).
func (b *approvals) approve(ctx context.Context, id, by string) error {
	if err := b.ready(by, ""); err != nil {
		return err
	}
	a, fresh, err := b.store.Approve(id, by)
	if err != nil {
		return b.decisionError(id, err)
	}
	if fresh {
		e := b.heldEntry(audit.EventApproved, &a)
		e.By = by
		b.audit(e)
		b.event(ApprovalApproved, &a, by, "")
		b.log.Info("held message approved", "id", id, "by", by)
	}
	return b.dispatch(ctx, a)
}

// reject drops the held message id unsent, on behalf of by, for reason (Node.Reject).
func (b *approvals) reject(id, by, reason string) error {
	if err := b.ready(by, reason); err != nil {
		return err
	}
	a, err := b.store.Discard(id)
	if errors.Is(err, store.ErrApproved) {
		return protocol.Errorf(protocol.CodePermissionDenied, "message %s was approved by %s already and is on its way; it cannot be rejected now", id, a.ApprovedBy)
	}
	if err != nil {
		return b.decisionError(id, err)
	}
	e := b.heldEntry(audit.EventRejected, &a)
	e.By, e.Code, e.Reason = by, protocol.CodePermissionDenied, reason
	b.audit(e)
	b.event(ApprovalRejected, &a, by, reason)
	b.log.Info("held message rejected", "id", id, "by", by, "reason", reason)
	why := ""
	if reason != "" {
		why = ": " + reason
	}
	b.tellHeldSender(&a, &protocol.Error{Code: protocol.CodePermissionDenied,
		Message: fmt.Sprintf("message %s was rejected by %s, who approves this node's messages%s", id, by, why)})
	return nil
}

// approvalReady checks what Approve and Reject need: a store, and a sound by and reason.
func (b *approvals) ready(by, reason string) error {
	switch {
	case b.store == nil:
		return protocol.Errorf(protocol.CodeCapabilityMismatch, "durable delivery is off on this node, so no message is held for approval")
	case by == "" || len(by) > MaxApprovalBy || strings.IndexFunc(by, unicode.IsControl) >= 0:
		return protocol.Errorf(protocol.CodePayloadInvalid, "by: say who decides, 1 to %d printable characters", MaxApprovalBy)
	case len(reason) > MaxApprovalReason || strings.IndexFunc(reason, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) >= 0:
		return protocol.Errorf(protocol.CodePayloadInvalid, "reason: at most %d bytes of text", MaxApprovalReason)
	}
	return nil
}

// decisionError turns the store's answer to a decision into the caller's error.
func (b *approvals) decisionError(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &protocol.Error{Code: protocol.CodePayloadInvalid, Err: ErrNotHeld,
			Message: fmt.Sprintf("no message %s waits for approval: it was decided or expired already, or never held (`iacp-node approvals` lists those that wait)", id)}
	}
	return err
}

// dispatch hands the approved a to the outbox, once at a time per id. It releases a from the
// approvals unless the outbox could not take it (full, or the store closing): then it stays
// approved and the sweep tries again.
func (b *approvals) dispatch(ctx context.Context, a store.Approval) error {
	if !b.claim(a.MessageID) {
		return nil // being handed over already
	}
	defer b.unclaim(a.MessageID)
	m, err := protocol.DecodeJSON(a.Raw)
	if err != nil {
		b.log.Error("held message unreadable; dropped", "id", a.MessageID, "err", err.Error())
		_, _ = b.store.Release(a.MessageID)
		return err
	}
	err = b.send(ctx, m, a.Raw)
	var pe *protocol.Error
	switch {
	case err == nil, protocol.CodeOf(err) == protocol.CodeDuplicate:
		// Delivered or queued (a DUPLICATE: the outbox or the recipient has it already, after
		// a crash before the release).
	case errors.Is(err, store.ErrQueueFull), !errors.As(err, &pe):
		b.log.Warn("approved message not taken by the outbox yet; trying again", "id", a.MessageID, "err", err.Error())
		return err
	default:
		if pe.Code == protocol.CodeTimeout {
			e := b.heldEntry(audit.EventExpired, &a)
			e.Code, e.Reason = protocol.CodeTimeout, "expired before the outbox took it after approval"
			b.audit(e)
		}
		b.tellHeldSender(&a, pe)
	}
	if _, rerr := b.store.Release(a.MessageID); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
		b.log.Warn("approved message not released from the approvals", "id", a.MessageID, "err", rerr.Error())
	}
	return err
}

// tellHeldSender gives the sending agent an error correlated to the held a, from the node
// itself: to whoever waits for its reply (Request), else handed over like any inbound message.
func (b *approvals) tellHeldSender(a *store.Approval, cause *protocol.Error) {
	m, err := protocol.DecodeJSON(a.Raw)
	if err != nil {
		return
	}
	b.tell(m, cause)
}

// heldEntry is an audit entry about the held a.
func (b *approvals) heldEntry(ev audit.Event, a *store.Approval) audit.Entry {
	if m, err := protocol.DecodeJSON(a.Raw); err == nil {
		return audit.FromMessage(ev, m)
	}
	return audit.Entry{Event: ev, MessageID: a.MessageID, From: a.From, To: a.To, Type: a.Type, Intent: a.Intent}
}

// sweep runs until ctx ends: every approvalSweep (and at once at start) it drops the held
// messages whose TTL passed (TIMEOUT to their sender) and hands the approved ones the outbox
// has not taken (after a restart, or a full outbox) to it again.
func (b *approvals) sweep(ctx context.Context) {
	t := time.NewTicker(approvalSweep)
	defer t.Stop()
	for {
		b.sweepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *approvals) sweepOnce(ctx context.Context) {
	held, err := b.store.Held()
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("approvals not readable", "err", err.Error())
		}
		return
	}
	now := b.now()
	for _, a := range held {
		switch {
		case a.Approved():
			dctx, cancel := context.WithTimeout(ctx, b.attempt)
			_ = b.dispatch(dctx, a)
			cancel()
		case !a.ExpiresAt.After(now):
			b.expireHeld(a.MessageID)
		}
	}
}

// expireHeld drops the held message id, whose TTL passed while it waited, and tells its
// sender TIMEOUT.
func (b *approvals) expireHeld(id string) {
	a, err := b.store.Discard(id)
	if err != nil {
		return // decided meanwhile
	}
	e := b.heldEntry(audit.EventExpired, &a)
	e.Code, e.Reason = protocol.CodeTimeout, "expired while it waited for approval"
	b.audit(e)
	b.event(ApprovalExpired, &a, "", "")
	b.log.Info("held message expired before anyone approved it", "id", id)
	b.tellHeldSender(&a, &protocol.Error{Code: protocol.CodeTimeout,
		Message: fmt.Sprintf("message %s expired at %s while it waited for approval; nobody approved it", id, a.ExpiresAt.UTC().Format(time.RFC3339))})
}
