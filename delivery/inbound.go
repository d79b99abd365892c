package delivery

import (
	"errors"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Accept stores a batch of inbound messages (raws[i] is ms[i]'s document as received) in one
// transaction, before their receipts go back: exactly once across restarts. dups[i] reports a
// message accepted before (acknowledge it again, do not hand it over twice); errs[i] is
// ms[i]'s refusal: the store's own (an inbox share full is RATE_LIMITED), or INTERNAL_ERROR
// when the commit failed.
func (e *Engine) Accept(ms []*protocol.Message, raws [][]byte) (dups []bool, errs []error) {
	dups, errs = make([]bool, len(ms)), make([]error, len(ms))
	res, each, err := e.cfg.Store.AcceptAll(ms, raws)
	for i := range ms {
		switch {
		case err != nil:
			errs[i] = protocol.Errorf(protocol.CodeInternalError, "store inbound message: %w", err)
		case each[i] != nil:
			errs[i] = each[i]
		default:
			dups[i] = res[i].Duplicate
		}
	}
	return dups, errs
}

// Taken forgets an inbound message the agent has taken. The audit entry is written first: a
// crash between it and the store's commit offers the message again (and the audit shows a
// second ack), where the other order could leave a taken message with no audit record. An
// id the store does not hold (never stored: a local error, a reply a waiter took) is no
// error.
func (e *Engine) Taken(id string) error {
	if e.cfg.Audit != nil {
		e.cfg.Audit(audit.Entry{Event: audit.EventAcked, MessageID: id})
	}
	if err := e.cfg.Store.Ack(id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// TakenLazily is Taken for a message the agent took without waiting on the store: a Go
// handler that returned. The "acked" entry is written first, as by Taken, and is the record a
// restart goes by (Redeliver does not offer again a pending message the audit log says was
// acked); the store's removal is a lazy write (Store.AckLazily) on a goroutine of the engine,
// riding in the store's next commit, and the caller does not wait for it. Without an audit
// log there is no such record: it is Taken.
func (e *Engine) TakenLazily(id string) error {
	if e.cfg.Audit == nil {
		return e.Taken(id)
	}
	e.cfg.Audit(audit.Entry{Event: audit.EventAcked, MessageID: id})
	forget := func() {
		if err := e.cfg.Store.AckLazily(e.ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			e.cfg.Log.Error("inbox: ack", "id", id, "err", err.Error())
		}
	}
	if !e.spawn(forget) {
		forget()
	}
	return nil
}

// Pending reads what the agent had not taken before a restart. The node reads it before it
// serves the protocol: what is accepted from then on is handed over by its own acceptance,
// and must not be offered a second time by Redeliver.
func (e *Engine) Pending() []store.InboxEntry {
	pending, err := e.cfg.Store.Pending()
	if err != nil {
		e.cfg.Log.Error("inbox: pending", "err", err.Error())
	}
	return pending
}

// InboxRaw reads the document of a message the agent has not taken (store.Store.InboxRaw):
// the store keeps a large one in a file of its own, and the node keeps only its envelope in
// memory until the agent asks for it.
func (e *Engine) InboxRaw(id string) ([]byte, error) { return e.cfg.Store.InboxRaw(id) }

// Audited is what the audit log says about the messages pending at a restart (the node
// reads it, Redeliver goes by it).
type Audited struct {
	// Unaudited holds the ids with no "received" entry: a crash came between the store's
	// commit and the audit append.
	Unaudited map[string]bool
	// Acked holds the ids with an "acked" entry: the agent took them, and the store's
	// removal (a lazy write, TakenLazily) was lost in a crash.
	Acked map[string]bool
}

// Redeliver hands the agent again, through HandOver, what it had not taken before a restart.
// The ids a.Unaudited holds are recorded "received" now, saying so; those a.Acked holds were
// taken: they are removed from the store, not handed over.
func (e *Engine) Redeliver(pending []store.InboxEntry, a Audited) {
	offered := 0
	for _, en := range pending {
		if a.Acked[en.MessageID] {
			if err := e.cfg.Store.Ack(en.MessageID); err != nil && !errors.Is(err, store.ErrNotFound) {
				e.cfg.Log.Warn("forgetting a message the audit log says was taken failed", "id", en.MessageID, "err", err.Error())
			}
			continue
		}
		raw := en.Raw
		if raw == nil { // a large message the store left in its file: read one at a time
			var err error
			if raw, err = e.cfg.Store.InboxRaw(en.MessageID); err != nil {
				e.cfg.Log.Warn("reading a message to offer it again after a restart failed; it stays stored", "id", en.MessageID, "err", err.Error())
				continue
			}
		}
		m, err := protocol.DecodeJSON(raw)
		if err != nil {
			continue
		}
		if a.Unaudited[en.MessageID] && e.cfg.Audit != nil {
			ae := audit.FromMessage(audit.EventReceived, m)
			ae.Reason = "recorded at restart: a crash came between storing the message and its audit entry"
			e.cfg.Audit(ae)
		}
		offered++
		if e.cfg.HandOver == nil {
			continue
		}
		if err := e.cfg.HandOver(m, len(raw)); err != nil {
			e.cfg.Log.Warn("re-offering a message after restart failed; it stays stored", "id", en.MessageID, "err", err.Error())
		}
	}
	if offered > 0 {
		e.cfg.Log.Info("re-offered messages the agent had not taken before the restart", "count", offered)
	}
}
