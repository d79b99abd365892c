package api

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// elizaRequest is ElizaOS section 4.1's TASK_REQUEST, addressed to agent to.
func elizaRequest(t *testing.T, to string) string {
	t.Helper()
	raw, err := os.ReadFile("../dialect/testdata/elizaos/s4.1-task-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["receiver"] = map[string]any{"agent_id": to}
	out, _ := json.Marshal(doc)
	return string(out)
}

func postDoc(t *testing.T, s *Server, query, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(testCtx(t, 20*time.Second), http.MethodPost, s.URL()+MessagePath+query, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Token())
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, raw
}

// An agent that speaks ElizaOS posts its TASK_REQUEST unchanged; it crosses the mesh as a
// signed IACP request, the IACP agent answers, and the answer comes back as an ElizaOS
// TASK_ACCEPT whose in_reply_to is the request's reply_with.
func TestDialect_ElizaOSRequestIsCarriedAsIACPAndAnsweredInElizaOS(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	agentDone := make(chan error, 1)
	got := make(chan *protocol.Message, 1)
	go func() {
		doc, err := m.clients[1].Inbox(ctx, 0, 10*time.Second)
		if err == nil && len(doc.Messages) > 0 {
			got <- decoded(t, doc.Messages[0].Message)
		}
		agentDone <- err
	}()
	go func() { _ = answerOnce(ctx, m.clients[1], agentName(1)) }()
	resp, raw := postDoc(t, m.servers[0], "?wait=10s", "application/json", elizaRequest(t, agentName(1)))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json; dialect=elizaos" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	if resp.ContentLength != int64(len(raw)) {
		t.Fatalf("Content-Length %d for %d bytes: a client cannot refuse a dialect answer larger than it reads", resp.ContentLength, len(raw))
	}
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if answer["performative"] != "TASK_ACCEPT" || answer["in_reply_to"] != "debug-task-42" {
		t.Fatalf("answer %s", raw)
	}
	if err := <-agentDone; err != nil {
		t.Fatal(err)
	}
	req := <-got
	if req.Message.Type != protocol.TypeRequest || req.Message.Intent != protocol.IntentHandoff ||
		req.Envelope.Sender.AgentID != agentName(0) || protocol.Verify(req) != nil {
		t.Fatalf("the IACP agent got %+v", req.Envelope)
	}
}

