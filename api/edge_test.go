package api

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// A send to an agent nothing knows is 404 AGENT_NOT_FOUND at once, not accepted and retried;
// ?queue_unknown=true queues it (202 queued), and DELETE /v1/outbox/{id} cancels it.
func TestSend_UnknownAgentIs404UnlessQueued(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	c := m.clients[0]
	_, err := c.Send(ctx, request("test:api:typo", protocol.IntentHandoff, `{}`))
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code() != string(protocol.CodeAgentNotFound) {
		t.Fatalf("send to a typo: %v; want 404 AGENT_NOT_FOUND", err)
	}
	res, err := c.SendWith(ctx, request("test:api:later", protocol.IntentHandoff, `{}`), apiclient.SendOptions{QueueUnknown: true})
	if err != nil || res.Status != "queued" {
		t.Fatalf("send with queue_unknown: %+v, %v; want queued", res, err)
	}
	if _, err := c.CancelOutbox(ctx, res.MessageID); err != nil {
		t.Fatalf("cancel the queued message: %v", err)
	}
	if _, err := c.CancelOutbox(ctx, res.MessageID); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("cancel it again: %v; want 404", err)
	}
	if doc, err := c.Outbox(ctx); err != nil || len(doc.Entries) != 0 {
		t.Fatalf("outbox after the cancel: %+v, %v", doc, err)
	}
}

// A request to the node's own agent is answered by that agent (here an agent that answers
// from its inbox through the API).
func TestRequest_ToOwnAgent(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	done := make(chan error, 1)
	go func() { done <- answerOnce(ctx, m.clients[0], agentName(0)) }()
	resp, err := m.clients[0].Request(ctx, request(agentName(0), protocol.IntentHandoff, `{"task":"self"}`), 10*time.Second)
	if err != nil {
		t.Fatalf("request to the own agent: %v", err)
	}
	if resp.Envelope.Sender.AgentID != agentName(0) || resp.Message.Type != apiclient.TypeResponse {
		t.Fatalf("answer %+v", resp.Envelope)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
