package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// postMessage is the HTTP binding. The body is one IACP document in JSON or YAML; the agent
// may leave out what the node fills in (version, message_id, timestamp, ttl_seconds,
// correlation_id of a request, sender, signature). Without ?wait it answers 202 once the
// recipient's node has the message (status accepted) or it is queued for a known recipient
// that cannot be reached now (status queued); with ?wait=D (requests only) it answers 200
// with the response, or 504 TIMEOUT when none came within D, and the request lives no
// longer than D. A recipient nothing knows is 404 AGENT_NOT_FOUND at once, unless
// ?queue_unknown=true asks to queue it for an agent not yet seen.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	wait, waiting, body, ok := s.readCall(w, r)
	if !ok {
		return
	}
	opts, err := sendOptions(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	m, d, err := s.decodeMessage(r, body)
	if err != nil {
		s.failIn(w, r, err, d, body, "")
		return
	}
	if m.Envelope.Recipient.AgentID == protocol.Broadcast {
		s.broadcastMessage(w, r, m, waiting)
		return
	}
	if waiting {
		capTTL(m, wait) // the request lives as long as its caller waits
	}
	if err := s.prepare(m); err != nil {
		s.failIn(w, r, err, d, body, m.Envelope.MessageID)
		return
	}
	s.book.noteSent(m, d)
	if waiting {
		s.requestAndWait(w, r, m, d, body, wait, opts)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.sendTimeout)
	defer cancel()
	out, err := s.n.Submit(ctx, m, opts...)
	if err != nil {
		s.failIn(w, r, err, d, body, m.Envelope.MessageID)
		return
	}
	s.metrics.sent.Inc()
	write(w, r, http.StatusAccepted, SendResult{MessageID: m.Envelope.MessageID, Status: string(out)})
}

// QueueUnknownParam is the query parameter (POST /.well-known/iacp/v1/message, the WebSocket
// binding's connect) that asks to queue a message for an agent nothing knows yet, instead of
// refusing it with AGENT_NOT_FOUND: true or false (default).
const QueueUnknownParam = "queue_unknown"

// sendOptions are the node's send options a call asks for in its query.
func sendOptions(r *http.Request) ([]node.SendOption, error) {
	v := r.URL.Query().Get(QueueUnknownParam)
	if v == "" {
		return nil, nil
	}
	q, err := strconv.ParseBool(v)
	if err != nil {
		return nil, errorf(protocol.CodePayloadInvalid, "?%s=%q: say true or false", QueueUnknownParam, v)
	}
	if q {
		return []node.SendOption{node.QueueUnknown()}, nil
	}
	return nil, nil
}

// capTTL gives a request whose caller waits at most wait no longer a TTL (rounded up to the
// second), so that it is never delivered after its caller gave up.
func capTTL(m *protocol.Message, wait time.Duration) {
	secs := max(int64(math.Ceil(wait.Seconds())), 1)
	if m.Envelope.TTLSeconds == 0 || m.Envelope.TTLSeconds > secs {
		m.Envelope.TTLSeconds = secs
	}
}

