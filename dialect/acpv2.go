package dialect

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// acpv2 translates ACP v2.0 (specs/002): AgentCommand and AgentResponse. A document with
// commandId is an AgentResponse, any other an AgentCommand: the draft's own AuditLogger tells
// them apart so.
type acpv2 struct{}

// The enumerations of the draft's "Type Definitions".
var (
	acpActions    = []string{"ANALYZE", "DESIGN", "IMPLEMENT", "VALIDATE", "OPTIMIZE", "REFACTOR", "DOCUMENT", "TEST", "EXECUTE"}
	acpPriorities = []string{"low", "medium", "high", "critical"}
	acpStatuses   = []string{"success", "partial", "failed", "timeout", "cancelled"}
)

// acpPriority puts the draft's priorities on IACP's scale; acpPriorityBack is the reverse.
var (
	acpPriority     = map[string]string{"low": "low", "medium": "normal", "high": "high", "critical": "urgent"}
	acpPriorityBack = map[string]string{"low": "low", "normal": "medium", "high": "high", "urgent": "critical"}
)

// acpActionMember is the IACP payload member that carries an AgentCommand's action beside its
// parameters, so that an agent of any dialect sees what it is asked to do.
const acpActionMember = "action"

// acpMaxMillis bounds a timeout (ms): the largest TTL in seconds an int32 holds.
const acpMaxMillis = math.MaxInt32 * 1000.0

func acpIsResponse(m Members) bool {
	_, ok := m["commandId"]
	return ok
}

func (acpv2) validate(m Members) error {
	c := checker{d: ACPv2, m: m}
	v, err := c.str("version", true)
	if err != nil {
		return err
	}
	if major, _, _ := strings.Cut(v, "."); major != "2" {
		return protocol.Errorf(protocol.CodeVersionUnsupported, "acp-v2 document: version %q is not supported; supported: 2.0", clip(v))
	}
	if err := c.id("id", true); err != nil {
		return err
	}
	if _, err := c.time("timestamp", true); err != nil {
		return err
	}
	if err := c.agentID("from"); err != nil {
		return err
	}
	if acpIsResponse(m) {
		return acpResponse(c)
	}
	return acpCommand(c)
}

// acpCommand checks an AgentCommand's members beyond the identity.
func acpCommand(c checker) error {
	if err := c.agentID("to"); err != nil {
		return err
	}
	if _, err := c.oneOf("priority", true, acpPriorities...); err != nil {
		return err
	}
	if _, err := c.oneOf("action", true, acpActions...); err != nil {
		return err
	}
	if _, _, err := c.object("parameters", true); err != nil {
		return err
	}
	ctx, ok, err := c.object("context", false)
	if err != nil {
		return err
	}
	if ok {
		if err := ctx.id("correlationId", false); err != nil {
			return err
		}
		if _, _, err := ctx.number("timeout", 1, acpMaxMillis); err != nil {
			return err
		}
		if err := acpRetryPolicy(ctx); err != nil {
			return err
		}
	}
	sec, ok, err := c.object("security", false)
	if err != nil || !ok {
		return err
	}
	if _, err := sec.strs("permissions", true, protocol.MaxPermissions); err != nil {
		return err
	}
	_, err = sec.boolean("requireApproval")
	return err
}

func acpRetryPolicy(ctx checker) error {
	rp, ok, err := ctx.object("retryPolicy", false)
	if err != nil || !ok {
		return err
	}
	for _, k := range []string{"maxAttempts", "backoffMs"} {
		if err := rp.present(k); err != nil {
			return err
		}
		if _, _, err := rp.number(k, 0, math.MaxInt32); err != nil {
			return err
		}
	}
	return nil
}

