package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// maxInboxPage bounds the messages one GET /v1/inbox returns.
const maxInboxPage = 1000

// getInbox lists the messages waiting for the agent, oldest first, one page at a time:
// ?after=SEQ skips those up to SEQ, ?limit=N (default and maximum 1000) and ?max_bytes=B
// (default DefaultInboxPageBytes) bound the page, ?wait=D long-polls while nothing waits.
// A page holds at least one message, even one larger than B; "more" says that others wait
// beyond it, and "next_after" is the ?after= of the next page. Listing takes nothing: the
// agent acknowledges each message it takes.
func (s *Server) getInbox(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := parseUint(q.Get("after"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	limit, err := queryInt(q.Get("limit"), "limit", maxInboxPage, 1, maxInboxPage)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	budget, err := queryInt(q.Get("max_bytes"), "max_bytes", DefaultInboxPageBytes, 1, MaxInboxPageBytes)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	wait, waiting, err := parseWait(r, s.cfg.maxWait)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	d, err := s.agentDialect(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ib := s.n.Inbox()
	ds := ib.Page(after, limit+1) // one more than the page, to tell whether more wait
	if len(ds) == 0 && waiting {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		ds, _ = ib.Wait(ctx, after) // an empty list when the wait ends
		cancel()
	}
	raw, err := inboxPage(ds, after, limit, budget, func(m *protocol.Message) ([]byte, dialect.Dialect, error) {
		return s.render(m, d)
	})
	if err != nil {
		s.fail(w, r, errorf(protocol.CodeInternalError, "encode the inbox: %w", err), "")
		return
	}
	writeRaw(w, r, http.StatusOK, raw)
}

// inboxPage encodes the InboxDoc of the first messages of ds, each as render writes it: at
// most limit of them, and while their JSON stays within budget bytes, but at least one. The
// messages are counted as they are written, so the page is what the budget says.
func inboxPage(ds []node.Delivery, after uint64, limit, budget int, render renderFunc) ([]byte, error) {
	buf := append(make([]byte, 0, 256), `{"messages":[`...)
	used, n := 0, 0
	for _, d := range ds {
		if n == limit {
			break
		}
		item, err := inboxItemJSON(d, render)
		if errors.Is(err, node.ErrTaken) {
			continue // taken while the page was written
		}
		if err != nil {
			return nil, err
		}
		if n > 0 && used+len(item) > budget {
			break
		}
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, item...)
		used += len(item)
		after = d.Seq
		n++
	}
	buf = append(buf, `],"more":`...)
	buf = strconv.AppendBool(buf, n < len(ds))
	buf = append(buf, `,"next_after":`...)
	buf = strconv.AppendUint(buf, after, 10)
	return append(buf, '}'), nil
}

// renderFunc writes a message as the agent reads it, and says in which dialect.
type renderFunc func(*protocol.Message) ([]byte, dialect.Dialect, error)

// inboxItemJSON encodes an InboxItem with its message as render writes it, byte for byte
// (encoding/json would escape <, > and & again, and a message full of them would grow up to
// six times its size).
func inboxItemJSON(d node.Delivery, render renderFunc) ([]byte, error) {
	m, err := d.Message() // a large message is read from the store now, one at a time
	if err != nil {
		return nil, err
	}
	msg, in, err := render(m)
	if err != nil {
		return nil, err
	}
	item := struct {
		Seq       uint64    `json:"seq"`
		Received  time.Time `json:"received"`
		Peer      string    `json:"peer"`
		MessageID string    `json:"message_id"`
		Dialect   string    `json:"dialect,omitempty"`
	}{d.Seq, d.Received, d.Peer.String(), d.Msg.Envelope.MessageID, ""}
	if in != dialect.IACP {
		item.Dialect = string(in)
	}
	head, err := json.Marshal(item)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+len(msg)+16)
	out = append(out, head[:len(head)-1]...)
	out = append(out, `,"message":`...)
	out = append(out, msg...)
	return append(out, '}'), nil
}

// queryInt reads an integer query parameter from lo to hi; def when it is absent.
func queryInt(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errorf(protocol.CodePayloadInvalid, "%s=%q must be an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// ackInbox takes a message: it leaves the inbox for good.
func (s *Server) ackInbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("message_id")
	if err := s.n.Inbox().Ack(id); err != nil {
		s.fail(w, r, &httpError{status: http.StatusNotFound, err: errorf(protocol.CodePayloadInvalid, "%w", err)}, id)
		return
	}
	s.metrics.received.WithLabelValues("pull").Inc()
	write(w, r, http.StatusOK, AckResult{Acked: id})
}

// getConversation lists a conversation from the node's audit log (Node.Conversation):
// ?after=SEQ follows on from an earlier answer, ?limit=N (default 1000) bounds it.
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := parseUint(q.Get("after"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	limit, err := queryInt(q.Get("limit"), "limit", 1000, 1, node.MaxConversationEntries)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id := r.PathValue("id")
	entries, more, err := s.n.Conversation(r.Context(), id, after, limit)
	if errors.Is(err, node.ErrNoAuditLog) {
		err = &httpError{status: http.StatusConflict, err: errorf(protocol.CodeCapabilityMismatch, "%w", err)}
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	doc := ConversationDoc{Conversation: id, Messages: entries, More: more, NextAfter: after}
	if len(entries) > 0 {
		doc.NextAfter = entries[len(entries)-1].Seq
	}
	if doc.Messages == nil {
		doc.Messages = []node.ConversationEntry{}
	}
	write(w, r, http.StatusOK, doc)
}
