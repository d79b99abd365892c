package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Dialect names a message shape. The names of the other drafts are protocol's, so that the
// foreign error-code table (protocol.MapForeignCode) and this package agree.
type Dialect string

// The dialects.
const (
	// IACP is our own wire format, draft-vystartas-iacp-00.
	IACP Dialect = protocol.DialectIACP
	// IaCP1 is the IaCP Specification 1.0-draft (specs/000).
	IaCP1 Dialect = protocol.DialectIaCP1
	// ElizaOS is the ElizaOS multi-agent draft's performatives (specs/004).
	ElizaOS Dialect = protocol.DialectElizaOS
	// ACPv2 is ACP v2.0 (specs/002): AgentCommand and AgentResponse.
	ACPv2 Dialect = protocol.DialectACPv2
	// A2ACP is A2ACP v1.0 (specs/003), validated against the draft's own JSON Schema.
	A2ACP Dialect = protocol.DialectA2ACP
)

// Translated lists the dialects Decode, ToIACP and FromIACP handle, besides IACP itself.
var Translated = []Dialect{IaCP1, ElizaOS, ACPv2, A2ACP}

// Members are a JSON object's members, each kept verbatim.
type Members map[string]json.RawMessage

// Document is one decoded, validated document of a dialect.
type Document struct {
	Dialect Dialect
	// Members are the document's top-level members, verbatim.
	Members Members
}

// JSON encodes the document (members sorted by name).
func (d *Document) JSON() ([]byte, error) { return json.Marshal(d.Members) }

// Draft is what a protocol.Builder needs to build the IACP message that carries a document:
// Message gives the unsigned message, and Builder.Seal fills the node's fields and signs it.
type Draft struct {
	Type   protocol.Type
	Intent protocol.Intent
	// MessageID is the document's own id when it is a UUID (any RFC 9562 version), so that a
	// reply correlates to the id the sender knows; empty otherwise (Seal makes one).
	MessageID string
	// Sender is the sender's agent id as the document names it (sender.agent_id, ACP v2's
	// from, A2ACP's source_agent.agent_id). A node sends as its own agent and replaces it; a
	// translation alone may keep it.
	Sender string
	// To is the recipient as the document names it, or protocol.Broadcast. A dialect's bare name
	// ("Jules") is not an IACP agent id: resolving it is the caller's job.
	To string
	// Payload is the IACP payload: the document's payload, with the members IACP validation
	// requires (status, code, event_type) set; the extension says how to undo that.
	Payload json.RawMessage
	// Priority is low, normal, high or urgent, or empty; it travels in the extension.
	Priority string
	// TTL is from the document's expiry or timeout, rounded up to seconds; zero leaves the
	// builder's default.
	TTL time.Duration
	// CorrelationID continues a conversation: in_reply_to, parent_message_id, conversation_id,
	// A2ACP's payload.correlation_id.
	CorrelationID string
	// Security is the IACP document's top-level security member (protocol.WithSecurity): ACP
	// v2's security.permissions, which the node checks against the sender's grants, and
	// A2ACP's security.auth_token, the token the node verifies (its five rules).
	Security protocol.Security
	// Extension is what the IACP fields do not carry, kept under ExtensionMember.
	Extension Extension
}

// Message returns the unsigned IACP message of the draft; seal it with a protocol.Builder.
func (d *Draft) Message() (*protocol.Message, error) {
	ext, err := marshalExtension(&d.Extension)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "dialect: encode the extension: %w", err)
	}
	m := &protocol.Message{}
	m.Envelope.MessageID = d.MessageID
	m.Envelope.CorrelationID = d.CorrelationID
	m.Envelope.Recipient.AgentID = d.To
	m.Envelope.TTLSeconds = int64((d.TTL + time.Second - 1) / time.Second)
	m.Message = protocol.Body{Type: d.Type, Intent: d.Intent, Payload: bytes.Clone(d.Payload),
		Extra: protocol.Extra{ExtensionMember: ext}}
	protocol.WithSecurity(d.Security)(m)
	return m, nil
}

// invalid is the error of a document that breaks its own draft: PAYLOAD_INVALID, naming the
// dialect and the field.
func invalid(d Dialect, field, format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodePayloadInvalid, "%s document: %s %s", d, field, fmt.Sprintf(format, args...))
}

// inexpressible is the error of an IACP message that the target dialect has no shape for.
func inexpressible(d Dialect, format string, args ...any) *protocol.Error {
	return protocol.Errorf(protocol.CodeCapabilityMismatch, "cannot be expressed in %s: %s", d, fmt.Sprintf(format, args...))
}

