package node

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
)

// Handler handles one inbound message. For a request it answers with r.Reply or r.Fail, now
// or later from another goroutine (async-first: the answer then goes out on a new stream, up
// to the message's TTL); returning an error is r.Fail(err). For events and notifications no
// answer is expected. Handlers run on their own goroutine, at most 1024 at once.
type Handler func(ctx context.Context, r *Request) error

// Request is one inbound message handed to a handler, with helpers to answer it.
type Request struct {
	// Msg is the verified, validated message.
	Msg *protocol.Message
	// Peer is the authenticated remote peer that delivered it.
	Peer peer.ID

	n    *wire
	ex   *exchange // nil unless Msg is a request that arrived on a stream
	size int       // the document's bytes as received, what it holds in the inbox; 0: unknown
	// answerTTL, when set, is the TTL of the answer: what is left of a group request's (askserve.go)
	answerTTL time.Duration
}

// Reply answers the request with a response of the given status (accepted, rejected, pending,
// counter) and a body merged into the payload.
func (r *Request) Reply(status string, body any) error {
	m, err := r.n.builder.Response(r.Msg, status, body, r.answerOpts()...)
	if err != nil {
		return err
	}
	return r.answer(m)
}

// Fail answers the request with an error message whose code is protocol.CodeOf(err).
func (r *Request) Fail(err error) error {
	m, berr := r.n.builder.Error(r.Msg, r.Msg.Envelope.Sender.AgentID, err, r.answerOpts()...)
	if berr != nil {
		return berr
	}
	return r.answer(m)
}

// answer sends the reply inline when the receipt window is still open, else out of band.
func (r *Request) answer(m *protocol.Message) error {
	if r.Msg.Message.Type != protocol.TypeRequest {
		return protocol.Errorf(protocol.CodePayloadInvalid, "only requests are answered; this is a %s", r.Msg.Message.Type)
	}
	r.n.answered.record(r.Msg.Envelope.MessageID, r.Msg.Envelope.Sender.AgentID, r.Msg.Expires(), m, r.n.Now())
	if ex := r.ex; ex != nil && ex.state.CompareAndSwap(exWaiting, exInline) {
		if ex.timer.Stop() {
			defer ex.in.exchanges.Done()
		}
		if ex.in.write(m) {
			return nil
		}
	}
	ctx, cancel := context.WithDeadline(r.n.ctx, r.Msg.Expires())
	defer cancel()
	return r.n.send(ctx, m)
}

// Handle registers h for an intent (handoff, negotiate, notify or an x- custom intent),
// replacing any earlier handler. query and health are answered by the node itself unless a
// handler is registered for them. The node serves from New on: what arrives before Handle
// goes to the inbox (with the inbox off, an event is taken as it is); WithHandler registers a
// handler before that.
func (n *wire) handle(intent protocol.Intent, h Handler) {
	n.handlersMu.Lock()
	defer n.handlersMu.Unlock()
	n.handlers[intent] = h
}

// HandleOther registers a handler for every message no intent handler takes (events and
// requests without a handler, responses that arrive after their requester stopped waiting),
// instead of queueing them in the inbox. WithOtherHandler registers it before New serves.
func (n *wire) handleOther(h Handler) {
	n.handlersMu.Lock()
	defer n.handlersMu.Unlock()
	n.fallback = h
}

// handOver routes r and hands it to the agent at once, for messages that are not stored
// first: a TIMEOUT the node itself reports, messages the store accepted before a restart.
func (n *wire) handOver(r *Request) error {
	start, _, err := n.route(r)
	if err != nil {
		return err
	}
	start()
	return nil
}

