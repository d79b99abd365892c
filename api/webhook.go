package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// hookResult is the outcome of one webhook post.
type hookResult struct {
	id  string
	err error // nil: the agent took the message
}

// webhookLoop POSTs every inbound message to the agent's URL and acknowledges it once the
// agent answers 2xx. Each message has its own schedule (hookPlan): a message the agent fails
// is posted again after a backoff, with no attempt limit, until the agent takes it (a 2xx, or
// an ack through the API or a WebSocket) or it expires, and it never holds up the others.
// At most the webhook concurrency posts are in flight. A 200 whose body is an IACP response
// or error is sent as the reply (the binding's synchronous answer).
func (s *Server) webhookLoop() {
	defer s.wg.Done()
	hc := &http.Client{Timeout: s.cfg.webhookTimeout}
	defer hc.CloseIdleConnections()
	ib := s.n.Inbox()
	plan := newHookPlan(s.cfg.webhookMin, s.cfg.webhookMax, s.cfg.webhookConc, rand.Int64N)
	// Buffered for every post in flight, so that a post never waits for the loop.
	results := make(chan hookResult, s.cfg.webhookConc)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		changed := ib.Changed()
		now := s.n.Now()
		work := plan.next(ib.List(0), now)
		for _, d := range work.expired {
			if err := ib.Ack(d.Msg.Envelope.MessageID); err == nil {
				s.log.Info("webhook: a message expired before the agent took it; acknowledged as expired",
					"id", d.Msg.Envelope.MessageID)
			}
		}
		for _, d := range work.post {
			s.wg.Add(1)
			go s.hook(hc, d, results)
		}
		var wake <-chan time.Time
		if !work.wake.IsZero() {
			timer.Reset(work.wake.Sub(now))
			wake = timer.C
		}
		select {
		case <-s.ctx.Done():
			return
		case <-changed:
		case <-wake:
		case r := <-results:
			s.hookDone(plan, r)
			for more := true; more; {
				select {
				case r := <-results:
					s.hookDone(plan, r)
				default:
					more = false
				}
			}
		}
		timer.Stop()
	}
}

// hookDone records the outcome of a post and logs failures: at the 1st, 2nd, 4th, 8th...
// of a message, so that an agent that is down does not flood the log.
func (s *Server) hookDone(plan *hookPlan, r hookResult) {
	attempts, wait := plan.done(r.id, r.err == nil, s.n.Now())
	if r.err == nil || attempts == 0 || attempts&(attempts-1) != 0 || s.ctx.Err() != nil {
		return
	}
	s.log.Warn("webhook: the agent did not take a message; it is posted again until the agent takes it or it expires",
		"id", r.id, "failures", attempts, "retry_in", wait.String(), "err", r.err.Error())
}

// hook posts one message and reports the outcome on results. When the agent takes it, hook
// acknowledges it and sends the agent's synchronous reply, if any.
func (s *Server) hook(hc *http.Client, d node.Delivery, results chan<- hookResult) {
	defer s.wg.Done()
	id := d.Msg.Envelope.MessageID
	m, err := d.Message() // a large message is read from the store now
	var raw []byte
	var in dialect.Dialect
	if err == nil {
		raw, in, err = s.render(m, s.n.Dialect())
	}
	var reply *protocol.Message
	if err == nil {
		reply, err = s.post(hc, raw, in)
	}
	if err == nil {
		if aerr := s.n.Inbox().Ack(id); aerr != nil {
			s.log.Debug("webhook ack: already taken", "id", id)
		}
		s.metrics.received.WithLabelValues("webhook").Inc()
	}
	results <- hookResult{id: id, err: err}
	if reply != nil {
		s.replyFromHook(d.Msg, reply)
	}
}

// post sends one attempt, a document of dialect in; it returns the reply of a 200 whose body
// is an answer, in IACP or (recognised) in the agent's dialect.
func (s *Server) post(hc *http.Client, raw []byte, in dialect.Dialect) (*protocol.Message, error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.cfg.webhook, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	media := mediaJSON
	if in != dialect.IACP {
		media += "; " + DialectParam + "=" + string(in)
	}
	req.Header.Set("Content-Type", media)
	req.Header.Set("Accept", media)
	if s.cfg.webhookToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.webhookToken)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.cfg.maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("agent answered %s", resp.Status)
	}
	if resp.StatusCode != http.StatusOK || len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	var m *protocol.Message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' {
		m, _, err = s.decodeJSON("", body)
	} else {
		m, err = protocol.Decode(body) // YAML
	}
	if err != nil || (m.Message.Type != protocol.TypeResponse && m.Message.Type != protocol.TypeError) {
		return nil, nil // a 200 with some other body is a plain acknowledgement
	}
	return m, nil
}

// replyFromHook sends the agent's synchronous answer to the request it answers.
func (s *Server) replyFromHook(req, reply *protocol.Message) {
	if reply.Envelope.Recipient.AgentID == "" {
		reply.Envelope.Recipient.AgentID = req.Envelope.Sender.AgentID
	}
	if reply.Envelope.CorrelationID == "" {
		reply.Envelope.CorrelationID = req.Envelope.MessageID
	}
	if reply.Envelope.Recipient.Channel == "" {
		reply.Envelope.Recipient.Channel = req.Envelope.Recipient.Channel
	}
	if reply.Message.Intent == "" {
		reply.Message.Intent = req.Message.Intent
	}
	if err := s.prepare(reply); err != nil {
		s.log.Warn("webhook reply refused", "err", err.Error())
		return
	}
	ctx, cancel := context.WithDeadline(s.ctx, req.Expires())
	defer cancel()
	ctx, cancelSend := context.WithTimeout(ctx, s.cfg.sendTimeout)
	defer cancelSend()
	if err := s.n.Send(ctx, reply); err != nil {
		s.log.Warn("webhook reply not delivered", "err", err.Error())
		return
	}
	s.metrics.sent.Inc()
}
