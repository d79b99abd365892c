package dialect

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// The ACP v2 examples map to IACP with their values kept: type, intent, recipient, correlation,
// TTL, priority, permissions, payload, and error codes through protocol's table.
func TestACPv2_MapsWithValuesKept(t *testing.T) {
	b := builder(t)
	ex := examples(t, ACPv2)
	cases := []struct {
		name, doc      string
		typ            protocol.Type
		to, corr, prio string
		ttl            time.Duration
		perms          []string
		approval       bool           // security.require_approval
		payload        map[string]any // members the IACP payload must have
		kept           []string       // members that must travel in the extension
		code           protocol.Code
		retryable      bool
	}{
		{name: "fire-and-forget", doc: "pattern-2-fire-and-forget.json", typ: protocol.TypeRequest, to: "logger", prio: "low", ttl: 5 * time.Second,
			payload: map[string]any{"action": "EXECUTE", "operation": "log", "level": "info"}, kept: []string{"from", "timestamp"}},
		{name: "structure", doc: "structure-1-agent-command.json", typ: protocol.TypeRequest, to: "code-agent", prio: "low", ttl: 30 * time.Second,
			corr: "0193a5b0-7c1e-7000-8000-000000000000", perms: []string{"code:read"}, approval: true, payload: map[string]any{"action": "ANALYZE"},
			kept: []string{"context"}},
		{name: "pipeline", doc: "pattern-4-pipeline-implement.json", typ: protocol.TypeRequest, to: "coder", prio: "high",
			corr: "0193a5b0-7c1e-7000-8000-000000000041", payload: map[string]any{"action": "IMPLEMENT", "design": "designResponse.results.data"}},
		{name: "response", doc: "structure-2-agent-response.json", typ: protocol.TypeResponse, corr: "0193a5b0-7c1e-7000-8000-000000000001",
			payload: map[string]any{"status": "accepted", "summary": "Analysis complete"}, kept: []string{"execution"}},
		{name: "failed", doc: "implementation-failed-response.json", typ: protocol.TypeError, to: "code-agent", corr: "0193a5b0-7c1e-7000-8000-000000000071",
			payload: map[string]any{"message": "Agent not found: code-agent"}, kept: []string{"error", "action", "to"}, code: protocol.CodeInternalError},
	}
	for _, c := range cases {
		draft, m := carry(t, b, ACPv2, ex[c.doc])
		env := m.Envelope
		if m.Message.Type != c.typ || m.Message.Intent != protocol.IntentHandoff || env.Recipient.AgentID != c.to || draft.Priority != c.prio {
			t.Errorf("%s: %s/%s to %q priority %q", c.name, m.Message.Type, m.Message.Intent, env.Recipient.AgentID, draft.Priority)
		}
		if c.typ != protocol.TypeRequest || c.corr != "" {
			if env.CorrelationID != c.corr {
				t.Errorf("%s: correlation %q, want %q", c.name, env.CorrelationID, c.corr)
			}
		}
		if c.ttl != 0 && env.TTLSeconds != int64(c.ttl/time.Second) {
			t.Errorf("%s: ttl %d, want %v", c.name, env.TTLSeconds, c.ttl)
		}
		if sec, err := m.Security(); err != nil || !slices.Equal(sec.Permissions, c.perms) || sec.RequireApproval != c.approval {
			t.Errorf("%s: security %+v (%v), want permissions %q, require_approval %v", c.name, sec, err, c.perms, c.approval)
		}
		if _, kept := draft.Extension.Members["security"]; kept {
			t.Errorf("%s: security is kept in the extension; permissions and requireApproval map to IACP's", c.name)
		}
		var p map[string]any
		_ = json.Unmarshal(m.Message.Payload, &p)
		for k, want := range c.payload {
			if p[k] != want {
				t.Errorf("%s: payload.%s = %v, want %v", c.name, k, p[k], want)
			}
		}
		for _, k := range c.kept {
			if _, ok := draft.Extension.Members[k]; !ok {
				t.Errorf("%s: %s is not kept in the extension (%s)", c.name, k, strings.Join(sortedKeys(draft.Extension.Members), ", "))
			}
		}
		if c.code != "" && (protocol.Code(p["code"].(string)) != c.code || p["retryable"] != c.retryable) {
			t.Errorf("%s: code %v retryable %v, want %s %v", c.name, p["code"], p["retryable"], c.code, c.retryable)
		}
	}
}

