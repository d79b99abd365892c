package api

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A broadcast query through the local API: agent 0 asks the group tool1 over POST /v1/ask;
// agent 1, an inbox agent of its own local API, takes the query from its inbox and answers by
// POSTing its response; agent 2 is not in the group and gets nothing.
func TestAsk_InboxAgentAnswersThroughTheAPI(t *testing.T) {
	m := newAPIMesh(t, 3, meshOpts{node: func(int) []node.Option {
		return []node.Option{node.WithGossip(true), node.WithHeartbeatInterval(time.Second)}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for answerOnce(ctx, m.clients[1], agentName(1)) == nil {
		}
	}()
	defer func() { cancel(); <-done }()

	var res AskDoc
	testsupport.WaitFor(t, 30*time.Second, "agent 1 answering the query", func() bool {
		var err error
		res, err = m.clients[0].Ask(ctx, AskRequest{Group: "tool1", Intent: "handoff", Payload: json.RawMessage(`{"task":"t"}`),
			Deadline: "3s", Expect: []string{agentName(1)}})
		if err != nil {
			t.Logf("ask: %v", err)
		}
		return err == nil && len(res.Answers) == 1
	})
	a := res.Answers[0]
	var body struct{ Status, By string }
	if err := json.Unmarshal(a.Payload, &body); err != nil || a.AgentID != agentName(1) || body.By != agentName(1) || a.Status != "accepted" {
		t.Fatalf("answer %+v", a)
	}
	if res.Ended != "expected" || len(res.Missing) != 0 || res.QueryID == "" || res.Group != "tool1" {
		t.Fatalf("query %+v", res)
	}
	if got := m.nodes[2].Inbox().List(0); len(got) != 0 {
		t.Fatalf("agent 2, not in the group, got %d messages", len(got))
	}
}

// Bad input to POST /v1/ask is answered 400 PAYLOAD_INVALID with what to do.
func TestAsk_BadInput(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{node: func(int) []node.Option { return []node.Option{node.WithGossip(true)} }})
	ctx := testCtx(t, 20*time.Second)
	for _, req := range []AskRequest{
		{Deadline: "soon"},
		{Deadline: "-1s"},
		{Intent: "notify"},
		{Group: "no spaces"},
		{Count: node.MaxAskAnswers + 1},
	} {
		var ae *apiclient.APIError
		_, err := m.clients[0].Ask(ctx, req)
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code() != string(protocol.CodePayloadInvalid) {
			t.Fatalf("%+v: %v, want 400 PAYLOAD_INVALID", req, err)
		}
	}
	off := newAPIMesh(t, 1, meshOpts{})
	var ae *apiclient.APIError
	if _, err := off.clients[0].Ask(ctx, AskRequest{}); !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("without gossip: %v, want 503", err)
	}
}

// A webhook agent answers a query in its HTTP answer, as it answers any request.
func TestAsk_WebhookAgentAnswers(t *testing.T) {
	hook := newHookAgent(t, 0)
	m := newAPIMesh(t, 2, meshOpts{
		node: func(int) []node.Option {
			return []node.Option{node.WithGossip(true), node.WithHeartbeatInterval(time.Second)}
		},
		server: func(i int) []Option {
			if i == 1 {
				return []Option{WithWebhook(hook.URL(), "hook-secret")}
			}
			return nil
		},
	})
	ctx := testCtx(t, 60*time.Second)
	var res AskDoc
	testsupport.WaitFor(t, 30*time.Second, "the webhook agent answering the query", func() bool {
		var err error
		res, err = m.clients[0].Ask(ctx, AskRequest{Group: "tool1", Intent: "handoff", Deadline: "3s", Count: 1})
		return err == nil && len(res.Answers) == 1
	})
	var body struct{ Detail string }
	if err := json.Unmarshal(res.Answers[0].Payload, &body); err != nil || body.Detail != "from-hook" || res.Answers[0].AgentID != agentName(1) {
		t.Fatalf("answer %+v", res.Answers[0])
	}
}
