package protocol_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestBuilder_RequestIsValidSignedAndStartsItsChain(t *testing.T) {
	m := validRequest(t)
	env := m.Envelope
	if env.Version != protocol.Version || env.CorrelationID != env.MessageID || env.TTLSeconds != 3600 ||
		env.Timestamp != "2026-05-01T12:00:00.000Z" || env.Recipient.Channel != protocol.ChannelQuery {
		t.Fatalf("envelope = %+v", env)
	}
	if err := protocol.Verify(m); err != nil {
		t.Fatal(err)
	}
	if err := validate(m); err != nil {
		t.Fatal(err)
	}
}

func TestBuilder_Options(t *testing.T) {
	b := newTestBuilder(t, "acme:host-1:planner")
	m, err := b.Request("acme:host-2:analyst", protocol.IntentHandoff, nil,
		protocol.WithChannel("x-jobs"), protocol.WithTTL(1500*time.Millisecond), protocol.WithCorrelation("chain-1"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Envelope.Recipient.Channel != "x-jobs" || m.Envelope.TTLSeconds != 2 || m.Envelope.CorrelationID != "chain-1" ||
		string(m.Message.Payload) != "{}" {
		t.Fatalf("options not applied: %+v %s", m.Envelope, m.Message.Payload)
	}
}

func TestBuilder_ResponseCorrelatesToRequest(t *testing.T) {
	req := validRequest(t)
	resp, err := newTestBuilder(t, "acme:host-2:analyst").Response(req, protocol.ResponseAccepted, map[string]any{"answer": "Paris"})
	if err != nil {
		t.Fatal(err)
	}
	env := resp.Envelope
	if env.CorrelationID != req.Envelope.MessageID {
		t.Fatalf("correlation_id = %s, want the request's message_id %s", env.CorrelationID, req.Envelope.MessageID)
	}
	if env.MessageID == req.Envelope.MessageID || env.Recipient.AgentID != req.Envelope.Sender.AgentID ||
		env.Recipient.Channel != req.Envelope.Recipient.Channel || resp.Message.Intent != req.Message.Intent ||
		resp.Message.Type != protocol.TypeResponse {
		t.Fatalf("response = %+v", resp)
	}
	if st, err := protocol.StatusOf(resp); err != nil || st != protocol.ResponseAccepted {
		t.Fatalf("status = %q, %v", st, err)
	}
	var body struct{ Answer string }
	if err := protocol.DecodePayload(resp, &body); err != nil || body.Answer != "Paris" {
		t.Fatalf("payload = %s", resp.Message.Payload)
	}
	if err := validate(resp); err != nil {
		t.Fatal(err)
	}
	if err := protocol.Verify(resp); err != nil {
		t.Fatal(err)
	}
}

func TestBuilder_ErrorReplyCarriesCodeRetryAfterAndGoesToOriginalSender(t *testing.T) {
	req := validRequest(t)
	cause := &protocol.Error{Code: protocol.CodeRateLimited, Message: "too many requests", RetryAfter: 1500 * time.Millisecond,
		Detail: map[string]any{"limit": 10}}
	em, err := newTestBuilder(t, "acme:host-2:analyst").Error(req, "ignored:when:orig-given", cause)
	if err != nil {
		t.Fatal(err)
	}
	if em.Envelope.Recipient.AgentID != req.Envelope.Sender.AgentID || em.Envelope.CorrelationID != req.Envelope.MessageID ||
		em.Message.Type != protocol.TypeError || em.Message.Intent != req.Message.Intent || em.Envelope.Recipient.Channel != req.Envelope.Recipient.Channel {
		t.Fatalf("error message = %+v", em)
	}
	var p protocol.ErrorPayload
	if err := protocol.DecodePayload(em, &p); err != nil {
		t.Fatal(err)
	}
	if p.Code != protocol.CodeRateLimited || p.RetryAfter != 1.5 || !p.Retryable || p.Message != "too many requests" {
		t.Fatalf("payload = %+v", p)
	}
	back, err := protocol.ErrorOf(em)
	if err != nil || !errors.Is(back, protocol.ErrRateLimited) || back.RetryAfter != cause.RetryAfter {
		t.Fatalf("ErrorOf = %+v, %v", back, err)
	}
	if err := validate(em); err != nil {
		t.Fatal(err)
	}
	if err := protocol.Verify(em); err != nil {
		t.Fatal(err)
	}
}

func TestBuilder_ErrorWithoutOriginal(t *testing.T) {
	b := newTestBuilder(t, "acme:host-2:analyst")
	em, err := b.Error(nil, "acme:host-9:unknown", errors.New("disk on fire"))
	if err != nil {
		t.Fatal(err)
	}
	var p protocol.ErrorPayload
	_ = protocol.DecodePayload(em, &p)
	if em.Envelope.Recipient.AgentID != "acme:host-9:unknown" || p.Code != protocol.CodeInternalError || !p.Retryable ||
		em.Message.Intent != protocol.IntentNotify || em.Envelope.Recipient.Channel != protocol.ChannelNotification {
		t.Fatalf("error = %+v %+v", em.Envelope, p)
	}
	// A sentinel has no message: the registry's description is used.
	em, _ = b.Error(nil, "acme:host-9:unknown", protocol.ErrAgentNotFound)
	_ = protocol.DecodePayload(em, &p)
	if p.Message == "" {
		t.Fatal("empty error message")
	}
}

func TestBuilder_EventAndHeartbeat(t *testing.T) {
	b := newTestBuilder(t, "acme:host-1:planner")
	ev, err := b.Event("*:*:builder", protocol.IntentNotify, protocol.EventPayload{EventType: "deploy", Severity: protocol.SeverityInfo})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.Heartbeat(protocol.HeartbeatPayload{Status: protocol.StatusAlive, Load: 0.25, ActiveTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*protocol.Message{ev, hb} {
		if m.Envelope.CorrelationID != "" {
			t.Errorf("%s has a correlation_id", m.Message.Type)
		}
		if err := validate(m); err != nil {
			t.Errorf("%s: %v", m.Message.Type, err)
		}
	}
	if hb.Envelope.Recipient.AgentID != protocol.Broadcast || hb.Envelope.Recipient.Channel != protocol.ChannelHealth {
		t.Fatalf("heartbeat envelope = %+v", hb.Envelope)
	}
}

func TestBuilder_RefusesBadInput(t *testing.T) {
	if _, err := protocol.NewBuilder("*:*:x", fixedKey(t), nil); err == nil {
		t.Error("wildcard sender accepted")
	}
	if _, err := protocol.NewBuilder("a:b:c", nil, nil); err == nil {
		t.Error("nil key accepted")
	}
	b := newTestBuilder(t, "a:b:c")
	for _, p := range []any{[]int{1}, "text", json.RawMessage(`[1]`)} {
		m, err := b.Request("a:b:d", protocol.IntentQuery, p)
		if err == nil {
			err = validate(m)
		}
		wantCode(t, err, protocol.CodePayloadInvalid)
	}
}

func TestBuilder_SealKeepsWhatIsSetAndOwnsTheSender(t *testing.T) {
	b := newTestBuilder(t, "acme:host-1:planner")
	m := mustDecode(t, `{"envelope":{"message_id":"0190f5a4-7c3e-7000-8000-000000000001","sender":{"agent_id":"evil:x:y"},
		"recipient":{"agent_id":"a:b:c"},"ttl_seconds":60},"message":{"type":"request","intent":"query","payload":{}}}`)
	if err := b.Seal(m); err != nil {
		t.Fatal(err)
	}
	if m.Envelope.MessageID != "0190f5a4-7c3e-7000-8000-000000000001" || m.Envelope.TTLSeconds != 60 ||
		m.Envelope.Sender.AgentID != "acme:host-1:planner" || m.Envelope.Recipient.Channel != protocol.ChannelQuery {
		t.Fatalf("Seal = %+v", m.Envelope)
	}
	if err := protocol.Verify(m); err != nil {
		t.Fatal(err)
	}
	if b.AgentID() != "acme:host-1:planner" || b.PeerID().String() != m.Envelope.Sender.PeerID || !b.Now().Equal(fixedNow) {
		t.Fatal("builder accessors")
	}
}
