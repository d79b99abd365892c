package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// speaks makes node i's agent speak dialect d, the others IACP.
func speaks(i int, d string) meshOpts {
	return meshOpts{node: func(j int) []node.Option {
		if j == i {
			return []node.Option{node.WithDialect(d)}
		}
		return nil
	}}
}

// rawInbox is GET /v1/inbox as an agent of any dialect reads it: the items' messages as
// documents, waiting up to 10 s for at least want of them.
func rawInbox(t *testing.T, s *Server, query string, want int) []map[string]json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(testCtx(t, 20*time.Second), http.MethodGet, s.URL()+"/v1/inbox?wait=2s"+query, nil)
		req.Header.Set("Authorization", "Bearer "+s.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Messages []map[string]json.RawMessage `json:"messages"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) >= want || time.Now().After(deadline) {
			if len(page.Messages) < want {
				t.Fatalf("inbox holds %d messages, want %d", len(page.Messages), want)
			}
			return page.Messages
		}
	}
}

// doc decodes a JSON object's members as strings where they are strings.
func doc(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return m
}

// elizaAnswer is an ElizaOS agent's answer: performative, in_reply_to, payload.
func elizaAnswer(from, to, performative, inReplyTo, payload string) string {
	return `{"mcp_version":"0.1.0","message_id":"` + newUUID() + `","performative":"` + performative +
		`","sender":{"agent_id":"` + from + `"},"receiver":{"agent_id":"` + to + `"},"in_reply_to":"` + inReplyTo +
		`","timestamp":"2026-11-23T10:00:00Z","payload":` + payload + `}`
}

func newUUID() string { return uuid.NewString() }

// An agent configured to speak ElizaOS (dialect: elizaos) reads an IACP agent's request from
// its inbox as a TASK_REQUEST whose reply_with is the IACP conversation, answers it with
// TASK_ACCEPT and then INFORM_RESULT in_reply_to that, and the IACP agent gets two IACP
// responses correlated to its request's message_id, as IACP answers are.
func TestAgentDialect_ElizaOSAgentAnswersAnIACPRequestFromItsInbox(t *testing.T) {
	m := newAPIMesh(t, 2, speaks(1, "elizaos"))
	ctx := testCtx(t, 30*time.Second)
	req := request(agentName(1), protocol.IntentHandoff, `{"task_type":"debug","description":"fix it"}`)
	req.Envelope.CorrelationID = "conv-7"
	res, err := m.clients[0].Send(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	items := rawInbox(t, m.servers[1], "", 1)
	it := items[0]
	var id, d string
	_ = json.Unmarshal(it["message_id"], &id)
	_ = json.Unmarshal(it["dialect"], &d)
	shown := doc(t, it["message"])
	if id != res.MessageID || d != "elizaos" || shown["performative"] != "TASK_REQUEST" || shown["reply_with"] != "conv-7" || shown["message_id"] != id {
		t.Fatalf("the ElizaOS agent was shown %s (id %q, dialect %q)", it["message"], id, d)
	}
	for _, a := range []string{
		elizaAnswer(agentName(1), agentName(0), "TASK_ACCEPT", "conv-7", `{}`),
		elizaAnswer(agentName(1), agentName(0), "INFORM_RESULT", "conv-7", `{"task_status":"success","result":{"fixed":true}}`),
	} {
		if resp, raw := postDoc(t, m.servers[1], "", "application/json", a); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("answer refused: %d %s", resp.StatusCode, raw)
		}
	}
	if err := m.clients[1].Ack(ctx, id); err != nil {
		t.Fatal(err)
	}
	var answers []*protocol.Message
	for len(answers) < 2 && ctx.Err() == nil {
		page, err := m.clients[0].Inbox(ctx, 0, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		answers = answers[:0]
		for _, it := range page.Messages {
			answers = append(answers, decoded(t, it.Message))
		}
	}
	for _, a := range answers {
		if a.Message.Type != protocol.TypeResponse || a.Envelope.CorrelationID != res.MessageID || protocol.Verify(a) != nil {
			t.Fatalf("the IACP agent got %s %s correlated to %q, want its request %s", a.Message.Type, a.Message.Payload, a.Envelope.CorrelationID, res.MessageID)
		}
	}
}

// elizaRequestAnsweredTwice posts section 4.1's TASK_REQUEST (reply_with debug-task-42) from
// agent 0 to agent 1, whose IACP agent answers it twice (accepted, then a result) and returns
// the request as it got it.
func elizaRequestAnsweredTwice(t *testing.T, ctx context.Context, m *apiMesh) *protocol.Message {
	t.Helper()
	if resp, raw := postDoc(t, m.servers[0], "", "application/json", elizaRequest(t, agentName(1))); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("request refused: %d %s", resp.StatusCode, raw)
	}
	page, err := m.clients[1].Inbox(ctx, 0, 10*time.Second)
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("the IACP agent's inbox: %v, %+v", err, page)
	}
	req := page.Messages[0].Message
	for _, payload := range []string{`{"status":"accepted"}`, `{"status":"accepted","task_status":"success","result":{}}`} {
		a := &protocol.Message{}
		a.Envelope.Recipient.AgentID = req.Envelope.Sender.AgentID
		a.Envelope.CorrelationID = req.Envelope.MessageID
		a.Message = protocol.Body{Type: protocol.TypeResponse, Intent: protocol.Intent(req.Message.Intent), Payload: []byte(payload)}
		if _, err := m.clients[1].Send(ctx, wire(t, a)); err != nil {
			t.Fatal(err)
		}
	}
	return decoded(t, req)
}

