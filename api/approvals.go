package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// Approvals (docs/coordination.md "Approval"): the operator of the node lists the messages
// its agent sent that require approval, and approves or rejects them. Whoever holds the API
// token may decide; by names them in the audit log.

// KindApproval is the event stream's kind for approval events: a message started waiting,
// or was approved, rejected or expired.
const KindApproval = "approval"

// DefaultApprovalBy is who decided when a decision does not say (by empty).
const DefaultApprovalBy = "operator"

// SummaryBytes bounds an ApprovalItem's payload summary.
const SummaryBytes = 200

// ApprovalItem is one held message, as GET /v1/approvals lists it: node.HeldMessage with a
// summary of the payload instead of the payload.
type ApprovalItem struct {
	node.HeldMessage
	// Payload shadows the held message's: left out of the list, Summary stands for it.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Summary is the payload as compact JSON, cut at SummaryBytes (ending in "…" when cut).
	// The whole payload is in the audit log's "held" entry (with audit_payloads on).
	Summary string `json:"summary"`
}

// ApprovalsDoc is GET /v1/approvals.
type ApprovalsDoc struct {
	// Held are the held messages, oldest first.
	Held []ApprovalItem `json:"held"`
	// Note says why nothing can be held (durable delivery off).
	Note string `json:"note,omitempty"`
}

// DecisionRequest is the body of POST /v1/approvals/{message_id}/approve and /reject; both
// members may be left out (by is then DefaultApprovalBy).
type DecisionRequest struct {
	// By is who decides, as the audit log records it: 1 to 128 printable characters.
	By string `json:"by,omitempty"`
	// Reason is why a message is rejected (at most 1 KiB); the sender's error carries it.
	Reason string `json:"reason,omitempty"`
}

// DecisionResult answers a decision.
type DecisionResult struct {
	MessageID string `json:"message_id"`
	// Decision is "approved" or "rejected"; By who decided.
	Decision string `json:"decision"`
	By       string `json:"by"`
}

// summarize renders payload as compact JSON cut at SummaryBytes on a rune boundary.
func summarize(payload json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, payload); err != nil {
		b.Reset()
		b.Write(payload)
	}
	s := b.String()
	if len(s) <= SummaryBytes {
		return s
	}
	cut := SummaryBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	doc := ApprovalsDoc{Held: []ApprovalItem{}}
	if !s.n.Config().Durable {
		doc.Note = "durable delivery is off on this node: a message that requires approval is refused, never held"
		write(w, r, http.StatusOK, doc)
		return
	}
	held, err := s.n.Approvals()
	if err != nil {
		s.fail(w, r, errorf(protocol.CodeInternalError, "list approvals: %w", err), "")
		return
	}
	for _, h := range held {
		sum := summarize(h.Payload)
		h.Payload = nil
		doc.Held = append(doc.Held, ApprovalItem{HeldMessage: h, Summary: sum})
	}
	write(w, r, http.StatusOK, doc)
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) }

func (s *Server) reject(w http.ResponseWriter, r *http.Request) { s.decide(w, r, false) }

// decide approves or rejects the held message named in the path. An approval answers once the
// outbox took the message (delivered, or queued), with the recipient's refusal if it refused.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	id := r.PathValue("message_id")
	var req DecisionRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.fail(w, r, errorf(protocol.CodePayloadInvalid, "decision body: %v (want {\"by\": string, \"reason\": string}, or none)", err), id)
		return
	}
	if req.By == "" {
		req.By = DefaultApprovalBy
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.sendTimeout)
	defer cancel()
	res := DecisionResult{MessageID: id, By: req.By, Decision: node.ApprovalApproved}
	if approve {
		err = s.n.Approve(ctx, id, req.By)
	} else {
		res.Decision = node.ApprovalRejected
		err = s.n.Reject(ctx, id, req.By, req.Reason)
	}
	if errors.Is(err, node.ErrNotHeld) {
		err = &httpError{status: http.StatusNotFound, err: err}
	}
	if err != nil {
		s.fail(w, r, err, id)
		return
	}
	write(w, r, http.StatusOK, res)
}

// emitApprovals writes the approval events f selects and returns the seq of the last one seen.
func emitApprovals(out *sseStream, f EventFilter, es []node.ApprovalEvent, after uint64) (uint64, bool) {
	for _, e := range es {
		after = e.Seq
		if f.AgentID != "" && e.From != f.AgentID && e.To != f.AgentID {
			continue
		}
		if !out.emit(EventItem{Kind: KindApproval, At: e.At, AgentID: e.From, Approval: &e}) {
			return after, false
		}
	}
	return after, true
}
