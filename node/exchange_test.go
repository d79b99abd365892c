package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/protocol"
)

// IACP "request": a request expects a response whose correlation_id is the request's id.
func TestRequest_ResponseCorrelatesToRequest(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		return r.Reply(protocol.ResponseAccepted, map[string]any{"result": "done"})
	})
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"task": "x"})
	resp, err := a.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Envelope.CorrelationID != req.Envelope.MessageID {
		t.Fatalf("correlation_id %s, want the request's id %s", resp.Envelope.CorrelationID, req.Envelope.MessageID)
	}
	if st, _ := protocol.StatusOf(resp); st != protocol.ResponseAccepted {
		t.Fatalf("status %q", st)
	}
}

// IACP "event": fire-and-forget; Send returns after the receipt and the handler gets it.
func TestSend_FireAndForgetReturnsAfterReceipt(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	got := make(chan *protocol.Message, 1)
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got <- r.Msg; return nil })
	ev, _ := a.Builder().Event(agentName(1), protocol.IntentNotify, protocol.EventPayload{EventType: "build.done"})
	if err := a.Send(testCtx(t), ev); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Envelope.MessageID != ev.Envelope.MessageID {
			t.Fatal("handler got another message")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never got the event")
	}
}

// Async-first: a response that comes long after the receipt window goes out on a new stream
// and is still matched by correlation_id.
func TestRequest_LateResponseArrivesOutOfBand(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
		go func() {
			time.Sleep(300 * time.Millisecond) // well past the 20 ms receipt window
			_ = r.Reply(protocol.ResponseAccepted, map[string]any{"late": true})
		}()
		return nil
	})
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, nil)
	resp, err := a.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Late bool }
	_ = protocol.DecodePayload(resp, &body)
	if !body.Late || resp.Envelope.CorrelationID != req.Envelope.MessageID {
		t.Fatalf("unexpected response %s", resp.Message.Payload)
	}
}

// IACP "request" error handling: no response within the TTL is a TIMEOUT.
func TestRequest_NoResponseIsTimeout(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	b.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error { return nil })
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, nil)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	_, err := a.Request(ctx, req)
	if !errors.Is(err, protocol.ErrTimeout) {
		t.Fatalf("err = %v, want TIMEOUT", err)
	}
}

// A request for an intent the agent has no handler for is CAPABILITY_MISMATCH.
func TestRequest_UnhandledIntentIsCapabilityMismatch(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	req, _ := m.nodes[0].Builder().Request(agentName(1), protocol.IntentNegotiate, nil)
	_, err := m.nodes[0].Request(testCtx(t), req)
	if !errors.Is(err, protocol.ErrCapabilityMismatch) {
		t.Fatalf("err = %v, want CAPABILITY_MISMATCH", err)
	}
}

// The node answers `query` with the manifest and `health` with its status by itself.
func TestBuiltins_QueryAndHealth(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a := m.nodes[0]
	q, _ := a.Builder().Request(agentName(1), protocol.IntentQuery, protocol.CapabilityQuery{Required: protocol.CapabilitySet{Tools: []string{"terminal"}}})
	resp, err := a.Request(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	var mr protocol.ManifestResponse
	_ = protocol.DecodePayload(resp, &mr)
	if mr.Status != protocol.ResponseAccepted || mr.Manifest.AgentID != agentName(1) {
		t.Fatalf("query answer %s", resp.Message.Payload)
	}
	q2, _ := a.Builder().Request(agentName(1), protocol.IntentQuery, protocol.CapabilityQuery{Required: protocol.CapabilitySet{Models: []string{"llama3"}}})
	resp, err = a.Request(testCtx(t), q2)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := protocol.StatusOf(resp); st != protocol.ResponseRejected {
		t.Fatalf("a query the agent cannot satisfy: status %q, want rejected", st)
	}
	m.nodes[1].SetStatus(protocol.StatusBusy, 0.75, 3)
	h, _ := a.Builder().Request(agentName(1), protocol.IntentHealth, nil)
	resp, err = a.Request(testCtx(t), h)
	if err != nil {
		t.Fatal(err)
	}
	var hb struct{ Health protocol.HeartbeatPayload }
	_ = protocol.DecodePayload(resp, &hb)
	if hb.Health.Status != protocol.StatusBusy || hb.Health.Load != 0.75 || hb.Health.ActiveTasks != 3 {
		t.Fatalf("health answer %s", resp.Message.Payload)
	}
}

// Many concurrent sends share one session and every one gets its receipt.
func TestSend_ConcurrentBurstAllReceipted(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	var got atomic.Int64
	b.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error { got.Add(1); return nil })
	const n = 200
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			ev, _ := a.Builder().Event(agentName(1), protocol.IntentNotify, protocol.EventPayload{EventType: "tick"})
			errs <- a.Send(testCtx(t), ev)
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.Load() != n {
		t.Fatalf("handler saw %d of %d", got.Load(), n)
	}
}

// Without durable delivery, sending to an agent nobody knows is AGENT_NOT_FOUND, at once.
func TestSend_UnknownAgentIsAgentNotFound(t *testing.T) {
	m := newMesh(t, 1, []Option{WithDurable(false)}, nil)
	ev, _ := m.nodes[0].Builder().Event("test:mesh:nobody", protocol.IntentNotify, protocol.EventPayload{EventType: "x"})
	if err := m.nodes[0].Send(testCtx(t), ev); !errors.Is(err, protocol.ErrAgentNotFound) {
		t.Fatalf("err = %v, want AGENT_NOT_FOUND", err)
	}
}

