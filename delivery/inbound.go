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

// Redeliver hands the agent again, through HandOver, what it had not taken before a restart.
// unaudited holds the ids the audit log has no "received" entry for (a crash came between
// the store's commit and the audit append): they are recorded now, saying so.
func (e *Engine) Redeliver(pending []store.InboxEntry, unaudited map[string]bool) {
	for _, en := range pending {
		m, err := protocol.DecodeJSON(en.Raw)
		if err != nil {
			continue
		}
		if unaudited[en.MessageID] && e.cfg.Audit != nil {
			ae := audit.FromMessage(audit.EventReceived, m)
			ae.Reason = "recorded at restart: a crash came between storing the message and its audit entry"
			e.cfg.Audit(ae)
		}
		if e.cfg.HandOver == nil {
			continue
		}
		if err := e.cfg.HandOver(m, len(en.Raw)); err != nil {
			e.cfg.Log.Warn("re-offering a message after restart failed; it stays stored", "id", en.MessageID, "err", err.Error())
		}
	}
	if len(pending) > 0 {
		e.cfg.Log.Info("re-offered messages the agent had not taken before the restart", "count", len(pending))
	}
}
