package dialect

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// a2acp translates A2ACP v1.0 (specs/003). A document is checked against the draft's own JSON
// Schema (a2acp_schema.go), then against what its prose adds: an error's payload.error, ids
// that are UUIDs, bounded strings.
type a2acp struct{}

// a2acpTypes: message_type is one of IACP's own types.
var a2acpTypes = map[string]protocol.Type{
	"request": protocol.TypeRequest, "response": protocol.TypeResponse,
	"event": protocol.TypeEvent, "error": protocol.TypeError,
}

// a2acpCodes are the draft's "Standard Error Codes", read from protocol's table.
var a2acpCodes = func() (codes []string) {
	for _, f := range protocol.ForeignCodes() {
		if f.Dialect == protocol.DialectA2ACP {
			codes = append(codes, f.Code)
		}
	}
	return codes
}()

// a2acpCodeBack names the draft's code for the IACP codes that no row of protocol's table maps
// to (the others go back through the table, as foreignCode finds them).
var a2acpCodeBack = map[protocol.Code]string{
	// "Incompatible versions: Contract validation fails with SCHEMA_MISMATCH".
	protocol.CodeVersionUnsupported: "SCHEMA_MISMATCH",
	// The table's typical cause of CAPABILITY_NOT_FOUND: "Agent not registered".
	protocol.CodeAgentNotFound:  "CAPABILITY_NOT_FOUND",
	protocol.CodeChannelUnknown: "CAPABILITY_NOT_FOUND",
	// Sending a message id again is a sender's bug.
	protocol.CodeDuplicate: "CONTRACT_VIOLATION",
}

// What an agent derived from an IACP agent id gets for the members IACP has no value for.
const (
	// a2acpDomain is the domain of an id without a namespace (a bare name, or *); an id
	// namespace:host:name is in domain namespace, as the mesh authority's tokens say.
	a2acpDomain = "iacp"
	// a2acpVersion is an agent's version: IACP does not version agents; 0.0.0 is unknown.
	a2acpVersion = "0.0.0"
)

// maxTokenBytes bounds security.auth_token: authority.MaxTokenBytes, beyond which the node's
// verifier refuses a token anyway (dialect and authority share a floor, so a test keeps the
// two equal).
const maxTokenBytes = 8 << 10

