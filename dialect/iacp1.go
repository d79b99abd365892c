package dialect

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// iacp1 translates the IaCP Specification 1.0-draft (specs/000).
type iacp1 struct{}

// iacp1Kind is how one IaCP 1.0 message_type maps to IACP, and what its payload needs.
type iacp1Kind struct {
	t      protocol.Type
	intent protocol.Intent
	// need is the payload member the draft's example of the type always has.
	need string
	// reply says the type answers another message: parent_message_id is required.
	reply bool
}

// iacp1Kinds: section 4's message types, 3.3's event_notification and 5.4.2's error_response.
var iacp1Kinds = map[string]iacp1Kind{
	"task_request":       {protocol.TypeRequest, protocol.IntentHandoff, "task_type", false},
	"task_response":      {protocol.TypeResponse, protocol.IntentHandoff, "status", true},
	"tool_request":       {protocol.TypeRequest, intentTool, "tool_name", false},
	"tool_response":      {protocol.TypeResponse, intentTool, "status", true},
	"context_share":      {protocol.TypeEvent, protocol.IntentNotify, "context_type", false},
	"knowledge_update":   {protocol.TypeEvent, protocol.IntentNotify, "update_type", false},
	"event_notification": {protocol.TypeEvent, protocol.IntentNotify, "event_type", false},
	"agent_register":     {protocol.TypeEvent, protocol.IntentNotify, "agent_info", false},
	"agent_discover":     {protocol.TypeRequest, protocol.IntentQuery, "discovery_type", false},
	"workflow_start":     {protocol.TypeRequest, protocol.IntentNegotiate, "workflow_id", false},
	"error_response":     {protocol.TypeError, protocol.IntentNotify, "error_code", false},
}

// intentTool is the custom intent of IaCP 1.0's tool_request and tool_response.
const intentTool protocol.Intent = "x-tool"

// The enumerations of IaCP 1.0's payloads and metadata.
var (
	iacp1Priorities   = []string{"low", "normal", "high", "urgent"}
	iacp1TaskStatus   = []string{"accepted", "rejected", "completed", "failed", "in_progress"}
	iacp1ToolStatus   = []string{"success", "error", "permission_denied"}
	iacp1UpdateTypes  = []string{"learned", "corrected", "deprecated"}
	iacp1MessageTypes = sortedKeys(iacp1Kinds)
)

func (iacp1) validate(m Members) error {
	c := checker{d: IaCP1, m: m}
	v, err := c.str("iacp_version", true)
	if err != nil {
		return err
	}
	if major, _, _ := strings.Cut(v, "."); major != "1" {
		return protocol.Errorf(protocol.CodeVersionUnsupported, "iacp-1.0 document: iacp_version %q is not supported; supported: 1.0", clip(v))
	}
	if err := c.uuid("message_id"); err != nil {
		return err
	}
	if _, err := c.time("timestamp", true); err != nil {
		return err
	}
	if err := iacp1Parties(c); err != nil {
		return err
	}
	mt, err := c.oneOf("message_type", true, iacp1MessageTypes...)
	if err != nil {
		return err
	}
	for _, k := range []string{"conversation_id", "parent_message_id"} {
		if _, err := c.text(k, false); err != nil {
			return err
		}
	}
	if iacp1Kinds[mt].reply {
		if _, err := c.text("parent_message_id", true); err != nil {
			return invalid(IaCP1, "parent_message_id", "is required in a %s: set it to the message_id of the request", mt)
		}
	}
	if err := iacp1Metadata(c); err != nil {
		return err
	}
	return iacp1Payload(c, mt)
}

func iacp1Parties(c checker) error {
	if err := c.agent("sender"); err != nil {
		return err
	}
	r, _, err := c.object("recipient", true)
	if err != nil {
		return err
	}
	broadcast, err := r.boolean("broadcast")
	if err != nil {
		return err
	}
	if _, has := r.m["agent_id"]; has || !broadcast {
		if err := r.agentID("agent_id"); err != nil {
			return invalid(IaCP1, "recipient.agent_id", "is required unless recipient.broadcast is true (%v)", err)
		}
	}
	return nil
}