// An ElizaOS agent's TASK_REQUEST with reply_with, answered later by an IACP agent (twice),
// reaches the ElizaOS agent's inbox as TASK_ACCEPT and INFORM_RESULT in_reply_to its
// reply_with, not the IACP message id.
func TestAgentDialect_LaterAnswersAreInReplyToTheRequestsReplyWith(t *testing.T) {
	m := newAPIMesh(t, 2, speaks(0, "elizaos"))
	ctx := testCtx(t, 30*time.Second)
	elizaRequestAnsweredTwice(t, ctx, m)
	items := rawInbox(t, m.servers[0], "", 2)
	var got []string
	for _, it := range items {
		shown := doc(t, it["message"])
		if shown["in_reply_to"] != "debug-task-42" {
			t.Fatalf("answer shown in_reply_to %v, want the request's reply_with debug-task-42: %s", shown["in_reply_to"], it["message"])
		}
		got = append(got, shown["performative"].(string))
	}
	if strings.Join(got, ",") != "TASK_ACCEPT,INFORM_RESULT" {
		t.Fatalf("performatives %v", got)
	}
	// ?dialect=iacp shows the same answers as IACP, correlated to the request's message id.
	for _, it := range rawInbox(t, m.servers[0], "&dialect=iacp", 2) {
		if _, ok := it["dialect"]; ok {
			t.Fatalf("an IACP page names a dialect: %v", it)
		}
	}
}

// A document the node cannot read is refused in its sender's dialect: ElizaOS NOT_UNDERSTOOD
// in_reply_to the refused message, IaCP 1.0 error_response INVALID_FORMAT, ACP v2 a failed
// AgentResponse for the command.
func TestAgentDialect_RefusalsAreInTheSendersDialect(t *testing.T) {
	m := newAPIMesh(t, 2, meshOpts{})
	id := newUUID()
	for _, c := range []struct {
		name, body string
		want       map[string]any
	}{
		{"elizaos", `{"mcp_version":"0.1.0","message_id":"` + id + `","performative":"TASK_REQUEST"}`,
			map[string]any{"performative": "NOT_UNDERSTOOD", "in_reply_to": id}},
		{"iacp-1.0", `{"iacp_version":"1.0","message_id":"` + id + `","message_type":"task_request"}`,
			map[string]any{"message_type": "error_response", "parent_message_id": id}},
		{"acp-v2", `{"version":"2.0","id":"cmd-9","action":"FLY"}`,
			map[string]any{"status": "failed", "commandId": "cmd-9"}},
	} {
		resp, raw := postDoc(t, m.servers[0], "", "application/json", c.body)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json; dialect="+c.name {
			t.Errorf("%s: status %d, %q: %s", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			continue
		}
		got := doc(t, raw)
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v: %s", c.name, k, got[k], v, raw)
			}
		}
		if c.name == "iacp-1.0" {
			if p, _ := got["payload"].(map[string]any); p["error_code"] != "INVALID_FORMAT" {
				t.Errorf("iacp-1.0: error_code %v, want INVALID_FORMAT: %s", p["error_code"], raw)
			}
		}
	}
}