// route decides where r goes and reserves what handing it over needs, so that whatever would
// refuse it refuses now, before it is stored and receipted. start hands it over; cancel
// releases the reservation instead.
//
// A message with a Go handler runs it on a worker goroutine (at most maxHandlers at once) and
// counts as taken when the handler returns; otherwise it waits in the inbox (when on) until
// the agent acknowledges it. Without either, a request is refused with CAPABILITY_MISMATCH
// and an event is taken as it is.
func (n *wire) route(r *Request) (start, cancel func(), err error) {
	id := r.Msg.Envelope.MessageID
	h := n.handlerFor(r.Msg)
	if h == nil {
		switch {
		case n.cfg.Inbox:
			if err := n.expressible(r.Msg); err != nil {
				return nil, nil, err
			}
			// The room is reserved now, so that a message accepted and receipted always gets
			// into the inbox: a batch cannot pass room checks one by one and then overflow.
			size, err := n.inbox.reserve(r.Msg, r.Peer, r.size)
			if err != nil {
				return nil, nil, err
			}
			return func() { n.inbox.add(r.Msg, r.Peer, n.now(), size) },
				func() { n.inbox.unreserve(r.Peer, size) }, nil
		case r.Msg.Message.Type == protocol.TypeRequest:
			return nil, nil, protocol.Errorf(protocol.CodeCapabilityMismatch, "agent %s has no handler for intent %s", n.cfg.AgentID, r.Msg.Message.Intent)
		}
		return func() {
			n.log.Debug("no handler and no inbox; message taken as it is", "id", id, "type", r.Msg.Message.Type)
			_ = n.durable.handled(id)
		}, func() {}, nil
	}
	select {
	case n.slots <- struct{}{}:
	default:
		return nil, nil, &protocol.Error{Code: protocol.CodeRateLimited, Message: "too many messages in progress", RetryAfter: time.Second}
	}
	if !n.life.track() {
		<-n.slots
		return nil, nil, protocol.Errorf(protocol.CodeAgentNotFound, "node is shutting down")
	}
	start = func() {
		n.workers.Go(func() {
			defer n.life.done()
			defer func() { <-n.slots }()
			ctx, cancel := context.WithDeadline(n.ctx, r.Msg.Expires())
			defer cancel()
			if err := h(ctx, r); err != nil && r.Msg.Message.Type == protocol.TypeRequest {
				_ = r.Fail(err)
			}
			if err := n.durable.handled(id); err != nil {
				n.log.Error("inbox: ack after handler", "id", id, "err", err.Error())
			}
		})
	}
	cancel = func() {
		<-n.slots
		n.life.done()
	}
	return start, cancel, nil
}

// expressible refuses a message that has no shape in the dialect the agent speaks, with the
// translator's code (CAPABILITY_MISMATCH) and a reason that names the agent and its dialect.
func (n *wire) expressible(m *protocol.Message) error {
	err := dialect.Expressible(m, n.Dialect())
	var e *protocol.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	return &protocol.Error{Code: e.Code, Message: "agent " + n.cfg.AgentID + " speaks " + string(n.Dialect()) + ": " + e.Message}
}

func (n *wire) handlerFor(m *protocol.Message) Handler {
	n.handlersMu.RLock()
	defer n.handlersMu.RUnlock()
	if m.Message.Type == protocol.TypeRequest || m.Message.Type == protocol.TypeEvent {
		if h, ok := n.handlers[m.Message.Intent]; ok {
			return h
		}
		if m.Message.Type == protocol.TypeRequest {
			switch m.Message.Intent {
			case protocol.IntentQuery:
				return n.answerQuery
			case protocol.IntentHealth:
				return n.answerHealth
			}
		}
	}
	return n.fallback
}

// answerQuery answers a capability query with the manifest: accepted when every required
// capability is present, rejected (with the missing ones) otherwise.
func (n *wire) answerQuery(_ context.Context, r *Request) error {
	var q protocol.CapabilityQuery
	if err := protocol.DecodePayload(r.Msg, &q); err != nil {
		return err
	}
	m := n.Manifest()
	missing := Missing(m, q.Required)
	status, detail := protocol.ResponseAccepted, ""
	if len(missing) > 0 {
		status, detail = protocol.ResponseRejected, "missing required capabilities: "+strings.Join(missing, ", ")
	}
	return r.Reply(status, map[string]any{"manifest": m, "detail": detail})
}

// answerHealth answers a health request with the node's status.
func (n *wire) answerHealth(_ context.Context, r *Request) error {
	st := n.Status()
	return r.Reply(protocol.ResponseAccepted, map[string]any{
		"health": map[string]any{
			"status": st.Status, "load": st.Load, "active_tasks": st.ActiveTasks,
			"version": st.Version, "uptime_seconds": int64(n.now().Sub(n.started) / time.Second),
		},
	})
}

// Missing lists the required capabilities (as "tool:x", "model:y", "domain:z") that the
// manifest lacks.
func Missing(m protocol.Manifest, required protocol.CapabilitySet) []string {
	var out []string
	check := func(kind string, have, want []string) {
		for _, w := range want {
			found := false
			for _, h := range have {
				if h == w {
					found = true
					break
				}
			}
			if !found {
				out = append(out, kind+":"+w)
			}
		}
	}
	check("tool", m.Tools, required.Tools)
	check("model", m.Models, required.Models)
	check("domain", m.Domains, required.Domains)
	return out
}
