package api

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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
			got <- doc.Messages[0].Message
		}
		agentDone <- err
	}()
	go func() { _ = answerOnce(ctx, m.clients[1], agentName(1)) }()
	resp, raw := postDoc(t, m.servers[0], "?wait=10s", "application/json", elizaRequest(t, agentName(1)))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json; dialect=elizaos" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
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
		{"not yet translated", "?dialect=a2acp", "application/json", `{"protocol_version":"1.0","source_agent":{},"target_agent":{}}`, 422, "a2acp is recognised but not yet translated"},
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
