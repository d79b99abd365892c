package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/delivery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/store"
)

// auditor is the audit log (docs/audit.md): auditLog, or noAudit when it is off. A failing
// audit log is reported, never fatal to delivery.
type auditor interface {
	// record appends one entry about m (sent, delivered or received: the refusals and
	// expiries of stored messages, which carry a cause, are the engine's to record).
	record(ev audit.Event, m *protocol.Message)
	// write appends e.
	write(e audit.Entry)
	// refused appends the refusal of a frame from remote within its budget (refusals.go).
	refused(raw []byte, remote peer.ID, m *protocol.Message, cause error)
	// tail reads the whole log, oldest first, until fn returns an error; without the audit
	// log it is ErrNoAuditLog.
	tail(ctx context.Context, fn func(audit.Entry) error) error
	// reconcile reads what the log says about the messages pending at start
	// (delivery.Audited).
	reconcile(ctx context.Context, pending []store.InboxEntry) delivery.Audited
	// broken is the break the log found at start (nil when its chain was intact); unwritten
	// counts the refusals its budgets left out.
	broken() *audit.ChainError
	unwritten() uint64
	// hook is write for the delivery engine, whose Config.Audit is nil without the log.
	hook() func(audit.Entry)
	closeAudit() error
}

// auditLog is the audit log on: the hash-chained files in the data directory, and the budget
// of refusal entries.
type auditLog struct {
	lg       *audit.Log
	dir      string
	refusals *refusalAudit
	log      *slog.Logger
	now      func() time.Time
}

// openAudit opens the audit log in the data directory as c says; a log damaged before is
// reported, and a new anchored segment goes on.
func openAudit(c *Config, log *slog.Logger) (*auditLog, error) {
	dir := filepath.Join(c.DataDir, "audit")
	lg, err := audit.Open(dir, audit.WithOmitPayloads(!c.AuditPayloads),
		audit.WithMaxTotalBytes(c.AuditMaxBytes), audit.WithMaxAge(c.AuditMaxAge),
		audit.WithClock(c.Clock), audit.WithLogger(log.With("subsystem", "audit")))
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if b := lg.Broken(); b != nil {
		log.Error("THE AUDIT LOG WAS DAMAGED: a new anchored segment was started and delivery goes on; "+
			"run `iacp-node audit verify` to see where, and keep the damaged files as evidence", "break", b.Error())
	}
	return &auditLog{lg: lg, dir: dir, refusals: newRefusalAudit(), log: log, now: c.Clock}, nil
}

func (a *auditLog) record(ev audit.Event, m *protocol.Message) { a.write(audit.FromMessage(ev, m)) }

func (a *auditLog) write(e audit.Entry) {
	if err := a.lg.Append(e); err != nil {
		a.log.Error("audit log append failed", "err", err.Error())
	}
}

func (a *auditLog) tail(ctx context.Context, fn func(audit.Entry) error) error {
	return audit.Tail(ctx, a.dir, 0, false, fn)
}

// reconcile finds, among the pending messages, those the log has no "received" entry for (the
// store and the audit log are two files, and a crash between the store's commit and the audit
// append leaves the message stored but unrecorded), and those it has an "acked" entry for (a
// handler took them, and the store's removal, a lazy write, was lost in a crash). It reads the
// whole log, only at start and only when messages are pending.
func (a *auditLog) reconcile(ctx context.Context, pending []store.InboxEntry) delivery.Audited {
	if len(pending) == 0 {
		return delivery.Audited{}
	}
	// Only the pending ids are kept: the log names every message the node ever took.
	isPending, missing, acked := make(map[string]bool, len(pending)), make(map[string]bool, len(pending)), map[string]bool{}
	for _, e := range pending {
		isPending[e.MessageID], missing[e.MessageID] = true, true
	}
	err := a.tail(ctx, func(e audit.Entry) error {
		switch {
		case !isPending[e.MessageID]:
		case e.Event == audit.EventReceived:
			delete(missing, e.MessageID)
		case e.Event == audit.EventAcked:
			acked[e.MessageID] = true
		}
		return nil
	})
	if err != nil {
		a.log.Warn("audit log not readable at start; not reconciling it", "err", err.Error())
		return delivery.Audited{}
	}
	return delivery.Audited{Unaudited: missing, Acked: acked}
}

func (a *auditLog) broken() *audit.ChainError { return a.lg.Broken() }
func (a *auditLog) unwritten() uint64         { return a.refusals.unwritten() }
func (a *auditLog) hook() func(audit.Entry)   { return a.write }
func (a *auditLog) closeAudit() error         { return a.lg.Close() }

// noAudit is the audit log off: nothing is written, and conversations cannot be read.
type noAudit struct{}

func (noAudit) record(audit.Event, *protocol.Message)               {}
func (noAudit) write(audit.Entry)                                   {}
func (noAudit) refused([]byte, peer.ID, *protocol.Message, error)   {}
func (noAudit) tail(context.Context, func(audit.Entry) error) error { return ErrNoAuditLog }
func (noAudit) broken() *audit.ChainError                           { return nil }
func (noAudit) unwritten() uint64                                   { return 0 }
func (noAudit) hook() func(audit.Entry)                             { return nil }
func (noAudit) closeAudit() error                                   { return nil }
func (noAudit) reconcile(context.Context, []store.InboxEntry) delivery.Audited {
	return delivery.Audited{}
}
