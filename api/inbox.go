package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// maxInboxPage bounds the messages one GET /v1/inbox returns.
const maxInboxPage = 1000

// getInbox lists the messages waiting for the agent, oldest first: ?after=SEQ skips those up
// to SEQ, ?limit=N (default and maximum 1000), ?wait=D long-polls while nothing waits.
// Listing takes nothing: the agent acknowledges each message it takes.
func (s *Server) getInbox(w http.ResponseWriter, r *http.Request) {
	after, err := parseUint(r.URL.Query().Get("after"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	limit := maxInboxPage
	if l := r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > maxInboxPage {
			s.fail(w, r, errorf(protocol.CodePayloadInvalid, "limit=%q must be 1 to %d", l, maxInboxPage), "")
			return
		}
	}
	wait, waiting, err := parseWait(r, s.cfg.maxWait)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ib := s.n.Inbox()
	ds := ib.List(after)
	if len(ds) == 0 && waiting {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		ds, _ = ib.Wait(ctx, after) // an empty list when the wait ends
		cancel()
	}
	if len(ds) > limit {
		ds = ds[:limit]
	}
	write(w, r, http.StatusOK, InboxDoc{Messages: inboxItems(ds)})
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

func inboxItems(ds []node.Delivery) []InboxItem {
	out := make([]InboxItem, 0, len(ds))
	for _, d := range ds {
		out = append(out, InboxItem{Seq: d.Seq, Received: d.Received, Peer: d.Peer.String(), Message: d.Msg})
	}
	return out
}