// An agent that speaks ACP v2 posts an AgentCommand (its id no UUID, its context naming the
// pipeline's previous command); the answer comes back as an AgentResponse whose commandId is
// the command's own id.
func TestDialect_ACPv2CommandIsAnsweredByAnAgentResponse(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	raw, err := os.ReadFile("../dialect/testdata/acp-v2/pattern-4-pipeline-implement.json")
	if err != nil {
		t.Fatal(err)
	}
	var cmd map[string]any
	if err := json.Unmarshal(raw, &cmd); err != nil {
		t.Fatal(err)
	}
	cmd["id"], cmd["to"] = "cmd-impl-1", agentName(1)
	body, _ := json.Marshal(cmd)
	go func() { _ = answerOnce(ctx, m.clients[1], agentName(1)) }()
	resp, out := postDoc(t, m.servers[0], "?wait=10s", "application/json", string(body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json; dialect=acp-v2" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	var answer map[string]any
	if err := json.Unmarshal(out, &answer); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if answer["commandId"] != "cmd-impl-1" || answer["status"] != "success" || answer["version"] != "2.0" {
		t.Fatalf("answer %s", out)
	}
}

// An agent that speaks A2ACP posts the draft's request (without its placeholder token, which
// the recipient's node would refuse); it crosses the mesh as an IACP request with the custom
// intent x-provision_test_dataset, and the IACP agent's answer comes back as an A2ACP response
// carrying the request's correlation_id.
func TestDialect_A2ACPRequestIsAnsweredInA2ACP(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	raw, err := os.ReadFile("../dialect/testdata/a2acp/request.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["target_agent"] = map[string]any{"agent_id": agentName(1), "domain": "test", "version": "1.0.0"}
	delete(doc, "security")
	body, _ := json.Marshal(doc)
	got := make(chan *protocol.Message, 1)
	go func() {
		if in, err := m.clients[1].Inbox(ctx, 0, 10*time.Second); err == nil && len(in.Messages) > 0 {
			got <- decoded(t, in.Messages[0].Message)
		}
		_ = answerOnce(ctx, m.clients[1], agentName(1))
	}()
	resp, out := postDoc(t, m.servers[0], "?wait=10s", "application/json", string(body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json; dialect=a2acp" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	var answer struct {
		MessageType string `json:"message_type"`
		Intent      string
		Payload     struct {
			CorrelationID string `json:"correlation_id"`
			Status        string
		}
	}
	if err := json.Unmarshal(out, &answer); err != nil || answer.MessageType != "response" || answer.Intent != "provision_test_dataset" ||
		answer.Payload.CorrelationID != "correlation-789" || answer.Payload.Status != protocol.ResponseAccepted {
		t.Fatalf("answer %s (%v)", out, err)
	}
	req := <-got
	if req.Message.Type != protocol.TypeRequest || req.Message.Intent != "x-provision_test_dataset" ||
		req.Envelope.CorrelationID != "correlation-789" || protocol.Verify(req) != nil {
		t.Fatalf("the IACP agent got %+v %s/%s", req.Envelope, req.Message.Type, req.Message.Intent)
	}
}

// A named dialect wins over recognition; a wrong or unknown one is refused, naming the field.
func TestDialect_NamedDialectsAndRefusals(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	s := m.servers[0]
	for _, c := range []struct {
		name, query, ct, body string
		status                int
		want                  string
	}{
		{"unknown dialect", "?dialect=klingon", "application/json", elizaRequest(t, agentName(1)), 400, `klingon\" is unknown`},
		{"disagreeing names", "?dialect=elizaos", "application/json; dialect=iacp-1.0", elizaRequest(t, agentName(1)), 400, "disagree"},
		{"named, but not that dialect", "?dialect=iacp-1.0", "application/json", elizaRequest(t, agentName(1)), 400, "iacp-1.0 document"},
		{"bad A2ACP document", "?dialect=a2acp", "application/json", `{"protocol_version":"1.0","source_agent":{},"target_agent":{}}`, 400, "a2acp document: /message_id is required"},
		{"bad ACP v2 command", "", "application/json", `{"version":"2.0","action":"FLY"}`, 400, "acp-v2 document"},
		{"YAML of another draft", "?dialect=elizaos", "application/x-yaml", "performative: TASK_REQUEST\n", 400, "is JSON"},
		{"bad ElizaOS document", "", "application/json", `{"performative":"TASK_REQUEST","mcp_version":"0.1.0"}`, 400, "elizaos document"},
	} {
		resp, raw := postDoc(t, s, c.query, c.ct, c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(raw), c.want) {
			t.Errorf("%s: status %d: %s; want %d containing %q", c.name, resp.StatusCode, raw, c.status, c.want)
		}
	}
	// Named through the media type, delivered without waiting.
	resp, raw := postDoc(t, s, "", "application/json; dialect=elizaos", elizaRequest(t, agentName(1)))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("named by media type: status %d: %s", resp.StatusCode, raw)
	}
}

// An ElizaOS agent on the WebSocket (?dialect=elizaos) receives an IACP agent's request as a
// TASK_REQUEST, answers with its own TASK_ACCEPT, and the IACP agent gets an IACP response
// correlated to its request.
func TestDialect_WebSocketAgentSpeaksElizaOS(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	ctx := testCtx(t, 20*time.Second)
	c, _, err := websocket.Dial(ctx, "ws://"+m.servers[1].Addr()+ConnectPath+"?dialect=elizaos", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + m.servers[1].Token()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	res, err := m.clients[0].Send(ctx, request(agentName(1), protocol.IntentHandoff, `{"task":"review"}`))
	if err != nil {
		t.Fatal(err)
	}
	var task map[string]any
	for task == nil {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if json.Unmarshal(data, &doc) == nil && doc["performative"] != nil {
			task = doc
		}
	}
	if task["performative"] != "TASK_REQUEST" || task["message_id"] != res.MessageID {
		t.Fatalf("the ElizaOS agent got %v", task)
	}
	answer, _ := json.Marshal(map[string]any{
		"mcp_version": "0.1.0", "message_id": "3f2b8c1e-9d4a-4c6b-8e2f-1a7d5c9b0e34", "performative": "TASK_ACCEPT",
		"sender": map[string]any{"agent_id": agentName(1)}, "receiver": map[string]any{"agent_id": agentName(0)},
		"in_reply_to": res.MessageID, "timestamp": time.Now().UTC().Format(time.RFC3339), "payload": map[string]any{},
	})
	if err := c.Write(ctx, websocket.MessageText, answer); err != nil {
		t.Fatal(err)
	}
	if f := readResult(t, ctx, c); f.Sent == "" {
		t.Fatalf("the TASK_ACCEPT was not sent: %+v", f.Error)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"ack":"`+res.MessageID+`"}`)); err != nil {
		t.Fatal(err)
	}
	inbox, err := m.clients[0].Inbox(ctx, 0, 10*time.Second)
	if err != nil || len(inbox.Messages) != 1 {
		t.Fatalf("inbox %+v, %v", inbox, err)
	}
	got := inbox.Messages[0].Message
	if got.Message.Type != apiclient.TypeResponse || got.Envelope.CorrelationID != res.MessageID || got.Envelope.Sender.AgentID != agentName(1) {
		t.Fatalf("the IACP agent got %+v", got.Envelope)
	}
	// A dialect the node does not know is refused before the upgrade.
	_, resp, err := websocket.Dial(ctx, "ws://"+m.servers[1].Addr()+ConnectPath+"?dialect=klingon", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + m.servers[1].Token()}},
	})
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown dialect: %v, %v", resp, err)
	}
}

// QUERY_CAPABILITIES is answered by the recipient's node, from its agent's manifest, as
// INFORM_CAPABILITIES (the agent is not asked).
func TestDialect_QueryCapabilitiesIsAnsweredByTheNode(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	raw, err := os.ReadFile("../dialect/testdata/elizaos/s4.8-query-capabilities.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["receiver"] = map[string]any{"agent_id": agentName(1)}
	body, _ := json.Marshal(doc)
	resp, out := postDoc(t, m.servers[0], "?wait=10s", "application/json", string(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	var answer map[string]any
	if err := json.Unmarshal(out, &answer); err != nil {
		t.Fatal(err)
	}
	if answer["performative"] != "INFORM_CAPABILITIES" || !strings.Contains(string(out), "tool1") {
		t.Fatalf("answer %s", out)
	}
}
