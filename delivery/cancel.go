package delivery

import (
	"errors"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// Cancel takes the message id out of the outbox, so that it is never attempted again, and
// reports whether the outbox held it (false: it was delivered, refused, expired or cancelled
// already, or never queued). The sending agent is told nothing: it asked. An attempt already
// on the wire when Cancel is called may still reach the recipient; whatever its outcome, the
// message is not attempted again (settle drops it).
func (e *Engine) Cancel(id string) (bool, error) {
	first := e.claims.cancel(id)
	en, err := e.cfg.Store.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return first, nil // Send's first attempt, not written yet: settle drops it
	}
	if err != nil {
		return false, err
	}
	removed, err := e.cfg.Store.Delivered(id)
	if err != nil || !removed {
		return first, err
	}
	if m, derr := protocol.DecodeJSON(en.Raw); derr == nil {
		e.record(audit.EventCancelled, m, nil)
	}
	return true, nil
}

// drop removes a cancelled message whose attempt failed, instead of rescheduling it.
func (e *Engine) drop(m *protocol.Message, cause error) {
	if ok, _ := e.cfg.Store.Delivered(m.Envelope.MessageID); ok {
		e.record(audit.EventCancelled, m, cause)
	}
}