// acpResponse checks an AgentResponse's members beyond the identity.
func acpResponse(c checker) error {
	if err := c.id("commandId", true); err != nil {
		return err
	}
	if _, has := c.m["to"]; has { // not the draft's, but its own example logs one
		if err := c.agentID("to"); err != nil {
			return err
		}
	}
	if _, err := c.oneOf("status", true, acpStatuses...); err != nil {
		return err
	}
	if err := acpResults(c); err != nil {
		return err
	}
	if ex, ok, err := c.object("execution", false); err != nil {
		return err
	} else if ok {
		if err := ex.present("duration"); err != nil {
			return err
		}
		for _, k := range []string{"duration", "tokensUsed"} {
			if _, _, err := ex.number(k, 0, math.MaxFloat64); err != nil {
				return err
			}
		}
	}
	e, ok, err := c.object("error", false)
	if err != nil || !ok {
		return err
	}
	if _, err := e.text("code", true); err != nil {
		return err
	}
	if err := e.present("message"); err != nil {
		return err
	}
	if _, err := e.text("message", false); err != nil {
		return err
	}
	if err := e.present("recoverable"); err != nil {
		return err
	}
	_, err = e.boolean("recoverable")
	return err
}

func acpResults(c checker) error {
	r, _, err := c.object("results", true)
	if err != nil {
		return err
	}
	if _, err := r.text("summary", false); err != nil {
		return err
	}
	artifacts, err := r.objects("artifacts")
	if err != nil {
		return err
	}
	for _, a := range artifacts {
		for _, k := range []string{"id", "type", "path"} {
			if _, err := a.text(k, true); err != nil {
				return err
			}
		}
		if err := a.present("description"); err != nil {
			return err
		}
		if _, err := a.text("description", false); err != nil {
			return err
		}
	}
	return nil
}

func (acpv2) toIACP(m Members, _ time.Time) (*Draft, map[string]any, error) {
	d := &Draft{Intent: protocol.IntentHandoff, Sender: str(m, "from"), To: str(m, "to")}
	if id := str(m, "id"); isUUID(id) {
		d.MessageID = id
	}
	if acpIsResponse(m) {
		fit := acpResponseDraft(m, d)
		return d, fit, nil
	}
	d.Type = protocol.TypeRequest
	d.Payload = m["parameters"]
	d.Priority = acpPriority[str(m, "priority")]
	ctx := payloadOf(m["context"])
	d.CorrelationID = str(ctx, "correlationId")
	if raw, ok := ctx["timeout"]; ok {
		var ms float64
		_ = json.Unmarshal(raw, &ms)
		d.TTL = time.Duration(math.Ceil(ms/1000)) * time.Second
	}
	var sec struct {
		Permissions     []string `json:"permissions"`
		RequireApproval bool     `json:"requireApproval"`
	}
	_ = json.Unmarshal(m["security"], &sec)
	d.Security.Permissions, d.Security.RequireApproval = sec.Permissions, sec.RequireApproval
	return d, map[string]any{acpActionMember: str(m, "action")}, nil
}

// acpResponseDraft fills d for an AgentResponse and returns the payload members IACP needs:
// success and partial are a response accepted, cancelled one rejected; failed and timeout are
// an error whose code comes from error.code through protocol's table.
func acpResponseDraft(m Members, d *Draft) map[string]any {
	d.CorrelationID = str(m, "commandId")
	d.Payload = m["results"]
	d.Type = protocol.TypeResponse
	switch status := str(m, "status"); status {
	case "success", "partial":
		return map[string]any{"status": protocol.ResponseAccepted}
	case "cancelled":
		return map[string]any{"status": protocol.ResponseRejected}
	default:
		d.Type = protocol.TypeError
		e := payloadOf(m["error"])
		category := str(e, "code")
		code, ok := protocol.MapForeignCode(protocol.DialectACPv2, category)
		switch {
		case ok:
		case status == "timeout":
			code = protocol.CodeTimeout
		default:
			code = protocol.CodeInternalError
		}
		msg := str(e, "message")
		if msg == "" {
			msg = strField(m["results"], "summary")
		}
		if msg == "" {
			msg = "the command's status is " + status
		}
		retry := code.Retryable()
		if r, ok := e["recoverable"]; ok {
			_ = json.Unmarshal(r, &retry)
		}
		return map[string]any{"code": code, "message": msg, "retryable": retry}
	}
}

