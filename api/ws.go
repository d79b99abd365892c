package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// maxWSSends bounds the sends one WebSocket has in flight; beyond it the reader waits.
const maxWSSends = 64

// AckFrame is what a WebSocket client sends to take a message: {"ack":"<message_id>"}.
type AckFrame struct {
	Ack string `json:"ack"`
}

// ResultFrame is what the server sends back about a client's frame: {"sent":"<id>"} when a
// message was delivered, {"queued":"<id>"} when it waits in the outbox, {"held":"<id>"} when
// it waits for approval, {"acked":"<id>"} after an ack, or
// {"error":{...},"message_id":"<id>"}.
type ResultFrame struct {
	Sent string `json:"sent,omitempty"`
	// Held names a message that requires approval, held unsent until the node's operator
	// decides (docs/coordination.md "Approval"), instead of Sent.
	Held string `json:"held,omitempty"`
	// Queued names a message whose recipient is known but could not be reached: it waits in
	// the outbox, instead of Sent.
	Queued    string                 `json:"queued,omitempty"`
	Acked     string                 `json:"acked,omitempty"`
	MessageID string                 `json:"message_id,omitempty"`
	Error     *protocol.ErrorPayload `json:"error,omitempty"`
}

// wsConn is one agent connection. The reader loop owns reads; writes may come from the pump,
// the pinger and send goroutines (the library serialises them).
type wsConn struct {
	s     *Server
	c     *websocket.Conn
	ctx   context.Context
	close context.CancelFunc
	wg    sync.WaitGroup
	slots chan struct{}
	// dialect is what the agent speaks: ?dialect= on connect, else the node's agent's
	// (Config.Dialect). Its inbound messages are written in it. named is ?dialect= alone:
	// its documents are read as that, else recognised (Server.decodeJSON).
	dialect, named dialect.Dialect
	// opts are the send options the connection asked for (?queue_unknown=).
	opts []node.SendOption
}

// connect is the WebSocket binding: inbound messages go to the agent as text frames, one IACP
// document each, every one not yet acknowledged (a reconnecting agent gets again what it did
// not ack); the agent sends IACP documents and {"ack":"<id>"} frames the same way. The server
// pings every ping interval; an agent that does not answer within the ping timeout is dropped,
// and that also ends the pending read. An agent that speaks another draft names it with
// ?dialect= (docs/dialects.md): it sends and receives that draft's documents.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	named, err := requestDialect(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	d, _ := s.agentDialect(r) // requestDialect said the request's is good
	opts, err := sendOptions(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	// The WebSocket outlives this request: no deadline of the request may stay on its
	// connection. The library bounds each read and write by its context instead.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept answered already
	}
	c.SetReadLimit(s.cfg.maxBody)
	s.wg.Add(1)
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(s.ctx)
	wc := &wsConn{s: s, c: c, ctx: ctx, close: cancel, slots: make(chan struct{}, maxWSSends), dialect: d, named: named, opts: opts}
	wc.wg.Add(2)
	go wc.pump()
	go wc.pinger()
	err = wc.readLoop()
	cancel()
	wc.wg.Wait()
	if s.ctx.Err() != nil {
		_ = c.Close(websocket.StatusGoingAway, "node shutting down")
	} else {
		_ = c.CloseNow()
	}
	if err != nil && !errors.Is(err, context.Canceled) && websocket.CloseStatus(err) == -1 {
		s.log.Debug("websocket ended", "err", err.Error())
	}
}

// readLoop reads frames until the connection ends; each read is bounded by the read limit
// and by the heartbeat (the pinger cancels ctx when a pong is late).
func (wc *wsConn) readLoop() error {
	for {
		typ, data, err := wc.c.Read(wc.ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			wc.result(ResultFrame{Error: &protocol.ErrorPayload{Code: protocol.CodePayloadInvalid, Message: "send text frames: one JSON document each"}})
			continue
		}
		if ack, ok := ackOf(data); ok {
			if err := wc.s.n.Inbox().Ack(ack); err != nil {
				wc.result(ResultFrame{MessageID: ack, Error: &protocol.ErrorPayload{Code: protocol.CodePayloadInvalid, Message: err.Error()}})
				continue
			}
			wc.s.metrics.received.WithLabelValues("ws").Inc()
			wc.result(ResultFrame{Acked: ack})
			continue
		}
		select {
		case wc.slots <- struct{}{}:
		case <-wc.ctx.Done():
			return wc.ctx.Err()
		}
		wc.wg.Add(1)
		go wc.send(data)
	}
}

