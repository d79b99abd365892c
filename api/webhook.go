package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// webhookLoop POSTs every inbound message to the agent's URL, in arrival order, and
// acknowledges it once the agent answers 2xx. A 200 whose body is an IACP response or error
// is sent as the reply (the binding's synchronous answer).
func (s *Server) webhookLoop() {
	defer s.wg.Done()
	hc := &http.Client{Timeout: s.cfg.webhookTimeout}
	defer hc.CloseIdleConnections()
	ib := s.n.Inbox()
	var after uint64
	for {
		ds, err := ib.Wait(s.ctx, after)
		if err != nil {
			return
		}
		for _, d := range ds {
			after = d.Seq
			if err := s.hook(hc, d); err != nil {
				if s.ctx.Err() != nil {
					return
				}
				s.log.Warn("webhook gave up on a message; it stays in the inbox for GET /v1/inbox",
					"id", d.Msg.Envelope.MessageID, "err", err.Error())
			}
		}
	}
}

// hook delivers one message with bounded retries: exponential backoff with jitter.
func (s *Server) hook(hc *http.Client, d node.Delivery) error {
	id := d.Msg.Envelope.MessageID
	if !s.n.Now().Before(d.Msg.Expires()) {
		_ = s.n.Inbox().Ack(id) // expired: never processed (Internet-Draft TTL rule)
		return nil
	}
	raw, err := protocol.EncodeJSON(d.Msg)
	if err != nil {
		return err
	}
	var lastErr error
	for attempt := 0; attempt < s.cfg.webhookTries; attempt++ {
		if attempt > 0 {
			if err := s.pause(backoff(s.cfg.webhookMin, s.cfg.webhookMax, attempt)); err != nil {
				return err
			}
		}
		reply, err := s.post(hc, raw)
		if err != nil {
			lastErr = err
			continue
		}
		if err := s.n.Inbox().Ack(id); err != nil {
			s.log.Debug("webhook ack: already taken", "id", id)
		}
		s.metrics.received.WithLabelValues("webhook").Inc()
		if reply != nil {
			s.replyFromHook(d.Msg, reply)
		}
		return nil
	}
	return fmt.Errorf("%d attempts: %w", s.cfg.webhookTries, lastErr)
}

// post sends one attempt; it returns the reply document of a 200 with an IACP body.
func (s *Server) post(hc *http.Client, raw []byte) (*protocol.Message, error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.cfg.webhook, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mediaJSON)
	req.Header.Set("Accept", mediaJSON)
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
	m, err := protocol.Decode(body)
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
	if err := s.n.Send(ctx, reply); err != nil {
		s.log.Warn("webhook reply not delivered", "err", err.Error())
		return
	}
	s.metrics.sent.Inc()
}

// pause waits d or until the server closes.
func (s *Server) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// backoff is min*2^(attempt-1) capped at max, with "equal jitter": a uniform draw from
// [d/2, d], so that retries of many nodes spread out yet never collapse to zero.
func backoff(min, max time.Duration, attempt int) time.Duration {
	d := min
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}
