package dialect

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/protocol"
)

// now is the time the examples are translated at: before every expiry in them.
var now = time.Date(2025, 9, 21, 10, 30, 0, 0, time.UTC)

func examples(t testing.TB, d Dialect) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", string(d), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples for %s: %v", d, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func builder(t testing.TB) *protocol.Builder {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.NewBuilder("test:local:node", key, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// carry translates doc to a signed IACP message, through the wire and back.
func carry(t testing.TB, b *protocol.Builder, d Dialect, doc []byte) (*Draft, *protocol.Message) {
	t.Helper()
	dec, err := Decode(d, doc)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	draft, err := ToIACP(dec, now)
	if err != nil {
		t.Fatalf("to IACP: %v", err)
	}
	m, err := draft.Message()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Seal(m); err != nil {
		t.Fatalf("seal: %v", err)
	}
	wire, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := protocol.DecodeJSON(wire)
	if err != nil {
		t.Fatalf("decode the IACP message: %v", err)
	}
	if err := protocol.Verify(got); err != nil {
		t.Fatalf("verify: %v", err)
	}
	return draft, got
}

func canonical(t testing.TB, b []byte) []byte {
	t.Helper()
	c, err := protocol.CanonicalJSON(b)
	if err != nil {
		t.Fatalf("canonical: %v", err)
	}
	return c
}

// Every example of the drafts is recognised, validates, becomes a valid signed IACP message,
// and comes back from it canonically equal.
func TestExamples_RoundTrip(t *testing.T) {
	b := builder(t)
	for _, d := range Translated {
		for name, doc := range examples(t, d) {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				got, err := Recognise(doc)
				if err != nil || got != d {
					t.Fatalf("recognised as %q (%v), want %s", got, err, d)
				}
				draft, m := carry(t, b, d, doc)
				type agent struct {
					AgentID string `json:"agent_id"`
				}
				var sender struct {
					From        string `json:"from"`
					Sender      agent  `json:"sender"`
					SourceAgent agent  `json:"source_agent"`
				}
				if err := json.Unmarshal(doc, &sender); err != nil || draft.Sender == "" ||
					draft.Sender != sender.From && draft.Sender != sender.Sender.AgentID && draft.Sender != sender.SourceAgent.AgentID {
					t.Errorf("Draft.Sender %q, the document's %+v (%v)", draft.Sender, sender, err)
				}
				// A dialect's bare agent name is resolved to an IACP id by the node, not here.
				resolved := m.Clone()
				if resolved.Envelope.Recipient.AgentID != protocol.Broadcast {
					resolved.Envelope.Recipient.AgentID = "dialect:" + string(d) + ":agent"
				}
				if err := protocol.Validate(resolved, now, 0, protocol.Limits{}); err != nil {
					t.Fatalf("the IACP message is not valid: %v", err)
				}
				back, err := FromIACP(m, d)
				if err != nil {
					t.Fatalf("from IACP: %v", err)
				}
				if !bytes.Equal(canonical(t, back), canonical(t, doc)) {
					t.Fatalf("round trip differs:\n got %s\nwant %s", canonical(t, back), canonical(t, doc))
				}
			})
		}
	}
}

// Every example also arrives in each other dialect as a document valid there, or is refused
// with CAPABILITY_MISMATCH saying why.
func TestExamples_CrossDialect(t *testing.T) {
	b := builder(t)
	for _, from := range Translated {
		for name, doc := range examples(t, from) {
			_, m := carry(t, b, from, doc)
			for _, to := range append([]Dialect{IACP}, Translated...) {
				out, err := FromIACP(m, to)
				if err != nil {
					if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch {
						t.Errorf("%s/%s to %s: %v (code %s), want a document or CAPABILITY_MISMATCH", from, name, to, err, protocol.CodeOf(err))
					}
					continue
				}
				if to == IACP {
					continue
				}
				if _, err := Decode(to, out); err != nil {
					t.Errorf("%s/%s to %s: %v", from, name, to, err)
				}
			}
		}
	}
}

