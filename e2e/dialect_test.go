package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// A conversation in each dialect, between an agent that speaks it and one that
// speaks IACP, both ways, through the HTTP API of two real nodes. Node a's agent speaks the
// dialect (run --dialect elizaos, and ?dialect= for the other drafts: the per-client
// declaration); node b's speaks IACP.
//
//   - The dialect agent asks: its request crosses as IACP, the IACP agent answers, and the
//     answers reach the dialect agent's inbox in its draft, correlated as its draft says.
//   - The IACP agent asks: the dialect agent reads the request in its draft, answers in it,
//     and the IACP agent gets IACP answers correlated to its request's message_id.
//
// Then node a lists the conversation by the id the dialect gave it.
func TestDialects_ConversationsBothWaysThroughTheRealBinary(t *testing.T) {
	a, b := dialectPair(t)
	for _, c := range dialectCases() {
		t.Run(c.name+"/dialect-agent-asks", func(t *testing.T) { c.dialectAsks(t, a, b) })
		t.Run(c.name+"/iacp-agent-asks", func(t *testing.T) { c.iacpAsks(t, a, b) })
	}
}

const (
	dialectAgent = "e2e:lab:alice"
	iacpAgent    = "e2e:lab:bob"
)

// dialectPair starts b (IACP) and a (ElizaOS by its config flag), a joined through b.
func dialectPair(t *testing.T) (a, b *proc) {
	t.Helper()
	b = newProc(t, "b", iacpAgent)
	b.start()
	a = joinProc(t, "a", dialectAgent, b)
	a.boot = b.peerAddr()
	a.args = []string{"--dialect", "elizaos"}
	a.start()
	return a, b
}

// dialectCase is one draft's conversation: what its agent sends, and how its answers
// correlate.
type dialectCase struct {
	name string
	// request is the dialect agent's request to `to`; conv is the conversation id it names.
	request func(to string) (doc map[string]any, conv string)
	// iacpAnswers are the IACP agent's answer payloads to it; shown checks each answer as the
	// dialect agent reads it (i counts from 0).
	iacpAnswers []string
	shown       func(t *testing.T, i int, answer, request map[string]any)
	// answers are the dialect agent's answers to a request it was shown.
	answers func(shown map[string]any) []map[string]any
	// wantIACP are the IACP statuses of those answers, as the IACP agent gets them.
	wantIACP []string
}

func (c dialectCase) dialectAsks(t *testing.T, a, b *proc) {
	req, conv := c.request(iacpAgent)
	postDocument(t, a, "", req, http.StatusAccepted)
	got := waitItems(t, b, "?dialect=iacp", 1)
	r := got[0]["message"].(map[string]any)
	env := r["envelope"].(map[string]any)
	id := env["message_id"].(string)
	for _, p := range c.iacpAnswers {
		answer := map[string]any{
			"envelope": map[string]any{"recipient": map[string]any{"agent_id": dialectAgent}, "correlation_id": id},
			"message":  map[string]any{"type": "response", "intent": r["message"].(map[string]any)["intent"], "payload": json.RawMessage(p)},
		}
		postDocument(t, b, "", answer, http.StatusAccepted)
	}
	ackAll(t, b, got)
	shown := waitItems(t, a, "?dialect="+c.name, len(c.iacpAnswers))
	for i, it := range shown {
		if it["dialect"] != c.name {
			t.Fatalf("answer %d is in %v, want %s: %v", i, it["dialect"], c.name, it)
		}
		c.shown(t, i, it["message"].(map[string]any), req)
	}
	ackAll(t, a, shown)
	listed := conversation(t, a, conv)
	if !strings.Contains(listed, "sent request") || strings.Count(listed, "received response") != len(c.iacpAnswers) {
		t.Fatalf("conversation %s on a: %s", conv, listed)
	}
}

func (c dialectCase) iacpAsks(t *testing.T, a, b *proc) {
	req := map[string]any{
		"envelope": map[string]any{"recipient": map[string]any{"agent_id": dialectAgent}},
		"message": map[string]any{"type": "request", "intent": "handoff",
			"payload": map[string]any{"task_type": "review", "action": "ANALYZE", "file": "main.go"}},
	}
	var sent struct {
		MessageID string `json:"message_id"`
	}
	json.Unmarshal(postDocument(t, b, "", req, http.StatusAccepted), &sent)
	got := waitItems(t, a, "?dialect="+c.name, 1)
	shown := got[0]["message"].(map[string]any)
	for _, ans := range c.answers(shown) {
		postDocument(t, a, "", ans, http.StatusAccepted)
	}
	ackAll(t, a, got)
	answers := waitItems(t, b, "?dialect=iacp", len(c.wantIACP))
	for i, it := range answers {
		m := it["message"].(map[string]any)
		env, body := m["envelope"].(map[string]any), m["message"].(map[string]any)
		status := body["payload"].(map[string]any)["status"]
		if env["correlation_id"] != sent.MessageID || env["sender"].(map[string]any)["agent_id"] != dialectAgent || status != c.wantIACP[i] {
			t.Fatalf("answer %d: correlated to %v (want %s), status %v (want %s): %v", i, env["correlation_id"], sent.MessageID, status, c.wantIACP[i], m)
		}
	}
	ackAll(t, b, answers)
	if listed := conversation(t, b, sent.MessageID); strings.Count(listed, "received response") != len(c.wantIACP) {
		t.Fatalf("conversation %s on b: %s", sent.MessageID, listed)
	}
}

