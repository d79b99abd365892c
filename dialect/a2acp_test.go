package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// a2acpSpec is the A2ACP draft, beside the repository (relative to this package).
const a2acpSpec = "../../shared/specs/003_dd554214f49b5396.txt"

// specBlock returns the first ```json block after heading in the A2ACP draft; the test is
// skipped when the draft is not beside the repository.
func specBlock(t *testing.T, heading string) string {
	t.Helper()
	spec, err := os.ReadFile(a2acpSpec)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("the A2ACP draft is not at %s", a2acpSpec)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(spec), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("the draft has no heading %q", heading)
	}
	_, block, ok := strings.Cut(after, "```json\n")
	if !ok {
		t.Fatalf("no json block after %q", heading)
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		t.Fatalf("the json block after %q does not end", heading)
	}
	return block
}

// The embedded schema is the draft's "Base Message Schema", byte for byte, and compiles.
func TestA2ACP_SchemaIsTheDraftsVerbatim(t *testing.T) {
	if got, want := strings.TrimSuffix(string(a2acpSchemaJSON), "\n"), specBlock(t, "### Base Message Schema"); got != want {
		t.Errorf("a2acp.schema.json is not the draft's Base Message Schema:\n got %s\nwant %s", got, want)
	}
	if _, err := a2acpSchema(); err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
}

// The test vectors are the draft's three examples, with the one fix testdata/README.md names:
// the error example's message_id is no UUID ('g' is no hex digit) and became one.
func TestA2ACP_ExamplesAreTheDrafts(t *testing.T) {
	ex := examples(t, A2ACP)
	for heading, name := range map[string]string{"#### Request Message": "request.json",
		"#### Response Message": "response.json", "#### Error Message": "error.json"} {
		draft := strings.Replace(specBlock(t, heading), "770g0600-g40d-", "770a0600-a40d-", 1)
		if !bytes.Equal(canonical(t, []byte(draft)), canonical(t, ex[name])) {
			t.Errorf("%s is not the draft's %q", name, heading)
		}
	}
}

// A token bound the node's verifier would refuse anyway.
func TestA2ACP_TokenBoundIsTheVerifiers(t *testing.T) {
	if maxTokenBytes != authority.MaxTokenBytes {
		t.Errorf("maxTokenBytes %d, authority.MaxTokenBytes %d", maxTokenBytes, authority.MaxTokenBytes)
	}
}

// The draft's examples map to IACP with their values kept: type, intent, recipient,
// correlation, token, payload, and the error's code through protocol's table.
func TestA2ACP_MapsWithValuesKept(t *testing.T) {
	b := builder(t)
	ex := examples(t, A2ACP)
	const token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9..."
	cases := []struct {
		doc     string
		typ     protocol.Type
		intent  protocol.Intent
		to      string
		payload map[string]any // members the IACP payload must have
		code    protocol.Code
	}{
		{"request.json", protocol.TypeRequest, "x-provision_test_dataset", "dataset-provisioning-agent",
			map[string]any{"record_count": 1000.0, "contract_id": "contract-456"}, ""},
		{"response.json", protocol.TypeResponse, "x-provision_test_dataset", "sdlc-test-agent",
			map[string]any{"status": "accepted", "dataset_id": "dataset-abc"}, ""},
		{"error.json", protocol.TypeError, protocol.IntentHandoff, "sdlc-test-agent",
			map[string]any{"message": "Input schema incompatible with target agent's expected schema", "retryable": false}, protocol.CodeCapabilityMismatch},
	}
	for _, c := range cases {
		draft, m := carry(t, b, A2ACP, ex[c.doc])
		var doc struct {
			MessageID string `json:"message_id"`
		}
		_ = json.Unmarshal(ex[c.doc], &doc)
		env := m.Envelope
		if m.Message.Type != c.typ || m.Message.Intent != c.intent || env.Recipient.AgentID != c.to ||
			env.CorrelationID != "correlation-789" || env.MessageID != doc.MessageID {
			t.Errorf("%s: %s/%s to %q, correlation %q, id %s", c.doc, m.Message.Type, m.Message.Intent, env.Recipient.AgentID, env.CorrelationID, env.MessageID)
		}
		if sec, err := m.Security(); err != nil || sec.AuthToken != token {
			t.Errorf("%s: security %+v (%v), want the token", c.doc, sec, err)
		}
		var p map[string]any
		_ = json.Unmarshal(m.Message.Payload, &p)
		for k, want := range c.payload {
			if p[k] != want {
				t.Errorf("%s: payload.%s = %v, want %v", c.doc, k, p[k], want)
			}
		}
		if c.code != "" && p["code"] != string(c.code) {
			t.Errorf("%s: code %v, want %s", c.doc, p["code"], c.code)
		}
		if got := sortedKeys(draft.Extension.Members); !slices.Equal(got, []string{"source_agent", "target_agent", "timestamp"}) {
			t.Errorf("%s: the extension keeps %q; want the agents and the timestamp only (the rest is in IACP's fields)", c.doc, got)
		}
	}
}