// A request sent with Send (not waited for) whose reply comes back inline with the receipt:
// the reply reaches the agent (its inbox), it is not lost. Both with and without durability.
func TestSend_InlineReplyToUnwaitedRequestReachesAgent(t *testing.T) {
	for _, durable := range []bool{false, true} {
		m := newMesh(t, 2, []Option{WithInbox(true), WithDurable(durable)}, nil)
		a := m.nodes[0]
		q, _ := a.Builder().Request(agentName(1), protocol.IntentQuery, nil)
		if err := a.Send(testCtx(t), q); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		ds, err := a.Inbox().Wait(ctx, 0)
		cancel()
		if err != nil {
			t.Fatalf("durable=%v: the inline reply never reached the inbox: %v", durable, err)
		}
		if ds[0].Msg.Envelope.CorrelationID != q.Envelope.MessageID {
			t.Fatalf("durable=%v: inbox holds another message", durable)
		}
	}
}

// A request the outbox resends and that meets the copy the recipient already accepted gets
// DUPLICATE back: that answer is a receipt, not the request's reply, and the real reply still
// completes it. On a first send, DUPLICATE (a reused message_id) is the answer.
func TestDuplicateAnswerToAResendIsAReceipt(t *testing.T) {
	m := newMesh(t, 2, nil, nil)
	a, b := m.nodes[0], m.nodes[1]
	req, err := a.Builder().Request(agentName(1), protocol.IntentQuery, map[string]any{"q": 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := a.wire.register(req)
	if err != nil {
		t.Fatal(err)
	}
	defer a.wire.unregister(req.Envelope.MessageID)
	dup, err := b.Builder().Error(req, agentName(0), &protocol.Error{Code: protocol.CodeDuplicate, Message: "already accepted"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.wire.register(&protocol.Message{Envelope: protocol.Envelope{MessageID: "first-send"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.wire.unregister("first-send")
	a.wire.waitersMu.Lock()
	w.peer, w.resend = b.ID(), true
	first.peer = b.ID()
	a.wire.waitersMu.Unlock()
	reused := *dup
	reused.Envelope.CorrelationID = "first-send"
	if !a.wire.matchReply(&reused, b.ID()) {
		t.Fatal("the DUPLICATE answer to a first send was not taken")
	}
	select {
	case <-first.done:
	default:
		t.Fatal("on a first send, DUPLICATE did not complete the waiter")
	}
	if !a.wire.matchReply(dup, b.ID()) {
		t.Fatal("the DUPLICATE answer was not taken")
	}
	select {
	case <-w.receipted:
	default:
		t.Fatal("DUPLICATE did not count as a receipt")
	}
	select {
	case <-w.done:
		t.Fatalf("DUPLICATE completed the request: %+v", w.reply.Message)
	default:
	}
	resp, err := b.Builder().Response(req, "success", map[string]any{"a": 2})
	if err != nil {
		t.Fatal(err)
	}
	if !a.wire.matchReply(resp, b.ID()) {
		t.Fatal("the response was not taken")
	}
	select {
	case <-w.done:
		if w.reply.Envelope.MessageID != resp.Envelope.MessageID {
			t.Fatal("the request completed with another message")
		}
	default:
		t.Fatal("the response did not complete the request")
	}
}

// A receipt is a pending response naming the ids it covers, however its payload spells the
// status; an answer, pending or not, that names none is not one.
func TestReceiptOf_TellsReceiptsFromAnswers(t *testing.T) {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder("test:receipt:a", k, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := b.Request("test:receipt:b", protocol.IntentQuery, map[string]any{"q": "x"})
	if err != nil {
		t.Fatal(err)
	}
	id := req.Envelope.MessageID
	for _, c := range []struct {
		name    string
		payload string
		want    []string
	}{
		{"a receipt", `{"status":"pending","detail":"received","receipt":{"message_ids":["` + id + `"]}}`, []string{id}},
		{"a receipt whose status is escaped", `{"status":"pend\u0069ng","receipt":{"message_ids":["` + id + `"]}}`, []string{id}},
		{"an answer", `{"status":"completed","result":{"pending":false}}`, nil},
		{"an answer without the word", `{"status":"accepted"}`, nil},
	} {
		m, err := b.Response(req, protocol.ResponseAccepted, nil)
		if err != nil {
			t.Fatal(err)
		}
		m.Message.Payload = json.RawMessage(c.payload)
		if got := receiptOf(m); !slices.Equal(got, c.want) {
			t.Errorf("%s: receiptOf = %v, want %v", c.name, got, c.want)
		}
	}
}

// A peer that answers and then closes the stream (a node refusing a peer over its rate does)
// was heard: when the answer and the session's end are both there by the time the sender
// looks, the answer wins, every time. Sending again would only meet the peer's penalty, and
// the refusal would be lost (the CI run of 2026-11-28 lost it this way).
func TestAwaitReceipt_AnAnswerBeforeTheSessionEndedIsHeard(t *testing.T) {
	ended := &session{done: make(chan struct{}), err: io.EOF}
	close(ended.done)
	w := &waiter{receipted: make(chan struct{}), done: make(chan struct{})}
	if heard, err := awaitReceipt(t.Context(), w, ended); heard || err != io.EOF {
		t.Fatalf("no answer, session ended: heard %v, %v; want false, EOF", heard, err)
	}
	w.complete(&protocol.Message{})
	for range 200 { // select picks at random among ready cases
		if heard, err := awaitReceipt(t.Context(), w, ended); !heard || err != nil {
			t.Fatalf("answered, then the session ended: heard %v, %v; want heard", heard, err)
		}
	}
	done, cancel := context.WithCancel(t.Context())
	cancel()
	if heard, _ := awaitReceipt(done, w, &session{done: make(chan struct{})}); !heard {
		t.Fatal("answered, then the context ended: not heard")
	}
}