// A direct message an agent's dialect has no shape for is refused at its sender, naming the
// agent's dialect: ACP v2 has commands and responses, no events.
func TestAgentDialect_InexpressibleMessageIsRefusedAtTheSender(t *testing.T) {
	m := newAPIMesh(t, 2, speaks(1, "acp-v2"))
	ctx := testCtx(t, 20*time.Second)
	ev := request(agentName(1), protocol.IntentNotify, `{"event_type":"build_done"}`)
	ev.Message.Type = apiclient.TypeEvent
	_, err := m.clients[0].Send(ctx, ev)
	if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !strings.Contains(err.Error(), "speaks acp-v2") {
		t.Fatalf("an event to an ACP v2 agent: %v; want CAPABILITY_MISMATCH naming acp-v2", err)
	}
}

// The ElizaOS agent's conversation (TASK_REQUEST reply_with debug-task-42, answered with
// TASK_ACCEPT and INFORM_RESULT) is listed by its reply_with on both nodes, from their audit
// logs: the request sent and delivered, the answers received, on the ElizaOS agent's node;
// the request received and acked and the answers sent, on the other.
func TestConversation_ListedByItsReplyWithOnBothNodes(t *testing.T) {
	m := newAPIMesh(t, 2, speaks(0, "elizaos"))
	ctx := testCtx(t, 30*time.Second)
	req := elizaRequestAnsweredTwice(t, ctx, m)
	if err := m.clients[1].Ack(ctx, req.Envelope.MessageID); err != nil {
		t.Fatal(err)
	}
	rawInbox(t, m.servers[0], "", 2) // both answers are in
	events := func(c *apiclient.Client) (out []string) {
		doc, err := Conversation(ctx, c, "debug-task-42", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range doc.Messages {
			out = append(out, e.Event+" "+e.Type)
		}
		return out
	}
	// Node 0's order is fixed (its answers come after its request's receipt); node 1's agent
	// acks while its answers travel, so node 1's entries are counted.
	want0 := "sent request,delivered request,received response,received response"
	want1 := "acked :1,delivered response:2,received request:1,sent response:2"
	var got0, got1 []string
	for ctx.Err() == nil { // delivered and acked are written as the receipts come back
		got0, got1 = events(m.clients[0]), events(m.clients[1])
		if strings.Join(got0, ",") == want0 && counted(got1) == want1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Join(got0, ",") != want0 || counted(got1) != want1 {
		t.Fatalf("node 0 lists %q, want %q\nnode 1 lists %q, want %q", got0, want0, counted(got1), want1)
	}
	// Following on from the last entry lists nothing new.
	doc, err := Conversation(ctx, m.clients[0], "debug-task-42", 0, 1)
	if err != nil || len(doc.Messages) != 1 || !doc.More {
		t.Fatalf("a page of one: %v %+v", err, doc)
	}
	if _, err := Conversation(ctx, m.clients[0], strings.Repeat("x", 129), 0, 0); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("a 129-character id: %v", err)
	}
}

// counted is "item:count" for each distinct item, sorted.
func counted(items []string) string {
	n := map[string]int{}
	for _, it := range items {
		n[it]++
	}
	var out []string
	for it, c := range n {
		out = append(out, fmt.Sprintf("%s:%d", it, c))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// A node without the audit log says that conversations need it.
func TestConversation_NeedsTheAuditLog(t *testing.T) {
	m := newAPIMesh(t, 1, meshOpts{node: func(int) []node.Option { return []node.Option{node.WithAudit(false, false)} }})
	_, err := Conversation(testCtx(t, 10*time.Second), m.clients[0], "conv", 0, 0)
	if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !strings.Contains(err.Error(), "audit: true") {
		t.Fatalf("conversation without the audit log: %v", err)
	}
}
