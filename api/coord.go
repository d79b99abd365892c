package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/protocol"
)

// Coordination patterns (docs/coordination.md): POST /v1/coord/{any,fallback,scatter,pipeline}.
// Each answers when its pattern is decided, within ?wait (default and bound: the server's
// maximum wait, 5 minutes).

// RetryDoc is a per-call retry policy in a coordination request; durations are Go durations
// ("200ms", "5s").
type RetryDoc struct {
	Attempts int             `json:"attempts,omitempty"`
	Min      string          `json:"min,omitempty"`
	Max      string          `json:"max,omitempty"`
	NoJitter bool            `json:"no_jitter,omitempty"`
	Codes    []protocol.Code `json:"codes,omitempty"`
}

// CoordRequest is the body of POST /v1/coord/any, /fallback and /scatter: who is asked
// (agents, or every agent with a capability; any takes a capability only), the request
// (intent, payload, channel, correlation_id), each attempt's timeout (a Go duration, default
// 10s) and retry policy; scatter adds its completion rule, k and deadline.
type CoordRequest struct {
	Agents        []string          `json:"agents,omitempty"`
	Capability    *coord.Capability `json:"capability,omitempty"`
	Intent        protocol.Intent   `json:"intent"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	Channel       string            `json:"channel,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	Timeout       string            `json:"timeout,omitempty"`
	Retry         *RetryDoc         `json:"retry,omitempty"`
	// Completion is all (default), first-k or quorum; K its count; Deadline bounds the
	// whole scatter (default 30s).
	Completion string `json:"completion,omitempty"`
	K          int    `json:"k,omitempty"`
	Deadline   string `json:"deadline,omitempty"`
}

