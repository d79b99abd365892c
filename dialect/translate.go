package dialect

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// ExtensionMember is the member of the IACP message body ("message") that carries what the
// IACP fields do not. Unknown members are kept by every IACP node and covered by the signature.
const ExtensionMember = "x-dialect"

// Extension is the value of ExtensionMember:
//
//	{"name": "elizaos", "priority": "high",
//	 "members": {...}, "absent": [...],
//	 "payload_replaced": {...}, "payload_added": [...]}
//
// FromIACP into the dialect Name rebuilds the document from the IACP fields, then sets Members
// and deletes Absent; it undoes the payload changes first.
type Extension struct {
	// Name is the dialect of the original document.
	Name Dialect `json:"name"`
	// Priority is the document's priority on IACP's scale (low, normal, high, urgent).
	Priority string `json:"priority,omitempty"`
	// Members are the original top-level members that the IACP fields do not reproduce
	// exactly, verbatim: the sender, the timestamp, fields with no IACP counterpart, and those
	// whose counterpart loses information (an expiry turned into a TTL).
	Members Members `json:"members,omitempty"`
	// Absent names the members that the IACP fields would add but the original did not have.
	Absent []string `json:"absent,omitempty"`
	// PayloadReplaced are the payload's original values of members that IACP validation needs
	// otherwise (a status outside accepted, rejected, pending, counter).
	PayloadReplaced Members `json:"payload_replaced,omitempty"`
	// PayloadAdded names the payload members added for IACP (status, code, message,
	// retryable, event_type).
	PayloadAdded []string `json:"payload_added,omitempty"`
}

// view is what a dialect derives a document from: the IACP fields, with the payload as the
// dialect wrote it.
type view struct {
	Type                                        protocol.Type
	Intent                                      protocol.Intent
	MessageID, Timestamp, From, To, Correlation string
	// TTL is in seconds; zero or less is unknown.
	TTL     int64
	Payload json.RawMessage
	// Priority is on IACP's scale, from the extension of whatever dialect the message came
	// from; empty when it has none.
	Priority string
	// Permissions are the IACP document's security.permissions.
	Permissions []string
	// AuthToken is the IACP document's security.auth_token (an A2ACP token).
	AuthToken string
	// RequireApproval is the IACP document's security.require_approval.
	RequireApproval bool
}

// placeholder stands for what Seal fills later (a new message id, the timestamp, the sender):
// no valid document holds it, so a member derived from it never matches the original.
const placeholder = "\x00"

// ToIACP maps a decoded document to the draft of its IACP message. now is the time an expiry
// (expires_at) is measured against. A document already past its expiry is TIMEOUT.
func ToIACP(doc *Document, now time.Time) (*Draft, error) {
	c, err := codecOf(doc.Dialect)
	if err != nil {
		return nil, err
	}
	d, fit, err := c.toIACP(doc.Members, now)
	if err != nil {
		return nil, err
	}
	ext := Extension{Name: doc.Dialect, Priority: d.Priority}
	original := d.Payload
	if d.Payload, err = fitPayload(d.Payload, fit, &ext); err != nil {
		return nil, err
	}
	v := &view{Type: d.Type, Intent: d.Intent, MessageID: d.MessageID, Timestamp: placeholder, From: placeholder,
		To: d.To, Correlation: d.CorrelationID, TTL: int64((d.TTL + time.Second - 1) / time.Second), Payload: original,
		Priority: d.Priority, Permissions: d.Security.Permissions, AuthToken: d.Security.AuthToken,
		RequireApproval: d.Security.RequireApproval}
	if v.MessageID == "" {
		v.MessageID = placeholder
	}
	if v.TTL <= 0 {
		v.TTL = -1
	}
	if v.Type == protocol.TypeRequest && v.Correlation == v.MessageID {
		v.Correlation = ""
	}
	derived, err := c.derive(v)
	if err != nil {
		derived = Members{} // the document is kept whole in the extension
	}
	for k, v := range doc.Members {
		if dv, ok := derived[k]; !ok || !sameJSON(dv, v) {
			if ext.Members == nil {
				ext.Members = Members{}
			}
			ext.Members[k] = v
		}
	}
	for k := range derived {
		if _, ok := doc.Members[k]; !ok {
			ext.Absent = append(ext.Absent, k)
		}
	}
	slices.Sort(ext.Absent)
	d.Extension = ext
	return d, nil
}

// fitPayload sets the members IACP validation needs, recording in ext how to undo it.
func fitPayload(payload json.RawMessage, fit map[string]any, ext *Extension) (json.RawMessage, error) {
	if len(fit) == 0 {
		return payload, nil
	}
	p := payloadOf(payload)
	if p == nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s document: payload must be a JSON object", ext.Name)
	}
	for _, k := range sortedKeys(fit) {
		want, err := json.Marshal(fit[k])
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeInternalError, "dialect: encode payload %s: %w", k, err)
		}
		old, had := p[k]
		switch {
		case had && sameJSON(old, want):
			continue
		case had:
			if ext.PayloadReplaced == nil {
				ext.PayloadReplaced = Members{}
			}
			ext.PayloadReplaced[k] = old
		default:
			ext.PayloadAdded = append(ext.PayloadAdded, k)
		}
		p[k] = want
	}
	return marshal(p)
}

// unfitPayload undoes fitPayload.
func unfitPayload(payload json.RawMessage, ext *Extension) (json.RawMessage, error) {
	if len(ext.PayloadReplaced) == 0 && len(ext.PayloadAdded) == 0 {
		return payload, nil
	}
	p := payloadOf(payload)
	if p == nil {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "the IACP payload is not a JSON object")
	}
	for _, k := range ext.PayloadAdded {
		delete(p, k)
	}
	for k, v := range ext.PayloadReplaced {
		p[k] = v
	}
	return marshal(p)
}