func TestRecognise_AmbiguousAndUnknown(t *testing.T) {
	for doc, want := range map[string]string{
		`{"iacp_version":"1.0","performative":"TASK_REQUEST"}`: "ambiguous: it has iacp_version (iacp-1.0) and performative (elizaos)",
		`{"hello":"world"}`: "dialect is unknown",
		`[1]`:               "must be a JSON object",
		`{"a":1,"a":2}`:     "not valid JSON",
	} {
		_, err := Recognise([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) || protocol.CodeOf(err) != protocol.CodePayloadInvalid {
			t.Errorf("Recognise(%s) = %v, want PAYLOAD_INVALID saying %q", doc, err, want)
		}
	}
	for doc, want := range map[string]Dialect{
		`{"envelope":{},"message":{}}`: IACP, `{"commandId":"x"}`: ACPv2, `{"source_agent":{}}`: A2ACP,
	} {
		if got, err := Recognise([]byte(doc)); got != want {
			t.Errorf("Recognise(%s) = %q, %v; want %s", doc, got, err, want)
		}
	}
	if _, err := Decode("klingon", []byte(`{}`)); protocol.CodeOf(err) != protocol.CodePayloadInvalid || !strings.Contains(err.Error(), "a2acp") {
		t.Errorf("Decode(klingon) = %v, want PAYLOAD_INVALID naming the dialects, a2acp among them", err)
	}
}

// A field of a draft's example, set wrong, is refused naming the field.
func TestDecode_RefusesBadDocuments(t *testing.T) {
	cases := []struct {
		d        Dialect
		example  string
		from, to string
		code     protocol.Code
		field    string
	}{
		{IaCP1, "s8.1-request.json", `"iacp_version": "1.0"`, `"iacp_version": "2.0"`, protocol.CodeVersionUnsupported, "iacp_version"},
		{IaCP1, "s8.1-request.json", `"message_type": "task_request"`, `"message_type": "task_order"`, protocol.CodePayloadInvalid, "message_type"},
		{IaCP1, "s8.1-request.json", `"message_id": "123e4567-e89b-12d3-a456-426614174000"`, `"message_id": "uuid-v4-string"`, protocol.CodePayloadInvalid, "message_id"},
		{IaCP1, "s8.1-request.json", `"timestamp": "2025-09-21T10:30:00Z"`, `"timestamp": "yesterday"`, protocol.CodePayloadInvalid, "timestamp"},
		{IaCP1, "s8.1-request.json", `"task_type": "sentiment_analysis"`, `"task_kind": "sentiment_analysis"`, protocol.CodePayloadInvalid, "payload.task_type"},
		{IaCP1, "s8.1-request.json", `"response_timeout": 30`, `"response_timeout": -1`, protocol.CodePayloadInvalid, "metadata.response_timeout"},
		{IaCP1, "s8.1-request.json", `"agent_id": "nlp-agent-01"`, `"agent_name": "nlp-agent-01"`, protocol.CodePayloadInvalid, "recipient.agent_id"},
		{IaCP1, "s8.1-response.json", `"status": "completed"`, `"status": "done"`, protocol.CodePayloadInvalid, "payload.status"},
		{IaCP1, "s8.1-response.json", `"parent_message_id"`, `"parent_id"`, protocol.CodePayloadInvalid, "parent_message_id"},
		{IaCP1, "s4.1.2-task-response.json", `"progress": 0.75`, `"progress": 75`, protocol.CodePayloadInvalid, "payload.progress"},
		{IaCP1, "s2.1-base-message.json", `"priority": "low"`, `"priority": "asap"`, protocol.CodePayloadInvalid, "metadata.priority"},
		{ElizaOS, "s4.1-task-request.json", `"mcp_version": "0.1.0"`, `"mcp_version": "1.0"`, protocol.CodeVersionUnsupported, "mcp_version"},
		{ElizaOS, "s4.1-task-request.json", `"performative": "TASK_REQUEST"`, `"performative": "REQUEST"`, protocol.CodePayloadInvalid, "performative"},
		{ElizaOS, "s4.1-task-request.json", `"priority": "medium"`, `"priority": "urgent"`, protocol.CodePayloadInvalid, "payload.priority"},
		{ElizaOS, "s4.1-task-request.json", `"receiver": {`, `"recipient": {`, protocol.CodePayloadInvalid, "receiver"},
		{ElizaOS, "s4.2-task-accept.json", `"in_reply_to"`, `"reply_to"`, protocol.CodePayloadInvalid, "in_reply_to"},
		{ElizaOS, "s4.3-inform-result.json", `"task_status": "success"`, `"task_status": "done"`, protocol.CodePayloadInvalid, "payload.task_status"},
		{ElizaOS, "s4.4-query-ref.json", `"reference"`, `"ref"`, protocol.CodePayloadInvalid, "payload.reference"},
		{ElizaOS, "s4.6-failure.json", `"error_text"`, `"text"`, protocol.CodePayloadInvalid, "payload.error_text"},
		{ElizaOS, "s4.9-inform-capabilities.json", `"capabilities": {}`, `"capabilities": []`, protocol.CodePayloadInvalid, "payload.capabilities"},
		{ACPv2, "pattern-1-request-response.json", `"version": "2.0"`, `"version": "1.0"`, protocol.CodeVersionUnsupported, "version"},
		{ACPv2, "pattern-1-request-response.json", `"action": "ANALYZE"`, `"action": "analyse"`, protocol.CodePayloadInvalid, "action"},
		{ACPv2, "pattern-1-request-response.json", `"priority": "medium"`, `"priority": "urgent"`, protocol.CodePayloadInvalid, "priority"},
		{ACPv2, "pattern-1-request-response.json", `"to": "code-agent"`, `"target": "code-agent"`, protocol.CodePayloadInvalid, "to"},
		{ACPv2, "pattern-1-request-response.json", `"parameters": {`, `"params": {`, protocol.CodePayloadInvalid, "parameters"},
		{ACPv2, "pattern-2-fire-and-forget.json", `"timeout": 5000`, `"timeout": "5s"`, protocol.CodePayloadInvalid, "context.timeout"},
		{ACPv2, "structure-1-agent-command.json", `"maxAttempts"`, `"attempts"`, protocol.CodePayloadInvalid, "context.retryPolicy.maxAttempts"},
		{ACPv2, "structure-1-agent-command.json", `["code:read"]`, `"code:read"`, protocol.CodePayloadInvalid, "security.permissions"},
		{ACPv2, "structure-1-agent-command.json", `"requireApproval": true`, `"requireApproval": "yes"`, protocol.CodePayloadInvalid, "security.requireApproval"},
		{ACPv2, "structure-2-agent-response.json", `"status": "success"`, `"status": "ok"`, protocol.CodePayloadInvalid, "status"},
		{ACPv2, "structure-2-agent-response.json", `"results": {`, `"result": {`, protocol.CodePayloadInvalid, "results"},
		{ACPv2, "structure-2-agent-response.json", `"path": "reports/main.md",`, ``, protocol.CodePayloadInvalid, "results.artifacts[0].path"},
		{ACPv2, "structure-2-agent-response.json", `"duration": 1200`, `"duration": -1`, protocol.CodePayloadInvalid, "execution.duration"},
		{ACPv2, "implementation-failed-response.json", `"recoverable": false`, `"recoverable": 0`, protocol.CodePayloadInvalid, "error.recoverable"},
		{ACPv2, "implementation-failed-response.json", `"commandId": "0193a5b0-7c1e-7000-8000-000000000071"`, `"commandId": ""`, protocol.CodePayloadInvalid, "commandId"},
		{A2ACP, "request.json", `"protocol_version": "1.0"`, `"protocol_version": "2.0"`, protocol.CodeVersionUnsupported, "protocol_version"},
		{A2ACP, "request.json", `"protocol_version": "1.0"`, `"protocol_version": "1"`, protocol.CodePayloadInvalid, "/protocol_version"},
		{A2ACP, "request.json", `"timestamp": "2026-01-27T14:30:00Z",`, ``, protocol.CodePayloadInvalid, "/timestamp is required"},
		{A2ACP, "request.json", `"timestamp": "2026-01-27T14:30:00Z"`, `"timestamp": "2026-01-27 14:30:00"`, protocol.CodePayloadInvalid, "/timestamp"},
		{A2ACP, "request.json", `"timestamp": "2026-01-27T14:30:00Z"`, `"timestamp": "2026-13-27T14:30:00Z"`, protocol.CodePayloadInvalid, "/timestamp"},
		{A2ACP, "request.json", `"message_id": "550e8400-e29b-41d4-a716-446655440000"`, `"message_id": "uuid-v4-string"`, protocol.CodePayloadInvalid, "/message_id"},
		{A2ACP, "request.json", `"message_id": "550e8400-e29b-41d4-a716-446655440000"`, `"message_id": "550e8400-e29b-41d4-a716-44665544000g"`, protocol.CodePayloadInvalid, "/message_id"},
		{A2ACP, "request.json", `"version": "1.2.3"`, `"version": "1.2"`, protocol.CodePayloadInvalid, `/source_agent/version "1.2" does not match pattern ^\d+\.\d+\.\d+$`},
		{A2ACP, "request.json", `"message_type": "request"`, `"message_type": "notice"`, protocol.CodePayloadInvalid, "/message_type"},
		{A2ACP, "request.json", `"intent": "provision_test_dataset"`, `"intent": 5`, protocol.CodePayloadInvalid, "/intent must be string"},
		{A2ACP, "request.json", `"domain": "a_domain"`, `"domain": ""`, protocol.CodePayloadInvalid, "/source_agent/domain"},
		{A2ACP, "request.json", `"agent_id": "sdlc-test-agent"`, `"agent_id": "` + strings.Repeat("a", 65) + `"`, protocol.CodePayloadInvalid, "/source_agent/agent_id"},
		{A2ACP, "request.json", `"encryption": "none"`, `"encryption": "rsa"`, protocol.CodePayloadInvalid, "/security/encryption"},
		{A2ACP, "request.json", `"auth_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9...",`, ``, protocol.CodePayloadInvalid, "/security/auth_token is required"},
		{A2ACP, "request.json", `"auth_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9..."`, `"auth_token": " "`, protocol.CodePayloadInvalid, "/security/auth_token"},
		{A2ACP, "request.json", `"correlation_id": "correlation-789"`, `"correlation_id": ""`, protocol.CodePayloadInvalid, "/payload/correlation_id"},
		{A2ACP, "response.json", `"target_agent": {`, `"target": {`, protocol.CodePayloadInvalid, "/target_agent is required"},
		{A2ACP, "error.json", `"code": "SCHEMA_MISMATCH",`, ``, protocol.CodePayloadInvalid, "/payload/error/code is required"},
		{A2ACP, "error.json", `"code": "SCHEMA_MISMATCH"`, `"code": "SCHEMA_MISSING"`, protocol.CodePayloadInvalid, "/payload/error/code"},
		{A2ACP, "error.json", `"message": "Input schema incompatible with target agent's expected schema",`, ``, protocol.CodePayloadInvalid, "/payload/error/message"},
		{A2ACP, "error.json", `"retry_after": 0,`, ``, protocol.CodePayloadInvalid, "/payload/error/retry_after"},
		{A2ACP, "error.json", `"retry_after": 0`, `"retry_after": -1`, protocol.CodePayloadInvalid, "/payload/error/retry_after must be a number from 0 to 2147483647"},
		{A2ACP, "error.json", `"error": {`, `"fault": {`, protocol.CodePayloadInvalid, "/payload/error is required"},
	}
	for _, c := range cases {
		doc := examples(t, c.d)[c.example]
		bad := bytes.Replace(doc, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, doc) {
			t.Fatalf("%s/%s: %q is not in the example", c.d, c.example, c.from)
		}
		_, err := Decode(c.d, bad)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s/%s with %s: got %v, want %s naming %s", c.d, c.example, c.to, err, c.code, c.field)
		}
	}
}

// Every example of every draft mentions a mark, so the API's pre-check never skips one; an
// IACP document that mentions none is passed by without a parse.
func TestMayBeForeign(t *testing.T) {
	for _, d := range Translated {
		for name, doc := range examples(t, d) {
			if !MayBeForeign(doc) {
				t.Errorf("%s/%s: MayBeForeign is false", d, name)
			}
		}
	}
	for doc, want := range map[string]bool{
		`{"envelope":{},"message":{"payload":{"x":1}}}`:             false,
		`{"envelope":{},"message":{"payload":{"action":"deploy"}}}`: true, // recognised to be sure
		`{"\u0061ction":"EXECUTE"}`:                                 true, // an escape may spell a mark
		`{"commandId":"c-1"}`:                                       true,
	} {
		if got := MayBeForeign([]byte(doc)); got != want {
			t.Errorf("MayBeForeign(%s) = %v, want %v", doc, got, want)
		}
	}
}