// PipelineRequest is the body of POST /v1/coord/pipeline: the steps in order, the first
// step's input, the chain's correlation id (default: a new one), each attempt's timeout and
// retry policy.
type PipelineRequest struct {
	CorrelationID string          `json:"correlation_id,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Steps         []coord.Step    `json:"steps"`
	Timeout       string          `json:"timeout,omitempty"`
	Retry         *RetryDoc       `json:"retry,omitempty"`
}

// AnswerDoc is one agent's answer.
type AnswerDoc struct {
	AgentID  string            `json:"agent_id"`
	Attempts int               `json:"attempts"`
	Response *protocol.Message `json:"response"`
}

// ResultDoc answers any and fallback: the agent that answered, its response, and the
// candidates asked before it and left out.
type ResultDoc struct {
	AnswerDoc
	Tried   []coord.Tried `json:"tried"`
	Skipped []string      `json:"skipped,omitempty"`
}

// GatherDoc answers scatter: met says the completion rule was met; otherwise error says why.
type GatherDoc struct {
	Met       bool                              `json:"met"`
	Answers   []AnswerDoc                       `json:"answers"`
	Agreed    json.RawMessage                   `json:"agreed,omitempty"`
	Errors    map[protocol.Code][]coord.Failure `json:"errors"`
	TimedOut  []string                          `json:"timed_out"`
	Cancelled []string                          `json:"cancelled"`
	Error     *protocol.ErrorPayload            `json:"error,omitempty"`
}

// StepDoc is one pipeline step's outcome.
type StepDoc struct {
	Name string `json:"name"`
	ResultDoc
	Error *protocol.ErrorPayload `json:"error,omitempty"`
}

// PipelineDoc answers pipeline: the steps that ran and the last step's payload (output); a
// failed step carries its error, repeated as error.
type PipelineDoc struct {
	CorrelationID string                 `json:"correlation_id"`
	Steps         []StepDoc              `json:"steps"`
	Output        json.RawMessage        `json:"output,omitempty"`
	Error         *protocol.ErrorPayload `json:"error,omitempty"`
}

func duration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errorf(protocol.CodePayloadInvalid, "%s %q is not a duration: use e.g. \"10s\"", name, s)
	}
	return d, nil
}

func callOptions(timeout string, rd *RetryDoc) (coord.CallOptions, error) {
	var o coord.CallOptions
	var err error
	if o.Timeout, err = duration("timeout", timeout); err != nil {
		return o, err
	}
	if rd != nil {
		o.Retry = coord.RetryPolicy{Attempts: rd.Attempts, NoJitter: rd.NoJitter, Codes: rd.Codes}
		if o.Retry.Min, err = duration("retry.min", rd.Min); err != nil {
			return o, err
		}
		if o.Retry.Max, err = duration("retry.max", rd.Max); err != nil {
			return o, err
		}
	}
	return o, o.Retry.Validate()
}

// coordStart reads a coordination request's body into v and returns the context bounded by
// ?wait; on an error it has answered it and ok is false.
func (s *Server) coordStart(w http.ResponseWriter, r *http.Request, v any) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	if err := s.allow(); err != nil {
		s.fail(w, r, err, "")
		return nil, nil, false
	}
	wait, waiting, err := parseWait(r, s.cfg.maxWait)
	if err != nil {
		s.fail(w, r, err, "")
		return nil, nil, false
	}
	if !waiting {
		wait = s.cfg.maxWait
	}
	if !s.readInto(w, r, v) {
		return nil, nil, false
	}
	ctx, cancel = context.WithTimeout(r.Context(), wait)
	return ctx, cancel, true
}

func (q CoordRequest) ask() coord.Ask {
	return coord.Ask{Intent: q.Intent, Payload: q.Payload, Channel: q.Channel, CorrelationID: q.CorrelationID}
}

func (s *Server) coordAny(w http.ResponseWriter, r *http.Request) {
	s.coordFailover(w, r, true)
}

func (s *Server) coordFallback(w http.ResponseWriter, r *http.Request) {
	s.coordFailover(w, r, false)
}

func (s *Server) coordFailover(w http.ResponseWriter, r *http.Request, anyOf bool) {
	var q CoordRequest
	ctx, cancel, ok := s.coordStart(w, r, &q)
	if !ok {
		return
	}
	defer cancel()
	opts, err := callOptions(q.Timeout, q.Retry)
	if err == nil && (q.Completion != "" || q.K != 0 || q.Deadline != "") {
		err = errorf(protocol.CodePayloadInvalid, "completion, k and deadline are for /v1/coord/scatter")
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	var res coord.Result
	if anyOf {
		if q.Capability == nil || len(q.Agents) > 0 {
			s.fail(w, r, errorf(protocol.CodePayloadInvalid, "any asks an agent with a capability: give capability {kind, name} and no agents (use fallback for a list)"), "")
			return
		}
		res, err = s.coord.AnyOf(ctx, *q.Capability, q.ask(), opts)
	} else {
		res, err = s.coord.Fallback(ctx, coord.Targets{Agents: q.Agents, Capability: q.Capability}, q.ask(), opts)
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	write(w, r, http.StatusOK, resultDoc(res))
}

func resultDoc(res coord.Result) ResultDoc {
	tried := res.Tried
	if tried == nil {
		tried = []coord.Tried{}
	}
	return ResultDoc{AnswerDoc: AnswerDoc{AgentID: res.AgentID, Attempts: res.Attempts, Response: res.Response}, Tried: tried, Skipped: res.Skipped}
}

func (s *Server) coordScatter(w http.ResponseWriter, r *http.Request) {
	var q CoordRequest
	ctx, cancel, ok := s.coordStart(w, r, &q)
	if !ok {
		return
	}
	defer cancel()
	call, err := callOptions(q.Timeout, q.Retry)
	opts := coord.ScatterOptions{CallOptions: call, Completion: coord.Completion(q.Completion), K: q.K}
	if err == nil {
		opts.Deadline, err = duration("deadline", q.Deadline)
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	g, err := s.coord.Scatter(ctx, coord.Targets{Agents: q.Agents, Capability: q.Capability}, q.ask(), opts)
	if g == nil {
		s.fail(w, r, err, "")
		return
	}
	doc := GatherDoc{Met: g.Met, Answers: []AnswerDoc{}, Agreed: g.Agreed, Errors: g.Errors, TimedOut: orEmpty(g.TimedOut), Cancelled: orEmpty(g.Cancelled)}
	for _, a := range g.Answers {
		doc.Answers = append(doc.Answers, AnswerDoc{AgentID: a.AgentID, Attempts: a.Attempts, Response: a.Response})
	}
	doc.Error = errorPayload(err)
	write(w, r, http.StatusOK, doc)
}

func (s *Server) coordPipeline(w http.ResponseWriter, r *http.Request) {
	var q PipelineRequest
	ctx, cancel, ok := s.coordStart(w, r, &q)
	if !ok {
		return
	}
	defer cancel()
	opts, err := callOptions(q.Timeout, q.Retry)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	res, err := s.coord.Pipeline(ctx, q.CorrelationID, q.Input, q.Steps, opts)
	if res == nil {
		s.fail(w, r, err, "")
		return
	}
	doc := PipelineDoc{CorrelationID: res.CorrelationID, Steps: []StepDoc{}, Output: res.Output, Error: errorPayload(err)}
	for _, st := range res.Steps {
		doc.Steps = append(doc.Steps, StepDoc{Name: st.Name, ResultDoc: resultDoc(st.Result), Error: errorPayload(st.Err)})
	}
	write(w, r, http.StatusOK, doc)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// errorPayload is err as an error message's payload (nil for nil).
func errorPayload(err error) *protocol.ErrorPayload {
	if err == nil {
		return nil
	}
	code := protocol.CodeOf(err)
	p := &protocol.ErrorPayload{Code: code, Message: err.Error(), Retryable: code.Retryable()}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		p.Message, p.Detail = pe.Message, pe.Detail
		if pe.RetryAfter > 0 {
			p.RetryAfter = pe.RetryAfter.Seconds()
		}
	}
	return p
}