// requestAndWait sends the request m, posted as body in dialect d, and answers with its
// response in d, or with TIMEOUT when none came within wait.
func (s *Server) requestAndWait(w http.ResponseWriter, r *http.Request, m *protocol.Message, d dialect.Dialect, body []byte, wait time.Duration, opts []node.SendOption) {
	if m.Message.Type != protocol.TypeRequest {
		s.failIn(w, r, errorf(protocol.CodePayloadInvalid, "wait needs a request; this is a %s", m.Message.Type), d, body, m.Envelope.MessageID)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	resp, err := s.n.Request(ctx, m, opts...)
	if err != nil {
		s.failIn(w, r, err, d, body, m.Envelope.MessageID)
		return
	}
	s.metrics.sent.Inc()
	if err := writeDialect(w, r, http.StatusOK, d, resp, m); err != nil {
		s.failIn(w, r, err, d, body, m.Envelope.MessageID)
	}
}

// decodeMessage decodes a document by Content-Type: an IACP document, or one of another
// draft's (dialect.go), which it maps to IACP; d is the dialect to answer in.
func (s *Server) decodeMessage(r *http.Request, body []byte) (*protocol.Message, dialect.Dialect, error) {
	if len(body) == 0 {
		return nil, "", errorf(protocol.CodePayloadInvalid, "empty body: send one IACP document")
	}
	f, err := bodyFormat(r, body)
	if err != nil {
		return nil, "", err
	}
	named, err := requestDialect(r)
	if err != nil {
		return nil, "", err
	}
	if f == protocol.JSON {
		return s.decodeJSON(named, body)
	}
	if named != "" && named != dialect.IACP {
		return nil, "", errorf(protocol.CodePayloadInvalid, "a %s document is JSON: send it as application/json", named)
	}
	m, err := protocol.DecodeYAMLLimit(body, yamlExpansion(body, s.cfg.maxBody))
	if err != nil && errors.Is(err, protocol.ErrDocumentTooLarge) {
		return nil, "", &httpError{status: http.StatusRequestEntityTooLarge, err: err}
	}
	return m, dialect.IACP, err
}

// prepare fills what the node owns, signs as the node's agent and validates, so that an
// invalid document is refused here with 400 rather than by the recipient.
func (s *Server) prepare(m *protocol.Message) error {
	if m.Message.Type == "" {
		m.Message.Type = protocol.TypeRequest
	}
	if len(m.Message.Payload) == 0 {
		m.Message.Payload = []byte("{}")
	}
	if m.Envelope.Recipient.AgentID == "" {
		return errorf(protocol.CodePayloadInvalid, "envelope.recipient.agent_id is missing: name the agent to send to")
	}
	// The sender is always this node's agent: the agent cannot sign with the node's key, and
	// the node signs nothing it did not fill itself.
	m.Envelope.Sender = protocol.Sender{}
	if err := s.n.Builder().Seal(m); err != nil {
		return err
	}
	raw, err := protocol.EncodeJSON(m)
	if err != nil {
		return errorf(protocol.CodePayloadInvalid, "encode: %w", err)
	}
	return protocol.Validate(m, s.n.Now(), len(raw), protocol.Limits{MaxMessageBytes: int(s.cfg.maxBody)})
}

// broadcastMessage sends an event to recipient "*" over gossip: the payload is the event.
func (s *Server) broadcastMessage(w http.ResponseWriter, r *http.Request, m *protocol.Message, waiting bool) {
	if waiting {
		s.fail(w, r, errorf(protocol.CodePayloadInvalid, "a broadcast has no single response to wait for"), "")
		return
	}
	if m.Message.Type != "" && m.Message.Type != protocol.TypeEvent {
		s.fail(w, r, errorf(protocol.CodePayloadInvalid, "recipient \"*\" takes events (a broadcast), not %s", m.Message.Type), "")
		return
	}
	var ev protocol.EventPayload
	if err := protocol.DecodePayload(m, &ev); err != nil {
		s.fail(w, r, err, "")
		return
	}
	var opts []protocol.Option
	if ch := m.Envelope.Recipient.Channel; ch != "" {
		opts = append(opts, protocol.WithChannel(ch))
	}
	if m.Envelope.TTLSeconds > 0 {
		opts = append(opts, protocol.WithTTL(time.Duration(m.Envelope.TTLSeconds)*time.Second))
	}
	s.broadcast(w, r, ev, opts)
}

// postBroadcast takes an event payload (event_type, detail, severity, data) and broadcasts it.
func (s *Server) postBroadcast(w http.ResponseWriter, r *http.Request) {
	if err := s.allow(); err != nil {
		s.fail(w, r, err, "")
		return
	}
	var ev protocol.EventPayload
	if !s.readInto(w, r, &ev) {
		return
	}
	s.broadcast(w, r, ev, nil)
}

func (s *Server) broadcast(w http.ResponseWriter, r *http.Request, ev protocol.EventPayload, opts []protocol.Option) {
	if !s.n.GossipOn() {
		s.fail(w, r, &httpError{status: http.StatusServiceUnavailable, err: errorf(protocol.CodeCapabilityMismatch,
			"broadcasts need gossip, which is off on this node: start it with gossip on")}, "")
		return
	}
	if ev.EventType == "" {
		s.fail(w, r, errorf(protocol.CodePayloadInvalid, "an event needs event_type"), "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.sendTimeout)
	defer cancel()
	m, err := s.n.Broadcast(ctx, ev, opts...)
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			err = errorf(protocol.CodeInternalError, "broadcast: %w", err)
		}
		s.fail(w, r, err, "")
		return
	}
	s.metrics.sent.Inc()
	write(w, r, http.StatusAccepted, SendResult{MessageID: m.Envelope.MessageID, Status: protocol.ResponseAccepted})
}

// allow applies the API's own rate limit.
// readCall admits a call that may wait (the API's rate, ?wait) and reads its body; on a
// refusal it answers it and returns false.
func (s *Server) readCall(w http.ResponseWriter, r *http.Request) (wait time.Duration, waiting bool, body []byte, ok bool) {
	if err := s.allow(); err != nil {
		s.fail(w, r, err, "")
		return 0, false, nil, false
	}
	wait, waiting, err := parseWait(r, s.cfg.maxWait)
	if err == nil {
		body, err = s.readBody(w, r)
	}
	if err != nil {
		s.fail(w, r, err, "")
		return 0, false, nil, false
	}
	return wait, waiting, body, true
}

func (s *Server) allow() error {
	if s.limiter == nil {
		return nil
	}
	res := s.limiter.Reserve()
	delay := res.Delay()
	if delay == 0 {
		return nil
	}
	res.Cancel()
	if delay < time.Second {
		delay = time.Second
	}
	return &protocol.Error{Code: protocol.CodeRateLimited, Message: "the local API's rate limit is exceeded; retry after the given delay", RetryAfter: delay}
}