func (acpv2) derive(v *view) (Members, error) {
	p := payloadOf(v.Payload)
	if p == nil {
		return nil, inexpressible(ACPv2, "the payload is not a JSON object")
	}
	doc := Members{"id": raw(v.MessageID), "timestamp": raw(v.Timestamp), "version": raw("2.0"), "from": raw(v.From)}
	switch v.Type {
	case protocol.TypeRequest:
		return acpDeriveCommand(v, p, doc)
	case protocol.TypeResponse, protocol.TypeError:
		return acpDeriveResponse(v, p, doc)
	}
	return nil, inexpressible(ACPv2, "it has AgentCommand and AgentResponse only, no message of type %s", v.Type)
}

// acpDeriveCommand writes an AgentCommand: the action from the payload's action member when
// it is one of the draft's, else EXECUTE; the parameters are the rest of the payload.
func acpDeriveCommand(v *view, p, doc Members) (Members, error) {
	switch {
	case v.Intent == protocol.IntentQuery:
		return nil, inexpressible(ACPv2, "a capability query is the node's to answer, and no ACP action asks for capabilities")
	case v.To == protocol.Broadcast:
		return nil, inexpressible(ACPv2, "an AgentCommand names one agent in to; send one command per agent, as the draft's broadcast pattern does")
	}
	action := "EXECUTE"
	if a := str(p, acpActionMember); slices.Contains(acpActions, a) {
		action = a
		delete(p, acpActionMember)
	}
	priority := acpPriorityBack[v.Priority]
	if priority == "" {
		priority = "medium"
	}
	doc["to"], doc["priority"], doc["action"], doc["parameters"] = raw(v.To), raw(priority), raw(action), raw(p)
	// Always written, so that a command without one is told apart (Extension.Absent).
	ctx := Members{"timeout": raw(v.TTL * 1000)}
	if v.Correlation != "" {
		ctx["correlationId"] = raw(v.Correlation)
	}
	doc["context"] = raw(ctx)
	if len(v.Permissions) > 0 || v.RequireApproval {
		// The draft requires permissions in a security member: an empty list when none.
		sec := Members{"permissions": raw(append([]string{}, v.Permissions...))}
		if v.RequireApproval {
			sec["requireApproval"] = raw(true)
		}
		doc["security"] = raw(sec)
	}
	return doc, nil
}

// acpDeriveResponse writes an AgentResponse to the command named by the correlation id.
func acpDeriveResponse(v *view, p, doc Members) (Members, error) {
	if v.Correlation == "" {
		return nil, inexpressible(ACPv2, "an AgentResponse names the command it answers in commandId, and this %s has no correlation_id", v.Type)
	}
	doc["commandId"] = raw(v.Correlation)
	if v.Type == protocol.TypeResponse {
		// A rejection is a command not carried out, without fault: cancelled, which reads back
		// as a response rejected (a counter-proposal is one too: the command as sent was not).
		status := map[string]string{protocol.ResponsePending: "partial", protocol.ResponseRejected: "cancelled",
			protocol.ResponseCounter: "cancelled"}[str(p, "status")]
		if status == "" {
			status = "success"
		}
		doc["status"], doc["results"] = raw(status), raw(p)
		return doc, nil
	}
	code := protocol.Code(str(p, "code"))
	status := "failed"
	if code == protocol.CodeTimeout {
		status = "timeout"
	}
	var retry bool
	_ = json.Unmarshal(p["retryable"], &retry)
	results := Members{}
	if detail, ok := p["detail"]; ok {
		results["data"] = detail
	}
	doc["status"], doc["results"] = raw(status), raw(results)
	doc["error"] = raw(map[string]any{"code": foreignCode(protocol.DialectACPv2, code), "message": str(p, "message"), "recoverable": retry})
	return doc, nil
}