// ackOf recognises {"ack":"<id>"}.
func ackOf(data []byte) (string, bool) {
	if !bytes.Contains(data, []byte(`"ack"`)) || bytes.Contains(data, []byte(`"envelope"`)) {
		return "", false
	}
	var a AckFrame
	if err := json.Unmarshal(data, &a); err != nil || a.Ack == "" {
		return "", false
	}
	return a.Ack, true
}

// send delivers one document from the agent and reports the outcome.
func (wc *wsConn) send(data []byte) {
	defer wc.wg.Done()
	defer func() { <-wc.slots }()
	s := wc.s
	fail := func(err error, id string) {
		s.metrics.errors.WithLabelValues(string(protocol.CodeOf(err))).Inc()
		p := protocol.ErrorPayload{Code: protocol.CodeOf(err), Message: err.Error(), Retryable: protocol.CodeOf(err).Retryable()}
		var pe *protocol.Error
		if errors.As(err, &pe) && pe.RetryAfter > 0 {
			p.RetryAfter = pe.RetryAfter.Seconds()
		}
		wc.result(ResultFrame{MessageID: id, Error: &p})
	}
	if err := s.allow(); err != nil {
		fail(err, "")
		return
	}
	m, d, err := s.decodeJSON(wc.named, data)
	if err != nil {
		fail(err, "")
		return
	}
	if err := s.prepare(m); err != nil {
		fail(err, m.Envelope.MessageID)
		return
	}
	s.book.noteSent(m, d)
	ctx, cancel := context.WithTimeout(wc.ctx, s.cfg.sendTimeout)
	defer cancel()
	out, err := s.n.Submit(ctx, m, wc.opts...)
	if err != nil {
		fail(err, m.Envelope.MessageID)
		return
	}
	s.metrics.sent.Inc()
	switch out {
	case node.OutcomeHeld:
		wc.result(ResultFrame{Held: m.Envelope.MessageID}) // until the operator decides
	case node.OutcomeQueued:
		wc.result(ResultFrame{Queued: m.Envelope.MessageID})
	default:
		wc.result(ResultFrame{Sent: m.Envelope.MessageID})
	}
}

func (wc *wsConn) result(f ResultFrame) {
	raw, _ := json.Marshal(f)
	wc.write(raw)
}

// write sends one text frame, bounded by the ping timeout; a write that cannot finish ends
// the connection.
func (wc *wsConn) write(raw []byte) bool {
	ctx, cancel := context.WithTimeout(wc.ctx, wc.s.cfg.pingTimeout)
	defer cancel()
	if err := wc.c.Write(ctx, websocket.MessageText, raw); err != nil {
		wc.close()
		return false
	}
	return true
}

// pump sends every message not yet acknowledged, then each new arrival.
func (wc *wsConn) pump() {
	defer wc.wg.Done()
	ib := wc.s.n.Inbox()
	var after uint64
	for {
		ds, err := ib.Wait(wc.ctx, after)
		if err != nil {
			return
		}
		for _, d := range ds {
			m, err := d.Message() // a large message is read from the store now, one at a time
			if err != nil {
				after = d.Seq // taken meanwhile, or unreadable (the store logs why)
				continue
			}
			raw, _, err := wc.s.render(m, wc.dialect)
			if err != nil {
				continue
			}
			if !wc.write(raw) {
				return
			}
			after = d.Seq
		}
	}
}

// pinger is the heartbeat: a ping every interval; no pong within the timeout drops the agent.
func (wc *wsConn) pinger() {
	defer wc.wg.Done()
	t := time.NewTicker(wc.s.cfg.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-wc.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(wc.ctx, wc.s.cfg.pingTimeout)
		err := wc.c.Ping(ctx)
		cancel()
		if err != nil {
			wc.s.log.Info("websocket agent missed a heartbeat; dropping it", "err", err.Error())
			wc.close()
			return
		}
	}
}