// recognisers: the members that mark each dialect.
var recognisers = []struct {
	d       Dialect
	members []string
}{
	{IACP, []string{"envelope"}},
	{IaCP1, []string{"iacp_version"}},
	{ElizaOS, []string{"mcp_version", "performative"}},
	{ACPv2, []string{"commandId", "action"}},
	{A2ACP, []string{"protocol_version", "source_agent", "target_agent"}},
}

// Recognise tells a document's dialect by its marking members: envelope (IACP), iacp_version
// (IaCP 1.0), mcp_version or performative (ElizaOS), commandId or action (ACP v2),
// protocol_version, source_agent or target_agent (A2ACP). A document that marks none, or more
// than one, is PAYLOAD_INVALID with an error that says which members decide.
//
// Only the top-level member names are read, each value skipped, so that recognising costs a
// fraction of decoding (the API recognises every JSON document posted to it, IACP's own
// included); Decode, or the IACP decoder, checks the whole document afterwards.
func Recognise(doc []byte) (Dialect, error) {
	m, err := topNames(doc)
	if err != nil {
		return "", err
	}
	d, err := recognise(m)
	if err == nil && d == "" {
		return "", protocol.Errorf(protocol.CodePayloadInvalid,
			"the document's dialect is unknown: it has none of envelope (iacp), iacp_version (iacp-1.0), "+
				"mcp_version or performative (elizaos), commandId or action (acp-v2), protocol_version, "+
				"source_agent or target_agent (a2acp); name the dialect explicitly")
	}
	return d, err
}

// foreignMarks are the quoted member names that mark a dialect other than IACP.
var foreignMarks = func() (marks [][]byte) {
	for _, r := range recognisers {
		for _, name := range r.members {
			if r.d != IACP {
				marks = append(marks, []byte(`"`+name+`"`))
			}
		}
	}
	return marks
}()

// MayBeForeign reports whether Recognise may find doc to be another draft's document: whether
// doc holds, anywhere, one of the member names that mark one, or a \u escape (which may spell
// one). When it is false, Recognise finds IACP or nothing, so a caller that reads such a
// document as IACP either way need not recognise it: a byte search instead of a parse.
func MayBeForeign(doc []byte) bool {
	if bytes.Contains(doc, []byte(`\u`)) {
		return true
	}
	for _, mark := range foreignMarks {
		if bytes.Contains(doc, mark) {
			return true
		}
	}
	return false
}

// skipped is a JSON value that is read past, not kept.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// topNames returns the names of the members of the JSON object doc, skipping their values.
// Like parseObject it refuses a document that is no object or repeats a member (at the top:
// the rest is Decode's to check), with the same errors. One pass of protocol's scanner reads a
// valid document; encoding/json reads the others. The names may point into doc.
func topNames(doc []byte) (map[string]struct{}, error) {
	names := map[string]struct{}{}
	// The names may point into doc, which the caller holds while it reads them.
	isObject, err := protocol.ObjectMembers(doc, func(name string, _ []byte) { names[name] = struct{}{} })
	switch {
	case err == nil && isObject:
		return names, nil
	case err == nil:
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "document must be a JSON object")
	}
	// What protocol's scanner refuses, encoding/json may read (a nested duplicate, a number
	// beyond a double): it decides, member by member, as it always did.
	return topNamesSlow(doc)
}