func iacp1Metadata(c checker) error {
	md, ok, err := c.object("metadata", false)
	if err != nil || !ok {
		return err
	}
	if _, err := md.oneOf("priority", false, iacp1Priorities...); err != nil {
		return err
	}
	if _, err := md.time("expires_at", false); err != nil {
		return err
	}
	if _, err := md.boolean("requires_response"); err != nil {
		return err
	}
	_, _, err = md.number("response_timeout", 0.001, math.MaxInt32)
	return err
}

func iacp1Payload(c checker, mt string) error {
	p, _, err := c.object("payload", true)
	if err != nil {
		return err
	}
	kind := iacp1Kinds[mt]
	if err := p.present(kind.need); err != nil {
		return invalid(IaCP1, "payload."+kind.need, "is required in a %s", mt)
	}
	switch mt {
	case "task_request":
		if _, err = p.text("task_type", true); err == nil {
			_, err = p.oneOf("priority", false, iacp1Priorities...)
		}
	case "task_response":
		if _, err = p.oneOf("status", true, iacp1TaskStatus...); err == nil {
			_, _, err = p.number("progress", 0, 1)
		}
	case "tool_response":
		_, err = p.oneOf("status", true, iacp1ToolStatus...)
	case "knowledge_update":
		_, err = p.oneOf("update_type", true, iacp1UpdateTypes...)
	case "agent_register":
		var info checker
		if info, _, err = p.object("agent_info", true); err == nil {
			err = info.agentID("agent_id")
		}
	case "tool_request", "context_share", "event_notification", "agent_discover", "workflow_start", "error_response":
		_, err = p.text(kind.need, true)
	}
	return err
}

func (iacp1) toIACP(m Members, now time.Time) (*Draft, map[string]any, error) {
	mt := str(m, "message_type")
	kind := iacp1Kinds[mt]
	d := &Draft{Type: kind.t, Intent: kind.intent, MessageID: str(m, "message_id"), Payload: m["payload"],
		Sender: strField(m["sender"], "agent_id")}
	recipient := payloadOf(m["recipient"])
	var broadcast bool
	_ = json.Unmarshal(recipient["broadcast"], &broadcast)
	d.To = str(recipient, "agent_id")
	if broadcast {
		d.To = protocol.Broadcast
	}
	d.CorrelationID = str(m, "parent_message_id")
	if d.CorrelationID == "" {
		d.CorrelationID = str(m, "conversation_id")
	}
	payload := payloadOf(m["payload"])
	md := payloadOf(m["metadata"])
	d.Priority = str(md, "priority")
	if d.Priority == "" {
		d.Priority = str(payload, "priority")
	}
	if exp := str(md, "expires_at"); exp != "" {
		t, _ := time.Parse(time.RFC3339Nano, exp)
		if !t.After(now) {
			return nil, nil, protocol.Errorf(protocol.CodeTimeout, "iacp-1.0 document: metadata.expires_at %s has passed; send it again with a later expiry", exp)
		}
		d.TTL = t.Sub(now)
	} else if raw, ok := md["response_timeout"]; ok {
		var s float64
		_ = json.Unmarshal(raw, &s)
		d.TTL = time.Duration(math.Ceil(s)) * time.Second
	}
	return d, iacp1Fit(mt, payload), nil
}

// iacp1Fit returns the payload members IACP needs for message type mt.
func iacp1Fit(mt string, p Members) map[string]any {
	switch kind := iacp1Kinds[mt]; kind.t {
	case protocol.TypeResponse:
		status := map[string]string{"accepted": "accepted", "rejected": "rejected", "completed": "accepted",
			"failed": "rejected", "in_progress": "pending", "success": "accepted", "error": "rejected",
			"permission_denied": "rejected"}[str(p, "status")]
		return map[string]any{"status": status}
	case protocol.TypeEvent:
		if mt == "event_notification" {
			return nil
		}
		return map[string]any{"event_type": mt}
	case protocol.TypeError:
		code, ok := protocol.MapForeignCode(protocol.DialectIaCP1, str(p, "error_code"))
		if !ok {
			code = protocol.CodeInternalError
		}
		retry := code.Retryable()
		_ = json.Unmarshal(p["retry_allowed"], &retry)
		msg := str(p, "error_message")
		if msg == "" {
			msg = str(p, "error_code")
		}
		return map[string]any{"code": code, "message": msg, "retryable": retry}
	}
	return nil
}

