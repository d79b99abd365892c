package dialect

import (
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// eliza translates the ElizaOS multi-agent draft's performatives (specs/004).
type eliza struct{}

// elizaKind is how one performative maps to IACP, and what it requires.
type elizaKind struct {
	t      protocol.Type
	intent protocol.Intent
	// need is the payload member section 4 shows without "optional"; "" when none.
	need string
	// reply: section 4 says the performative "Must include in_reply_to".
	reply bool
}

// The custom intents of QUERY_IF and QUERY_REF: questions for the agent, not the node's
// capability query (intent query, which QUERY_CAPABILITIES maps to).
const (
	intentQueryIf  protocol.Intent = "x-query-if"
	intentQueryRef protocol.Intent = "x-query-ref"
)

// elizaKinds: the performatives of section 4.
var elizaKinds = map[string]elizaKind{
	"TASK_REQUEST":        {protocol.TypeRequest, protocol.IntentHandoff, "task_type", false},
	"TASK_ACCEPT":         {protocol.TypeResponse, protocol.IntentHandoff, "", true},
	"INFORM_RESULT":       {protocol.TypeResponse, protocol.IntentHandoff, "task_status", true},
	"TASK_REJECT":         {protocol.TypeResponse, protocol.IntentHandoff, "", true},
	"QUERY_IF":            {protocol.TypeRequest, intentQueryIf, "condition", false},
	"QUERY_REF":           {protocol.TypeRequest, intentQueryRef, "reference", false},
	"FAILURE":             {protocol.TypeError, protocol.IntentHandoff, "error_text", true},
	"NOT_UNDERSTOOD":      {protocol.TypeError, protocol.IntentNotify, "reason_code", true},
	"QUERY_CAPABILITIES":  {protocol.TypeRequest, protocol.IntentQuery, "", false},
	"INFORM_CAPABILITIES": {protocol.TypeResponse, protocol.IntentQuery, "capabilities", true},
}

var (
	elizaPerformatives = sortedKeys(elizaKinds)
	elizaTaskStatus    = []string{"success", "failure", "partial_success"}
	elizaPriorities    = []string{"low", "medium", "high"}
)

func (eliza) validate(m Members) error {
	c := checker{d: ElizaOS, m: m}
	v, err := c.str("mcp_version", true)
	if err != nil {
		return err
	}
	if major, _, _ := strings.Cut(v, "."); major != "0" {
		return protocol.Errorf(protocol.CodeVersionUnsupported, "elizaos document: mcp_version %q is not supported; supported: 0.1.0", clip(v))
	}
	if err := c.uuid("message_id"); err != nil {
		return err
	}
	perf, err := c.oneOf("performative", true, elizaPerformatives...)
	if err != nil {
		return err
	}
	for _, k := range []string{"sender", "receiver"} {
		if err := c.agent(k); err != nil {
			return err
		}
	}
	for _, k := range []string{"in_reply_to", "reply_with", "language", "ontology"} {
		if _, err := c.text(k, false); err != nil {
			return err
		}
	}
	kind := elizaKinds[perf]
	if _, err := c.text("in_reply_to", kind.reply); err != nil {
		return invalid(ElizaOS, "in_reply_to", "is required in a %s: set it to the message_id (or reply_with) of the message it answers", perf)
	}
	if _, err := c.time("timestamp", true); err != nil {
		return err
	}
	return elizaPayload(c, perf)
}

func elizaPayload(c checker, perf string) error {
	p, _, err := c.object("payload", true)
	if err != nil {
		return err
	}
	kind := elizaKinds[perf]
	if kind.need != "" {
		if err := p.present(kind.need); err != nil {
			return invalid(ElizaOS, "payload."+kind.need, "is required in a %s", perf)
		}
	}
	switch perf {
	case "TASK_REQUEST":
		if _, err = p.text("task_type", true); err == nil {
			_, err = p.oneOf("priority", false, elizaPriorities...)
		}
	case "INFORM_RESULT":
		_, err = p.oneOf("task_status", true, elizaTaskStatus...)
	case "TASK_ACCEPT":
		_, err = p.oneOf("status", false, "accepted")
	case "TASK_REJECT":
		_, err = p.oneOf("status", false, "rejected")
	case "FAILURE":
		if _, err = p.oneOf("status", false, "failure"); err == nil {
			_, err = p.text("error_text", true)
		}
	case "NOT_UNDERSTOOD", "QUERY_REF":
		_, err = p.text(kind.need, true)
	case "INFORM_CAPABILITIES":
		_, _, err = p.object("capabilities", true)
	}
	return err
}

// elizaPriority puts the draft's low, medium, high on IACP's scale.
var elizaPriority = map[string]string{"low": "low", "medium": "normal", "high": "high"}

func (eliza) toIACP(m Members, _ time.Time) (*Draft, map[string]any, error) {
	perf := str(m, "performative")
	kind := elizaKinds[perf]
	d := &Draft{Type: kind.t, Intent: kind.intent, MessageID: str(m, "message_id"), Payload: m["payload"],
		Sender: strField(m["sender"], "agent_id"), To: strField(m["receiver"], "agent_id"),
		Priority: elizaPriority[strField(m["payload"], "priority")]}
	d.CorrelationID = str(m, "in_reply_to")
	if d.CorrelationID == "" {
		d.CorrelationID = str(m, "reply_with")
	}
	return d, elizaFit(perf, m["payload"]), nil
}

// elizaFit returns the payload members IACP needs for a performative; payload is read only
// for those that need it.
func elizaFit(perf string, payload []byte) map[string]any {
	var p Members
	switch perf {
	case "INFORM_RESULT", "FAILURE", "NOT_UNDERSTOOD":
		p = payloadOf(payload)
	}
	switch perf {
	case "TASK_ACCEPT", "INFORM_CAPABILITIES":
		return map[string]any{"status": protocol.ResponseAccepted}
	case "TASK_REJECT":
		return map[string]any{"status": protocol.ResponseRejected}
	case "INFORM_RESULT":
		if str(p, "task_status") == "failure" {
			return map[string]any{"status": protocol.ResponseRejected}
		}
		return map[string]any{"status": protocol.ResponseAccepted}
	case "FAILURE", "NOT_UNDERSTOOD":
		reason, text := str(p, "error_code"), str(p, "error_text")
		if perf == "NOT_UNDERSTOOD" {
			reason, text = str(p, "reason_code"), str(p, "reason_text")
		}
		code, ok := protocol.MapForeignCode(protocol.DialectElizaOS, reason)
		if !ok {
			code, _ = protocol.MapForeignCode(protocol.DialectElizaOS, perf)
		}
		if text == "" {
			text = reason
		}
		return map[string]any{"code": code, "message": text, "retryable": code.Retryable()}
	}
	return nil
}

func (eliza) derive(v *view) (Members, error) {
	p := payloadOf(v.Payload)
	if p == nil {
		return nil, inexpressible(ElizaOS, "the payload is not a JSON object")
	}
	perf, err := elizaPerformative(v, p)
	if err != nil {
		return nil, err
	}
	elizaFillPayload(perf, v, p)
	doc := Members{"mcp_version": raw("0.1.0"), "message_id": raw(v.MessageID), "performative": raw(perf),
		"sender": agentObject(v.From), "receiver": agentObject(v.To),
		"timestamp": raw(v.Timestamp), "payload": raw(p)}
	if v.Correlation != "" {
		if elizaKinds[perf].reply {
			doc["in_reply_to"] = raw(v.Correlation)
		} else {
			doc["reply_with"] = raw(v.Correlation)
		}
	}
	return doc, nil
}

// elizaPerformative chooses the performative of an IACP message.
func elizaPerformative(v *view, p Members) (string, error) {
	switch v.Type {
	case protocol.TypeRequest:
		switch v.Intent {
		case protocol.IntentQuery:
			return "QUERY_CAPABILITIES", nil
		case intentQueryIf:
			return "QUERY_IF", nil
		case intentQueryRef:
			return "QUERY_REF", nil
		}
		return "TASK_REQUEST", nil
	case protocol.TypeResponse:
		switch {
		case v.Intent == protocol.IntentQuery:
			return "INFORM_CAPABILITIES", nil
		case str(p, "task_status") != "":
			return "INFORM_RESULT", nil
		case str(p, "status") == protocol.ResponseRejected || str(p, "status") == protocol.ResponseCounter:
			return "TASK_REJECT", nil
		}
		return "TASK_ACCEPT", nil
	case protocol.TypeError:
		if v.Intent == protocol.IntentNotify {
			return "NOT_UNDERSTOOD", nil
		}
		return "FAILURE", nil
	}
	return "", inexpressible(ElizaOS, "it has no performative for an IACP %s (section 4 lists requests, replies and failures only)", v.Type)
}

// elizaFillPayload sets what a performative requires of a payload that came from IACP.
func elizaFillPayload(perf string, v *view, p Members) {
	setIfAbsent := func(k string, val any) {
		if _, ok := p[k]; !ok {
			p[k] = raw(val)
		}
	}
	switch perf {
	case "TASK_REQUEST":
		setIfAbsent("task_type", string(v.Intent))
	case "TASK_ACCEPT":
		p["status"] = raw("accepted")
	case "TASK_REJECT":
		p["status"] = raw("rejected")
	case "INFORM_CAPABILITIES":
		if _, ok := p["manifest"]; ok {
			setIfAbsent("capabilities", p["manifest"])
		}
		setIfAbsent("capabilities", Members{})
		p["status"] = raw("success")
	case "FAILURE":
		p["status"] = raw("failure")
		setIfAbsent("error_code", foreignCode(protocol.DialectElizaOS, protocol.Code(str(p, "code"))))
		setIfAbsent("error_text", str(p, "message"))
	case "NOT_UNDERSTOOD":
		setIfAbsent("reason_code", foreignCode(protocol.DialectElizaOS, protocol.Code(str(p, "code"))))
		setIfAbsent("reason_text", str(p, "message"))
	}
}