// An intent becomes a custom IACP intent when it has the syntax of one, else travels in the
// extension; an event gets its event_type from the intent. Each comes back unchanged.
func TestA2ACP_Intents(t *testing.T) {
	b := builder(t)
	req := examples(t, A2ACP)["request.json"]
	for _, c := range []struct {
		from, to   string
		typ        protocol.Type
		intent     protocol.Intent
		eventType  string
		inExtended bool
	}{
		{`"intent": "provision_test_dataset"`, `"intent": "initiate_handshake"`, protocol.TypeRequest, "x-initiate_handshake", "", false},
		{`"intent": "provision_test_dataset"`, `"intent": "provision test dataset"`, protocol.TypeRequest, protocol.IntentHandoff, "", true},
		{`"intent": "provision_test_dataset",`, ``, protocol.TypeRequest, protocol.IntentHandoff, "", false},
		{`"message_type": "request"`, `"message_type": "event"`, protocol.TypeEvent, "x-provision_test_dataset", "provision_test_dataset", false},
		{`"message_type": "request",
  "intent": "provision_test_dataset"`, `"message_type": "event"`, protocol.TypeEvent, protocol.IntentNotify, a2acpEventType, false},
	} {
		doc := bytes.Replace(req, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(doc, req) {
			t.Fatalf("%q is not in the example", c.from)
		}
		draft, m := carry(t, b, A2ACP, doc)
		var p struct {
			EventType string `json:"event_type"`
		}
		_ = json.Unmarshal(m.Message.Payload, &p)
		_, kept := draft.Extension.Members["intent"]
		if m.Message.Type != c.typ || m.Message.Intent != c.intent || p.EventType != c.eventType || kept != c.inExtended {
			t.Errorf("%s: %s/%s event_type %q, intent in the extension %v", c.to, m.Message.Type, m.Message.Intent, p.EventType, kept)
		}
		back, err := FromIACP(m, A2ACP)
		if err != nil || !bytes.Equal(canonical(t, back), canonical(t, doc)) {
			t.Errorf("%s: round trip %s (%v)", c.to, back, err)
		}
	}
}

// A response's status: the handshake's "accepted": false is rejected, an IACP status is kept,
// anything else is accepted.
func TestA2ACP_ResponseStatus(t *testing.T) {
	base := examples(t, A2ACP)["response.json"]
	for member, want := range map[string]string{
		`"accepted": false, "reason": "busy", `: protocol.ResponseRejected,
		`"accepted": true, `:                    protocol.ResponseAccepted,
		`"status": "pending", `:                 protocol.ResponsePending,
		`"status": "done", `:                    protocol.ResponseAccepted,
	} {
		doc := bytes.Replace(base, []byte(`"payload": {`), []byte(`"payload": {`+member), 1)
		_, m := carry(t, builder(t), A2ACP, doc)
		var p protocol.ResponseStatus
		_ = json.Unmarshal(m.Message.Payload, &p)
		if p.Status != want {
			t.Errorf("%s: status %q, want %s", member, p.Status, want)
		}
	}
}

// Every code of the draft's table is an IACP code (protocol's table), retryable when
// retry_after is positive; every IACP code reaches an A2ACP agent as one of the table's, with a
// retry_after that says whether to retry.
func TestA2ACP_ErrorCodes(t *testing.T) {
	b := builder(t)
	ex := examples(t, A2ACP)
	if len(a2acpCodes) != 8 {
		t.Fatalf("the draft's table has 8 codes; protocol's has %q", a2acpCodes)
	}
	for _, code := range a2acpCodes {
		for _, after := range []string{"0", "30"} {
			doc := bytes.Replace(ex["error.json"], []byte(`"SCHEMA_MISMATCH"`), []byte(`"`+code+`"`), 1)
			doc = bytes.Replace(doc, []byte(`"retry_after": 0`), []byte(`"retry_after": `+after), 1)
			_, m := carry(t, b, A2ACP, doc)
			e, err := protocol.ErrorOf(m)
			want, _ := protocol.MapForeignCode(protocol.DialectA2ACP, code)
			if err != nil || e.Code != want || (e.RetryAfter > 0) != (after != "0") {
				t.Errorf("%s retry_after %s: %+v (%v), want %s", code, after, e, err, want)
			}
		}
	}
	_, req := carry(t, b, A2ACP, ex["request.json"])
	for _, info := range protocol.Codes() {
		fail, err := b.Error(req, "", &protocol.Error{Code: info.Code})
		if err != nil {
			t.Fatal(err)
		}
		out, err := FromIACP(fail, A2ACP)
		if err != nil {
			t.Fatalf("%s: %v", info.Code, err)
		}
		var doc struct {
			Payload struct {
				Error struct {
					Code, Message string
					Correlation   string  `json:"correlation_id"`
					RetryAfter    float64 `json:"retry_after"`
				}
			}
		}
		_ = json.Unmarshal(out, &doc)
		e := doc.Payload.Error
		if !slices.Contains(a2acpCodes, e.Code) || e.Message == "" || (e.RetryAfter > 0) != info.Retryable ||
			e.Correlation != req.Envelope.MessageID {
			t.Errorf("%s in A2ACP: %s", info.Code, out)
		}
	}
}

// An IACP agent's answer to an A2ACP request reaches the A2ACP agent as a response that carries
// the request's correlation id and intent; what A2ACP has no shape for is refused saying why.
func TestA2ACP_FromIACP(t *testing.T) {
	b := builder(t)
	_, req := carry(t, b, A2ACP, examples(t, A2ACP)["request.json"])
	resp, err := b.Response(req, protocol.ResponseAccepted, map[string]any{"dataset_id": "d-1"})
	if err != nil {
		t.Fatal(err)
	}
	shown := *resp // as the API shows an answer: correlated to what the request named
	shown.Envelope.CorrelationID = AnswerCorrelation(req, A2ACP)
	out, err := FromIACP(&shown, A2ACP)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"message_type": `"response"`, "intent": `"provision_test_dataset"`,
		"target_agent": `{"agent_id":"test:local:node","domain":"test","version":"0.0.0"}`} {
		if got := string(canonical(t, doc[k])); got != want {
			t.Errorf("answer in A2ACP: %s is %s, want %s", k, got, want)
		}
	}
	if p := payloadOf(doc["payload"]); str(p, "correlation_id") != "correlation-789" || doc["security"] != nil {
		t.Errorf("answer in A2ACP: %s; want payload.correlation_id correlation-789 and no security (the answer has no token)", out)
	}
	query, err := b.Request("dialect:a2acp:agent", protocol.IntentQuery, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.Heartbeat(protocol.HeartbeatPayload{Status: protocol.StatusAlive})
	if err != nil {
		t.Fatal(err)
	}
	noRecipient := resp.Clone()
	noRecipient.Envelope.Recipient.AgentID = ""
	for why, m := range map[string]*protocol.Message{"capability query": query, "no heartbeat": hb, "no recipient": noRecipient} {
		if _, err := FromIACP(m, A2ACP); protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !strings.Contains(err.Error(), why) {
			t.Errorf("%s into A2ACP: %v, want CAPABILITY_MISMATCH saying %q", why, err, why)
		}
	}
}

// A document with several problems gets the same error every time, though the library visits
// members in map order; validation is safe from many goroutines.
func TestA2ACP_SchemaErrorIsStable(t *testing.T) {
	doc := []byte(`{"protocol_version":"1.0","message_id":"nope","timestamp":"today","message_type":"notice",
		"source_agent":{"agent_id":"a","domain":"d","version":"1"},"target_agent":{"agent_id":"b"}}`)
	const want = `PAYLOAD_INVALID: a2acp document: /message_id "nope" is not a valid uuid: must have 5 elements (and 5 more problems)`
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				if _, err := Decode(A2ACP, doc); err == nil || err.Error() != want {
					t.Errorf("got %v, want %s", err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