// FromIACP writes msg as a document of the target dialect. When msg carries an extension of
// that dialect, the original document comes back, canonically equal. A message the target has
// no shape for is CAPABILITY_MISMATCH, saying why; IACP as the target gives msg's own JSON.
func FromIACP(msg *protocol.Message, target Dialect) ([]byte, error) {
	if target == IACP {
		return protocol.EncodeJSON(msg)
	}
	c, err := codecOf(target)
	if err != nil {
		return nil, err
	}
	var ext *Extension
	v := viewOf(msg)
	if raw, ok := msg.Message.Extra[ExtensionMember]; ok {
		var e Extension
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, protocol.Errorf(protocol.CodePayloadInvalid, "message.%s is not a dialect extension: %v", ExtensionMember, err)
		}
		if e.Name == target {
			ext = &e
		}
		v.Priority = e.Priority
	}
	if ext != nil {
		if v.Payload, err = unfitPayload(v.Payload, ext); err != nil {
			return nil, err
		}
	}
	doc, err := c.derive(v)
	if err != nil && ext == nil {
		return nil, err
	}
	if ext != nil {
		if doc == nil {
			doc = Members{}
		}
		for k, val := range ext.Members {
			doc[k] = val
		}
		for _, k := range ext.Absent {
			if _, kept := ext.Members[k]; !kept {
				delete(doc, k)
			}
		}
	}
	out, err := marshal(doc)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "dialect: encode the %s document: %w", target, err)
	}
	if err := check(target, out); err != nil {
		return nil, inexpressible(target, "the translation breaks the draft: %v", err)
	}
	return out, nil
}

// viewOf reads the IACP fields of msg.
func viewOf(msg *protocol.Message) *view {
	env := &msg.Envelope
	v := &view{Type: msg.Message.Type, Intent: msg.Message.Intent, MessageID: env.MessageID,
		Timestamp: env.Timestamp, From: env.Sender.AgentID, To: env.Recipient.AgentID,
		Correlation: env.CorrelationID, TTL: env.TTLSeconds, Payload: msg.Message.Payload}
	if v.Type == protocol.TypeRequest && v.Correlation == v.MessageID {
		v.Correlation = ""
	}
	if len(v.Payload) == 0 {
		v.Payload = json.RawMessage("{}")
	}
	if sec, err := msg.Security(); err == nil {
		v.Permissions, v.AuthToken, v.RequireApproval = sec.Permissions, sec.AuthToken, sec.RequireApproval
	}
	return v
}

// str returns a member's string value, or "" when it is absent or not a string.
func str(m Members, k string) string {
	s, _ := unquote(m[k])
	return s
}

// unquote decodes a JSON string value; ok is false for anything else. A string without
// escapes, what nearly every member holds, is sliced out rather than decoded: translation
// reads dozens of members a document.
func unquote(v json.RawMessage) (s string, ok bool) {
	switch {
	case plainString(v):
		return string(v[1 : len(v)-1]), true
	case notString(v):
		return "", false
	}
	return s, json.Unmarshal(v, &s) == nil
}

// notString reports whether v is, for encoding/json, certainly no string (nor null, which it
// reads as an unchanged one): absent, or beginning as no string does. Nothing to decode.
func notString(v []byte) bool {
	return len(v) == 0 || strings.IndexByte("{[tf-0123456789", v[0]) >= 0
}

// unquoteBytes is unquote, giving a view of v when the string holds no escape.
func unquoteBytes(v []byte) ([]byte, bool) {
	switch {
	case plainString(v):
		return v[1 : len(v)-1], true
	case notString(v):
		return nil, false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// plain reports whether b is the inside of a JSON string that needs no escaping, as
// json.Marshal writes it: printable ASCII without ", \, <, > and &.
func plain(b []byte) bool {
	for _, c := range b {
		if !plainByte[c] {
			return false
		}
	}
	return true
}

// plainText is plain for a string (without converting it, which would copy a long one).
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte tells the bytes plain allows.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// raw encodes v as a member value, as json.Marshal does; v is always encodable (strings,
// bools, numbers, Members).
func raw(v any) json.RawMessage {
	switch v := v.(type) {
	case string:
		if plainText(v) {
			return json.RawMessage(`"` + v + `"`)
		}
	case Members:
		b, _ := marshal(v)
		return b
	}
	b, _ := json.Marshal(v)
	return b
}

// agentObject is raw(Members{"agent_id": raw(id)}), {"agent_id":"id"}, without the map.
func agentObject(id string) json.RawMessage {
	v := raw(id)
	b := make(json.RawMessage, 0, len(v)+13)
	return append(append(append(b, `{"agent_id":`...), v...), '}')
}

// AnswerCorrelation returns the id that an answer to req, shown in req's own dialect d, is
// correlated to. An ACP v2 AgentResponse's commandId is the command's own id: the message id,
// or the id the document carried when it was no UUID (kept in the extension). An IaCP 1.0
// answer's parent_message_id is the request's message_id, as IACP's correlation is. ElizaOS
// and A2ACP answers continue what the request named for them (reply_with,
// payload.correlation_id), which became req's correlation id.
func AnswerCorrelation(req *protocol.Message, d Dialect) string {
	switch d {
	case ACPv2:
		var e Extension
		if json.Unmarshal(req.Message.Extra[ExtensionMember], &e) == nil && e.Name == ACPv2 {
			if id := str(e.Members, "id"); id != "" {
				return id
			}
		}
	case ElizaOS, A2ACP:
		if c := req.Envelope.CorrelationID; c != "" {
			return c
		}
	}
	return req.Envelope.MessageID
}
