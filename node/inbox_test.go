package node

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// With the inbox on, a request no Go handler takes waits in the inbox; the agent answers it
// later with a response correlated to it, and the requester gets that answer.
func TestInbox_RequestWaitsUntilAgentAnswers(t *testing.T) {
	m := newMesh(t, 2, nil, func(i int, _ *mesh) []Option { return []Option{WithInbox(i == 1)} })
	a, b := m.nodes[0], m.nodes[1]
	req, _ := a.Builder().Request(agentName(1), protocol.IntentHandoff, map[string]any{"task": "x"})
	done := make(chan error, 1)
	var resp *protocol.Message
	go func() {
		var err error
		resp, err = a.Request(testCtx(t), req)
		done <- err
	}()
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	ds, err := b.Inbox().Wait(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Msg.Envelope.MessageID != req.Envelope.MessageID {
		t.Fatalf("inbox holds %d messages, want the request", len(ds))
	}
	answer, _ := b.Builder().Response(ds[0].Msg, protocol.ResponseAccepted, map[string]any{"ok": true})
	if err := b.Send(ctx, answer); err != nil {
		t.Fatal(err)
	}
	if err := b.Inbox().Ack(req.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if resp.Envelope.CorrelationID != req.Envelope.MessageID || b.Inbox().Len() != 0 {
		t.Fatal("answer not correlated, or inbox not emptied by Ack")
	}
	if err := b.Inbox().Ack(req.Envelope.MessageID); err == nil {
		t.Fatal("a second Ack of the same message must say it is gone")
	}
}