// a2acpIntentSyntax is an intent that becomes the IACP custom intent "x-" + intent: letters,
// digits, '.', '_' and '-', starting with a letter or a digit, 64 characters with the "x-".
var a2acpIntentSyntax = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,61}$`)

// a2acpEventType is an event's event_type when it has neither one nor an intent.
const a2acpEventType = "event"

// validate checks the major version first, so that a document of another major, whose shape
// may differ, is VERSION_UNSUPPORTED rather than a shape error; then the draft's schema; then
// the draft's prose.
func (a2acp) validate(m Members) error {
	var v string
	if json.Unmarshal(m["protocol_version"], &v) == nil { // absent, or no string: the schema says so
		if major, _, _ := strings.Cut(v, "."); isDigits(major) && strings.TrimLeft(major, "0") != "1" {
			return protocol.Errorf(protocol.CodeVersionUnsupported, "a2acp document: protocol_version %q is not supported; supported: 1.0", clip(v))
		}
	}
	if err := a2acpSchemaCheck(m); err != nil {
		return err
	}
	c := checker{d: A2ACP, prefix: "/", m: m, pointer: true}
	if err := c.uuid("message_id"); err != nil {
		return err
	}
	for _, k := range []string{"source_agent", "target_agent"} {
		a, _, err := c.object(k, true)
		if err != nil {
			return err
		}
		if err := a.agentID("agent_id"); err != nil {
			return err
		}
		if _, err := a.text("domain", true); err != nil {
			return err
		}
	}
	if err := a2acpSecurity(c); err != nil {
		return err
	}
	return a2acpPayload(c)
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// a2acpSecurity checks the token: present (the schema says so), not empty, not oversized.
func a2acpSecurity(c checker) error {
	sec, ok, err := c.object("security", false)
	if err != nil || !ok {
		return err
	}
	tok, err := sec.str("auth_token", true)
	if err != nil {
		return err
	}
	if len(tok) > maxTokenBytes {
		return invalid(A2ACP, sec.path("auth_token"), "is %d bytes; a token is at most %d", len(tok), maxTokenBytes)
	}
	return nil
}

// a2acpPayload checks the correlation ids the draft's examples carry in the payload, and an
// error's payload.error ("Error Response Format": code from the table, message, retry_after;
// details optional).
func a2acpPayload(c checker) error {
	isError := str(c.m, "message_type") == "error"
	p, ok, err := c.object("payload", false)
	switch {
	case err != nil:
		return err
	case !ok && isError:
		return invalid(A2ACP, c.path("payload"), `is required in an error: {"error": {"code", "message", "retry_after"}}`)
	case !ok:
		return nil
	}
	if err := p.id("correlation_id", false); err != nil {
		return err
	}
	if !isError {
		return nil
	}
	e, ok, err := p.object("error", false)
	if err != nil {
		return err
	}
	if !ok {
		return invalid(A2ACP, p.path("error"), `is required in an error: {"code", "message", "retry_after", "details"}`)
	}
	if _, err := e.oneOf("code", true, a2acpCodes...); err != nil {
		return err
	}
	if _, err := e.text("message", true); err != nil {
		return err
	}
	if err := e.present("retry_after"); err != nil {
		return invalid(A2ACP, e.path("retry_after"), "is required: the seconds to wait before a retry, 0 for none")
	}
	if _, _, err := e.number("retry_after", 0, math.MaxInt32); err != nil {
		return err
	}
	err = e.id("correlation_id", false)
	return err
}

func (a2acp) toIACP(m Members, _ time.Time) (*Draft, map[string]any, error) {
	mt, intent := str(m, "message_type"), str(m, "intent")
	payload := m["payload"]
	if payload == nil {
		payload = json.RawMessage("{}")
	}
	p := payloadOf(payload)
	t := a2acpTypes[mt]
	d := &Draft{Type: t, Intent: a2acpIntent(t, intent), MessageID: str(m, "message_id"), Payload: payload,
		Sender: strField(m["source_agent"], "agent_id"), To: strField(m["target_agent"], "agent_id")}
	d.CorrelationID = str(p, "correlation_id")
	if id := str(payloadOf(p["error"]), "correlation_id"); id != "" && t == protocol.TypeError {
		d.CorrelationID = id
	}
	d.Security.AuthToken = strField(m["security"], "auth_token")
	return d, a2acpFit(t, intent, p), nil
}

// a2acpIntent is the IACP intent of a message: "x-" + intent when the intent has the syntax of
// one (a2acpIntentSyntax), else the type's default (the intent then travels in the extension).
func a2acpIntent(t protocol.Type, intent string) protocol.Intent {
	if a2acpIntentSyntax.MatchString(intent) {
		return protocol.Intent("x-" + intent)
	}
	return a2acpDefaultIntent(t)
}

// a2acpDefaultIntent is the intent of a message without one: notify for an event, handoff for
// the others.
func a2acpDefaultIntent(t protocol.Type) protocol.Intent {
	if t == protocol.TypeEvent {
		return protocol.IntentNotify
	}
	return protocol.IntentHandoff
}

// a2acpFit returns the payload members IACP needs: a response's status (kept when it is one of
// IACP's, rejected for the handshake's "accepted": false, else accepted), an event's
// event_type (the intent), an error's code, message, retryable (retry_after > 0: the draft's
// "0 = don't retry"), retry_after and detail, from payload.error.
func a2acpFit(t protocol.Type, intent string, p Members) map[string]any {
	switch t {
	case protocol.TypeResponse:
		switch s := str(p, "status"); s {
		case protocol.ResponseAccepted, protocol.ResponseRejected, protocol.ResponsePending, protocol.ResponseCounter:
			return nil
		}
		accepted := true
		_ = json.Unmarshal(p["accepted"], &accepted)
		if !accepted {
			return map[string]any{"status": protocol.ResponseRejected}
		}
		return map[string]any{"status": protocol.ResponseAccepted}
	case protocol.TypeEvent:
		if str(p, "event_type") != "" {
			return nil
		}
		if intent == "" {
			intent = a2acpEventType
		}
		return map[string]any{"event_type": intent}
	case protocol.TypeError:
		e := payloadOf(p["error"])
		code, _ := protocol.MapForeignCode(protocol.DialectA2ACP, str(e, "code"))
		var after float64
		_ = json.Unmarshal(e["retry_after"], &after)
		fit := map[string]any{"code": code, "message": str(e, "message"), "retryable": after > 0}
		if after > 0 {
			fit["retry_after"] = after
		}
		if details, ok := e["details"]; ok {
			fit["detail"] = details
		}
		return fit
	}
	return nil
}

func (a2acp) derive(v *view) (Members, error) {
	mt, intent, err := a2acpTypeIntent(v)
	if err != nil {
		return nil, err
	}
	if v.To == "" {
		return nil, inexpressible(A2ACP, "a message names its target_agent, and this %s has no recipient", v.Type)
	}
	p := payloadOf(v.Payload)
	if p == nil {
		return nil, inexpressible(A2ACP, "the payload is not a JSON object")
	}
	a2acpFillPayload(v, p)
	doc := Members{"protocol_version": raw("1.0"), "message_id": raw(v.MessageID), "timestamp": raw(v.Timestamp),
		"source_agent": raw(a2acpAgent(v.From)), "target_agent": raw(a2acpAgent(v.To)),
		"message_type": raw(mt), "payload": raw(p)}
	if intent != "" {
		doc["intent"] = raw(intent)
	}
	if v.AuthToken != "" { // the payload is as the node carried it: in the clear
		doc["security"] = raw(Members{"auth_token": raw(v.AuthToken), "encryption": raw("none")})
	}
	return doc, nil
}

// a2acpTypeIntent chooses the message_type and intent of an IACP message: a custom intent
// without its "x-", none for the type's default, else the IACP intent's own name.
func a2acpTypeIntent(v *view) (mt, intent string, err error) {
	switch v.Type {
	case protocol.TypeRequest, protocol.TypeResponse, protocol.TypeEvent, protocol.TypeError:
		mt = string(v.Type)
	default:
		return "", "", inexpressible(A2ACP, "its message types are request, response, event and error; it has no %s", v.Type)
	}
	switch {
	case v.Type == protocol.TypeRequest && v.Intent == protocol.IntentQuery:
		return "", "", inexpressible(A2ACP, "a capability query is the node's to answer from its manifest, and the draft defines no message for capability discovery")
	case v.Intent == "" || v.Intent == a2acpDefaultIntent(v.Type):
		return mt, "", nil
	}
	if custom, ok := strings.CutPrefix(string(v.Intent), "x-"); ok && custom != "" {
		return mt, custom, nil
	}
	return mt, string(v.Intent), nil
}

// a2acpAgent is an agent of a derived document: the IACP id, its namespace as the domain.
func a2acpAgent(id string) Members {
	domain := a2acpDomain
	if ns, _, ok := strings.Cut(id, ":"); ok && ns != "" && ns != "*" {
		domain = ns
	}
	return Members{"agent_id": raw(id), "domain": raw(domain), "version": raw(a2acpVersion)}
}

// a2acpFillPayload sets what the draft requires of a payload that came from IACP: the
// correlation id where the draft's examples carry it, and an error's payload.error from the
// IACP error's members. What a valid document already has is left alone.
func a2acpFillPayload(v *view, p Members) {
	_, has := p["correlation_id"]
	if v.Type != protocol.TypeError {
		if !has && v.Correlation != "" {
			p["correlation_id"] = raw(v.Correlation)
		}
		return
	}
	e := payloadOf(p["error"])
	if e == nil {
		e = Members{}
	}
	ec := checker{d: A2ACP, m: e}
	code := protocol.Code(str(p, "code"))
	if _, err := ec.oneOf("code", true, a2acpCodes...); err != nil {
		e["code"] = raw(a2acpCode(code))
	}
	if _, err := ec.text("message", true); err != nil {
		msg := str(p, "message")
		if strings.TrimSpace(msg) == "" {
			msg = a2acpCodeText(code)
		}
		e["message"] = raw(msg)
	}
	if _, ok, err := ec.number("retry_after", 0, math.MaxInt32); !ok || err != nil {
		e["retry_after"] = raw(a2acpRetryAfter(p))
	}
	if detail, ok := p["detail"]; ok {
		if _, kept := e["details"]; !kept {
			e["details"] = detail
		}
	}
	if _, ok := e["correlation_id"]; !ok && !has && v.Correlation != "" {
		e["correlation_id"] = raw(v.Correlation)
	}
	p["error"] = raw(e)
}

// a2acpCode is the draft's code for an IACP code: INTERNAL_ERROR for one it has no near code
// for.
func a2acpCode(c protocol.Code) string {
	if s, ok := a2acpCodeBack[c]; ok {
		return s
	}
	if s := foreignCode(protocol.DialectA2ACP, c); slices.Contains(a2acpCodes, s) {
		return s
	}
	return "INTERNAL_ERROR"
}

// a2acpCodeText describes an IACP error that came without a message.
func a2acpCodeText(c protocol.Code) string {
	if info, ok := protocol.Lookup(c); ok {
		return info.Description
	}
	return "the agent reported an error"
}

// a2acpRetryAfter is the retry_after of an IACP error: its own when positive, else 1 when it
// is retryable (a retry with no delay named) and 0 when not.
func a2acpRetryAfter(p Members) float64 {
	var after float64
	if json.Unmarshal(p["retry_after"], &after) == nil && after > 0 && after <= math.MaxInt32 {
		return after
	}
	var retry bool
	if json.Unmarshal(p["retryable"], &retry) == nil && retry {
		return 1
	}
	return 0
}