func (iacp1) derive(v *view) (Members, error) {
	mt, err := iacp1Type(v)
	if err != nil {
		return nil, err
	}
	p := payloadOf(v.Payload)
	if p == nil {
		return nil, inexpressible(IaCP1, "the payload is not a JSON object")
	}
	iacp1FillPayload(mt, p)
	doc := Members{"iacp_version": raw("1.0"), "message_id": raw(v.MessageID), "timestamp": raw(v.Timestamp),
		"sender": agentObject(v.From), "message_type": raw(mt), "payload": raw(p)}
	if v.To == protocol.Broadcast {
		doc["recipient"] = raw(map[string]bool{"broadcast": true})
	} else {
		doc["recipient"] = agentObject(v.To)
	}
	if v.Correlation != "" {
		if iacp1Kinds[mt].t == protocol.TypeRequest || iacp1Kinds[mt].t == protocol.TypeEvent {
			doc["conversation_id"] = raw(v.Correlation)
		} else {
			doc["parent_message_id"] = raw(v.Correlation)
		}
	}
	if v.Type == protocol.TypeRequest {
		doc["metadata"] = raw(map[string]any{"requires_response": true, "response_timeout": v.TTL})
	}
	return doc, nil
}

// iacp1Type chooses the IaCP 1.0 message_type of an IACP message.
func iacp1Type(v *view) (string, error) {
	switch v.Type {
	case protocol.TypeRequest:
		switch v.Intent {
		case intentTool:
			return "tool_request", nil
		case protocol.IntentQuery:
			return "agent_discover", nil
		case protocol.IntentNegotiate:
			return "workflow_start", nil
		}
		return "task_request", nil
	case protocol.TypeResponse:
		if v.Intent == intentTool {
			return "tool_response", nil
		}
		return "task_response", nil
	case protocol.TypeEvent:
		switch et := str(payloadOf(v.Payload), "event_type"); et {
		case "context_share", "knowledge_update", "agent_register":
			return et, nil
		}
		return "event_notification", nil
	case protocol.TypeError:
		return "error_response", nil
	}
	return "", inexpressible(IaCP1, "it has no %s message; IaCP 1.0 keeps heartbeats below its messages", v.Type)
}

// iacp1FillPayload sets what IaCP 1.0 requires of a payload that came from IACP.
func iacp1FillPayload(mt string, p Members) {
	switch mt {
	case "task_request":
		if _, ok := p["task_type"]; !ok {
			p["task_type"] = raw("iacp")
		}
	case "task_response":
		s := str(p, "status")
		if s == protocol.ResponsePending {
			p["status"] = raw("in_progress")
		} else if s == protocol.ResponseCounter {
			p["status"] = raw("rejected")
		}
	case "error_response":
		if _, ok := p["error_code"]; !ok {
			p["error_code"] = raw(foreignCode(protocol.DialectIaCP1, protocol.Code(str(p, "code"))))
		}
		if _, ok := p["error_message"]; !ok && str(p, "message") != "" {
			p["error_message"] = p["message"]
		}
		if _, ok := p["retry_allowed"]; !ok {
			if r, ok := p["retryable"]; ok {
				p["retry_allowed"] = r
			}
		}
	}
}

// foreignCode returns the first code of dialect d that maps to our code c, or c itself.
func foreignCode(d string, c protocol.Code) string {
	for _, f := range protocol.ForeignCodes() {
		if f.Dialect == d && f.IACP == c {
			return f.Code
		}
	}
	return string(c)
}