// topNamesSlow is topNames with encoding/json's reader, which checks duplicates at the top only.
func topNamesSlow(doc []byte) (map[string]struct{}, error) {
	notJSON := func(err error) error {
		return protocol.Errorf(protocol.CodePayloadInvalid, "document is not valid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err)
	}
	if tok != json.Delim('{') {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "document must be a JSON object")
	}
	names := map[string]struct{}{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notJSON(err)
		}
		name, _ := tok.(string) // inside an object, the decoder gives names only
		if _, dup := names[name]; dup {
			return nil, notJSON(fmt.Errorf("duplicate member %q", name))
		}
		names[name] = struct{}{}
		if err := dec.Decode(&skipped{}); err != nil {
			return nil, notJSON(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notJSON(fmt.Errorf("data after the top-level value"))
	}
	return names, nil
}

// codec is one dialect's translator.
type codec interface {
	// validate checks the members against the draft.
	validate(m Members) error
	// toIACP maps a validated document. It fills every Draft field but Extension, and returns
	// the payload members IACP needs set (fit).
	toIACP(m Members, now time.Time) (d *Draft, fit map[string]any, err error)
	// derive writes the document's members from the IACP fields, as FromIACP does for a message
	// that has no extension of this dialect.
	derive(v *view) (Members, error)
}

var codecs = map[Dialect]codec{IaCP1: iacp1{}, ElizaOS: eliza{}, ACPv2: acpv2{}, A2ACP: a2acp{}}

func codecOf(d Dialect) (codec, error) {
	if c, ok := codecs[d]; ok {
		return c, nil
	}
	names := []string{string(IACP)}
	for _, t := range Translated {
		names = append(names, string(t))
	}
	return nil, protocol.Errorf(protocol.CodePayloadInvalid, "unknown dialect %q; use one of %s", d, strings.Join(names, ", "))
}

// Decode parses doc as a document of dialect d and checks it against that dialect's draft.
// Errors are *protocol.Error: PAYLOAD_INVALID naming the field that breaks the draft, or
// VERSION_UNSUPPORTED for another major version.
func Decode(d Dialect, doc []byte) (*Document, error) {
	c, err := codecOf(d)
	if err != nil {
		return nil, err
	}
	m, err := parseObject(d, doc)
	if err != nil {
		return nil, err
	}
	if err := c.validate(m); err != nil {
		return nil, err
	}
	return &Document{Dialect: d, Members: m}, nil
}

// check is Decode's verdict on doc, without the Document: its members are read in place.
func check(d Dialect, doc []byte) error {
	c, err := codecOf(d)
	if err != nil {
		return err
	}
	m, err := readObject(d, doc, false)
	if err != nil {
		return err
	}
	return c.validate(m)
}

// DecodeRecognised is Recognise and Decode in one parse: it reads doc once, tells its dialect
// by the member names, and checks it against that dialect's draft. An IACP document, or one
// that marks no dialect, gives dialect IACP and no Document (decode it as IACP); one that
// marks two is PAYLOAD_INVALID, as Recognise says.
func DecodeRecognised(doc []byte) (Dialect, *Document, error) {
	m, err := parseObject("", doc)
	if err != nil {
		return "", nil, err
	}
	d, err := recognise(m)
	if err != nil || d == IACP || d == "" {
		return IACP, nil, err
	}
	c, err := codecOf(d)
	if err != nil {
		return d, nil, err
	}
	if err := c.validate(m); err != nil {
		return d, nil, err
	}
	return d, &Document{Dialect: d, Members: m}, nil
}

// recognise is Recognise over parsed members; "" when none marks a dialect.
func recognise[V any](m map[string]V) (Dialect, error) {
	var found Dialect
	var first string
	var why []string // "name (dialect)" of each mark, once there are two
	for _, r := range recognisers {
		for _, name := range r.members {
			if _, ok := m[name]; !ok {
				continue
			}
			if found == "" {
				found, first = r.d, name
			} else {
				if why == nil {
					why = []string{fmt.Sprintf("%s (%s)", first, found)}
				}
				why = append(why, fmt.Sprintf("%s (%s)", name, r.d))
			}
			break
		}
	}
	if why == nil {
		return found, nil
	}
	return "", protocol.Errorf(protocol.CodePayloadInvalid,
		"the document's dialect is ambiguous: it has %s; remove the other dialect's members or name the dialect explicitly",
		strings.Join(why, " and "))
}

// validJSON reports whether protocol.CanonicalJSON accepts v, without writing its canonical
// form.
func validJSON(v []byte) bool {
	_, err := protocol.ObjectMembers(v, func(string, []byte) {})
	return err == nil
}

// plainString reports whether v is a JSON string that holds no escape and no byte that
// json.Marshal escapes (plain).
func plainString(v []byte) bool {
	n := len(v)
	return n >= 2 && v[0] == '"' && v[n-1] == '"' && plain(v[1:n-1])
}

// sortedKeys returns m's names, sorted.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sameJSON reports whether two JSON values are canonically equal. Equal bytes are, when
// protocol.CanonicalJSON accepts them: that is checked without writing the canonical form.
func sameJSON(a, b []byte) bool {
	if plainString(a) && plainString(b) { // each its own canonical form
		return bytes.Equal(a, b)
	}
	if bytes.Equal(a, b) {
		return validJSON(a)
	}
	ca, err1 := protocol.CanonicalJSON(a)
	cb, err2 := protocol.CanonicalJSON(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