func dialectCases() []dialectCase {
	return []dialectCase{elizaCase(), acpCase(), iacp1Case(), a2acpCase()}
}

// ElizaOS: TASK_REQUEST, TASK_ACCEPT, INFORM_RESULT, in_reply_to the request's reply_with.
func elizaCase() dialectCase {
	return dialectCase{
		name: "elizaos",
		request: func(to string) (map[string]any, string) {
			conv := "task-" + uuid.NewString()[:8]
			return map[string]any{"mcp_version": "0.1.0", "message_id": uuid.NewString(), "performative": "TASK_REQUEST",
				"sender": map[string]any{"agent_id": dialectAgent}, "receiver": map[string]any{"agent_id": to}, "reply_with": conv,
				"language": "application/json", "ontology": "software_development", "timestamp": "2026-11-23T10:00:00Z",
				"payload": map[string]any{"task_type": "debug_code", "priority": "high"}}, conv
		},
		iacpAnswers: []string{`{"status":"accepted"}`, `{"status":"accepted","task_status":"success","result":{"fixed":true}}`},
		shown: func(t *testing.T, i int, ans, req map[string]any) {
			want := []string{"TASK_ACCEPT", "INFORM_RESULT"}[i]
			if ans["performative"] != want || ans["in_reply_to"] != req["reply_with"] {
				t.Fatalf("answer %d: %v in_reply_to %v; want %s in_reply_to %v", i, ans["performative"], ans["in_reply_to"], want, req["reply_with"])
			}
		},
		answers: func(shown map[string]any) []map[string]any {
			inReplyTo := shown["message_id"]
			if rw, ok := shown["reply_with"]; ok {
				inReplyTo = rw
			}
			base := func(perf string, payload map[string]any) map[string]any {
				return map[string]any{"mcp_version": "0.1.0", "message_id": uuid.NewString(), "performative": perf,
					"sender": map[string]any{"agent_id": dialectAgent}, "receiver": shown["sender"], "in_reply_to": inReplyTo,
					"timestamp": "2026-11-23T10:00:01Z", "payload": payload}
			}
			return []map[string]any{base("TASK_ACCEPT", map[string]any{}),
				base("INFORM_RESULT", map[string]any{"task_status": "success", "result": map[string]any{"issues": 0}})}
		},
		wantIACP: []string{"accepted", "accepted"},
	}
}

// ACP v2: AgentCommand (an id of its own, no UUID), then AgentResponse with that commandId.
func acpCase() dialectCase {
	return dialectCase{
		name: "acp-v2",
		request: func(to string) (map[string]any, string) {
			conv := "pipeline-" + uuid.NewString()[:8]
			return map[string]any{"id": "cmd-" + uuid.NewString()[:8], "timestamp": "2026-11-23T10:00:00.000Z", "version": "2.0",
				"from": dialectAgent, "to": to, "priority": "high", "action": "ANALYZE",
				"parameters": map[string]any{"file": "src/main.ts"}, "context": map[string]any{"correlationId": conv, "timeout": 30000}}, conv
		},
		iacpAnswers: []string{`{"status":"accepted","findings":[]}`},
		shown: func(t *testing.T, _ int, ans, req map[string]any) {
			if ans["commandId"] != req["id"] || ans["status"] != "success" || ans["version"] != "2.0" {
				t.Fatalf("AgentResponse %v; want commandId %v, success", ans, req["id"])
			}
		},
		answers: func(shown map[string]any) []map[string]any {
			// An AgentResponse names no recipient: the node addresses it to the command's sender.
			return []map[string]any{{"id": uuid.NewString(), "commandId": shown["id"], "timestamp": "2026-11-23T10:00:01.000Z",
				"version": "2.0", "from": dialectAgent, "status": "success", "results": map[string]any{"summary": "clean"}}}
		},
		wantIACP: []string{"accepted"},
	}
}