// Each status of an AgentResponse, with and without error.code, lands on an IACP type and code.
func TestACPv2_ResponseStatuses(t *testing.T) {
	base := examples(t, ACPv2)["structure-2-agent-response.json"]
	for _, c := range []struct {
		status, errMember string
		typ               protocol.Type
		want              string // response status or error code
		retryable         bool
	}{
		{"partial", "", protocol.TypeResponse, protocol.ResponseAccepted, false},
		{"cancelled", "", protocol.TypeResponse, protocol.ResponseRejected, false},
		{"timeout", "", protocol.TypeError, string(protocol.CodeTimeout), true},
		{"failed", "", protocol.TypeError, string(protocol.CodeInternalError), true},
		{"failed", `{"code":"permission_error","message":"no","recoverable":false}`, protocol.TypeError, string(protocol.CodePermissionDenied), false},
		{"failed", `{"code":"USER_ERROR","message":"bad file","recoverable":true}`, protocol.TypeError, string(protocol.CodePayloadInvalid), true},
		{"failed", `{"code":"E42","message":"odd","recoverable":false}`, protocol.TypeError, string(protocol.CodeInternalError), false},
	} {
		doc := bytes.Replace(base, []byte(`"status": "success"`), []byte(`"status": "`+c.status+`"`), 1)
		if c.errMember != "" {
			doc = bytes.Replace(doc, []byte(`"results": {`), []byte(`"error": `+c.errMember+`, "results": {`), 1)
		}
		_, m := carry(t, builder(t), ACPv2, doc)
		var p struct {
			Status, Code string
			Retryable    bool
		}
		_ = json.Unmarshal(m.Message.Payload, &p)
		got := p.Status
		if c.typ == protocol.TypeError {
			got = p.Code
		}
		if m.Message.Type != c.typ || got != c.want || p.Retryable != c.retryable {
			t.Errorf("%s %s: %s %q retryable %v, want %s %q %v", c.status, c.errMember, m.Message.Type, got, p.Retryable, c.typ, c.want, c.retryable)
		}
	}
}

// An IACP answer to an ACP command reaches the ACP agent as an AgentResponse whose commandId is
// the command's id; what ACP has no shape for is refused saying why.
func TestACPv2_FromIACP(t *testing.T) {
	b := builder(t)
	_, cmd := carry(t, b, ACPv2, examples(t, ACPv2)["pattern-1-request-response.json"])
	resp, err := b.Response(cmd, protocol.ResponseAccepted, map[string]any{"data": 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := AnswerCorrelation(cmd, ACPv2); got != "0193a5b0-7c1e-7000-8000-000000000011" {
		t.Errorf("AnswerCorrelation = %q, want the command's id", got)
	}
	named := bytes.Replace(examples(t, ACPv2)["pattern-4-pipeline-implement.json"], []byte(`"0193a5b0-7c1e-7000-8000-000000000042"`), []byte(`"cmd-2"`), 1)
	if _, c := carry(t, b, ACPv2, named); AnswerCorrelation(c, ACPv2) != "cmd-2" || AnswerCorrelation(c, ElizaOS) != c.Envelope.CorrelationID {
		t.Errorf("AnswerCorrelation of a command with id cmd-2: %q", AnswerCorrelation(c, ACPv2))
	}
	out, err := FromIACP(resp, ACPv2)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ CommandID, Status string }
	if err := json.Unmarshal(out, &doc); err != nil || doc.CommandID != "0193a5b0-7c1e-7000-8000-000000000011" || doc.Status != "success" {
		t.Errorf("answer in ACP v2: %s", out)
	}
	fail, err := b.Error(cmd, "", protocol.Errorf(protocol.CodePayloadInvalid, "checks: unknown"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err = FromIACP(fail, ACPv2); err != nil || !strings.Contains(string(out), `"code":"user_error"`) || !strings.Contains(string(out), `"status":"failed"`) {
		t.Errorf("error in ACP v2: %s (%v)", out, err)
	}
	query, err := b.Request("dialect:acp:agent", protocol.IntentQuery, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromIACP(query, ACPv2); protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !strings.Contains(err.Error(), "capability query") {
		t.Errorf("a capability query into ACP v2: %v, want CAPABILITY_MISMATCH", err)
	}
}

// An IACP request that requires approval reaches an ACP v2 agent as a command with
// security.requireApproval: true (the flag travels on; docs/coordination.md "Approval").
func TestACPv2_RequireApprovalTravels(t *testing.T) {
	b := builder(t)
	req, err := b.Request("code-agent", protocol.IntentHandoff, map[string]any{"deploy": "prod"},
		protocol.WithSecurity(protocol.Security{RequireApproval: true}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := FromIACP(req, ACPv2)
	if err != nil || !strings.Contains(string(out), `"security":{"permissions":[],"requireApproval":true}`) {
		t.Fatalf("FromIACP: %s %v; want security.requireApproval true", out, err)
	}
}
