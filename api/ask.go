package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

type (
	// AskRequest is the body of POST /v1/ask: a broadcast query (docs/coordination.md).
	AskRequest = apiclient.AskRequest
	// AskDoc answers POST /v1/ask: what the query collected.
	AskDoc = apiclient.AskDoc
	// AskAnswerDoc is one agent's answer.
	AskAnswerDoc = apiclient.AskAnswerDoc
	// AskErrorDoc is one agent's error answer.
	AskErrorDoc = apiclient.AskErrorDoc
)

// postAsk runs a broadcast query and answers with what it collected (200), once its deadline
// passed, its count was reached or every expected agent answered.
func (s *Server) postAsk(w http.ResponseWriter, r *http.Request) {
	if err := s.allow(); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if !s.n.GossipOn() {
		s.fail(w, r, &httpError{status: http.StatusServiceUnavailable, err: errorf(protocol.CodeCapabilityMismatch,
			"broadcast queries need gossip, which is off on this node: start it with gossip on")}, "")
		return
	}
	var req AskRequest
	if !s.readInto(w, r, &req) {
		return
	}
	o, err := s.askOptions(req)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	// The publication waits for a first member at most the deadline; the collection is
	// bounded by the deadline itself.
	ctx, cancel := context.WithTimeout(r.Context(), o.Deadline+s.cfg.sendTimeout)
	defer cancel()
	res, err := s.n.Ask(ctx, o)
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			err = errorf(protocol.CodeAgentNotFound, "ask: %v", err)
		}
		s.fail(w, r, err, "")
		return
	}
	s.metrics.sent.Inc()
	write(w, r, http.StatusOK, askDoc(res))
}

func (s *Server) askOptions(req AskRequest) (node.AskOptions, error) {
	o := node.AskOptions{Group: req.Group, Intent: protocol.Intent(req.Intent), Count: req.Count, Expect: req.Expect}
	if len(req.Payload) > 0 && string(req.Payload) != "null" {
		o.Payload = req.Payload
	}
	if req.Deadline != "" {
		d, err := time.ParseDuration(req.Deadline)
		if err != nil || d <= 0 {
			return o, errorf(protocol.CodePayloadInvalid, "deadline %q: use a positive duration such as \"2s\"", req.Deadline)
		}
		if d > s.cfg.maxWait {
			return o, errorf(protocol.CodePayloadInvalid, "deadline %s is longer than the server's maximum %s", d, s.cfg.maxWait)
		}
		o.Deadline = d
	}
	if o.Deadline == 0 {
		o.Deadline = node.DefaultAskDeadline
	}
	return o, nil
}

func askDoc(res *node.AskResult) AskDoc {
	d := AskDoc{QueryID: res.QueryID, Group: res.Group, Ended: res.Ended, Missing: res.Missing, Refused: res.Refused,
		Answers: make([]AskAnswerDoc, 0, len(res.Answers)), Errors: make([]AskErrorDoc, 0, len(res.Errors))}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, a := range res.Answers {
		d.Answers = append(d.Answers, AskAnswerDoc{AgentID: a.AgentID, PeerID: a.Peer, Status: a.Status, Payload: a.Payload, LatencyMS: ms(a.Latency)})
	}
	for _, e := range res.Errors {
		d.Errors = append(d.Errors, AskErrorDoc{AgentID: e.AgentID, PeerID: e.Peer, Code: string(e.Code), Message: e.Message, LatencyMS: ms(e.Latency)})
	}
	return d
}