// IaCP 1.0: task_request, task_response in progress, then completed; parent_message_id is
// the request's message_id, conversation_id the conversation.
func iacp1Case() dialectCase {
	return dialectCase{
		name: "iacp-1.0",
		request: func(to string) (map[string]any, string) {
			conv := "conv-" + uuid.NewString()[:8]
			return map[string]any{"iacp_version": "1.0", "message_id": uuid.NewString(), "timestamp": "2026-11-23T10:00:00Z",
				"sender": map[string]any{"agent_id": dialectAgent}, "recipient": map[string]any{"agent_id": to},
				"message_type": "task_request", "conversation_id": conv,
				"payload": map[string]any{"task_type": "summarise", "description": "the report"}}, conv
		},
		iacpAnswers: []string{`{"status":"pending","progress":0.5}`, `{"status":"accepted","result":"done"}`},
		shown: func(t *testing.T, i int, ans, req map[string]any) {
			want := []string{"in_progress", "accepted"}[i]
			p, _ := ans["payload"].(map[string]any)
			if ans["message_type"] != "task_response" || ans["parent_message_id"] != req["message_id"] || p["status"] != want {
				t.Fatalf("answer %d: %v; want a task_response %s to %v", i, ans, want, req["message_id"])
			}
		},
		answers: func(shown map[string]any) []map[string]any {
			base := func(payload map[string]any) map[string]any {
				return map[string]any{"iacp_version": "1.0", "message_id": uuid.NewString(), "timestamp": "2026-11-23T10:00:01Z",
					"sender": map[string]any{"agent_id": dialectAgent}, "recipient": shown["sender"],
					"message_type": "task_response", "parent_message_id": shown["message_id"], "payload": payload}
			}
			return []map[string]any{base(map[string]any{"status": "in_progress", "progress": 0.5}),
				base(map[string]any{"status": "completed", "result": "summary"})}
		},
		wantIACP: []string{"pending", "accepted"},
	}
}

// A2ACP: request, then response, correlated by payload.correlation_id.
func a2acpCase() dialectCase {
	agent := func(id string) map[string]any {
		return map[string]any{"agent_id": id, "domain": "e2e", "version": "1.2.3"}
	}
	return dialectCase{
		name: "a2acp",
		request: func(to string) (map[string]any, string) {
			conv := "correlation-" + uuid.NewString()[:8]
			return map[string]any{"protocol_version": "1.0", "message_id": uuid.NewString(), "timestamp": "2026-11-23T10:00:00Z",
				"source_agent": agent(dialectAgent), "target_agent": agent(to), "message_type": "request",
				"intent": "provision_test_dataset", "payload": map[string]any{"dataset_type": "demographics", "correlation_id": conv}}, conv
		},
		iacpAnswers: []string{`{"status":"accepted","dataset_id":"dataset-abc"}`},
		shown: func(t *testing.T, _ int, ans, req map[string]any) {
			p, _ := ans["payload"].(map[string]any)
			want := req["payload"].(map[string]any)["correlation_id"]
			if ans["message_type"] != "response" || p["correlation_id"] != want || p["dataset_id"] != "dataset-abc" {
				t.Fatalf("A2ACP answer %v; want a response with correlation_id %v", ans, want)
			}
		},
		answers: func(shown map[string]any) []map[string]any {
			corr := shown["message_id"]
			if p, ok := shown["payload"].(map[string]any); ok && p["correlation_id"] != nil {
				corr = p["correlation_id"]
			}
			answer := map[string]any{"protocol_version": "1.0", "message_id": uuid.NewString(), "timestamp": "2026-11-23T10:00:01Z",
				"source_agent": agent(dialectAgent), "target_agent": shown["source_agent"], "message_type": "response",
				"payload": map[string]any{"status": "accepted", "correlation_id": corr}}
			if intent, ok := shown["intent"]; ok {
				answer["intent"] = intent
			}
			return []map[string]any{answer}
		},
		wantIACP: []string{"accepted"},
	}
}

// postDocument posts doc as it is (recognised by its members) and checks the status.
func postDocument(t *testing.T, p *proc, query string, doc map[string]any, want int) []byte {
	t.Helper()
	raw, _ := json.Marshal(doc)
	req, _ := http.NewRequest("POST", p.url("/.well-known/iacp/v1/message"+query), bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s to %s: %d %s; want %d", raw, p.name, resp.StatusCode, body, want)
	}
	return body
}

// waitItems waits up to 20 s until p's inbox holds n items, and returns them.
func waitItems(t *testing.T, p *proc, query string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body, err := p.do("GET", "/v1/inbox"+query+"&wait=1s", nil)
		var page struct {
			Messages []map[string]any `json:"messages"`
		}
		if err == nil && code == 200 && json.Unmarshal(body, &page) == nil && len(page.Messages) >= n {
			return page.Messages
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's inbox: %d %s %v; want %d messages", p.name, code, body, err, n)
		}
	}
}

func ackAll(t *testing.T, p *proc, items []map[string]any) {
	t.Helper()
	for _, it := range items {
		if err := p.ack(it["message_id"].(string)); err != nil {
			t.Fatal(err)
		}
	}
}

// conversation lists conversation id with the CLI, as "event type" lines.
func conversation(t *testing.T, p *proc, id string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := runCLI(p, "conversation", id, "-o", "json")
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var e struct{ Event, Type string }
			if json.Unmarshal([]byte(l), &e) == nil {
				lines = append(lines, e.Event+" "+e.Type)
			}
		}
		listed := strings.Join(lines, ", ")
		if err == nil && strings.Contains(listed, "received") || time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("conversation %s: %v: %s", id, err, out)
			}
			return listed
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runCLI runs the binary's client command args against p's API.
func runCLI(p *proc, args ...string) (string, error) {
	cmd := execBinary(append(args, "--data-dir", p.dir, "--api", fmt.Sprintf("127.0.0.1:%d", p.apiPort))...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func execBinary(args ...string) *exec.Cmd { return exec.Command(binary, args...) }
