package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Extra holds the members of a JSON object that this implementation does not know, verbatim.
// The draft says receivers MUST ignore unknown fields; we also keep them, so that a decoded
// message re-encodes to the same document and its signature stays valid when relayed.
type Extra map[string]json.RawMessage

// Message is one IACP document: an envelope and a message body. Its JSON form is
//
//	{"envelope": {...}, "message": {"type": ..., "intent": ..., "payload": {...}}}
//
// Message values are plain data: the codecs fill them, Builder creates them, Sign and Verify
// check them. A Message is not safe for concurrent mutation.
type Message struct {
	Envelope Envelope
	Message  Body
	// Extra holds unknown top-level members.
	Extra Extra
}

// Envelope carries routing, identity and temporal metadata (draft section "Message Envelope").
type Envelope struct {
	Version       string
	MessageID     string
	CorrelationID string
	Sender        Sender
	Recipient     Recipient
	// Timestamp is the RFC 3339 UTC time of creation, kept as the sender wrote it because the
	// signature covers the exact string. Use Message.Time to read it.
	Timestamp  string
	TTLSeconds int64
	Extra      Extra
}

// Sender identifies who sent the message and carries its signature.
type Sender struct {
	AgentID     string
	IdentitySig string
	// PeerID is the libp2p peer id of the signing key, an extension field so that any
	// receiver can verify without a lookup (../shared/specs/README.md).
	PeerID string
	Extra  Extra
}

// Recipient names the target agent and the logical channel.
type Recipient struct {
	AgentID string
	Channel string
	Extra   Extra
}

// Body is the typed part of the document: type, intent and a type-dependent payload.
type Body struct {
	Type   Type
	Intent Intent
	// Payload is the raw JSON payload; decode it with DecodePayload or the typed helpers.
	Payload json.RawMessage
	Extra   Extra
}

// field describes one known member of a JSON object for the generic object codec below.
type field struct {
	name string
	ptr  any // pointer to the Go value
	zero func() bool
}

// decodeObject splits a JSON object into known fields and Extra. A known field that holds
// JSON null is kept in Extra verbatim, so that re-encoding reproduces it.
func decodeObject(what string, data []byte, fields []field) (Extra, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if members == nil {
		return nil, fmt.Errorf("%s: must be a JSON object, not null", what)
	}
	var extra Extra
	for name, raw := range members {
		f := lookupField(fields, name)
		if f == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			if extra == nil {
				extra = make(Extra)
			}
			extra[name] = raw
			continue
		}
		if err := json.Unmarshal(raw, f.ptr); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", what, name, err)
		}
	}
	return extra, nil
}

func lookupField(fields []field, name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	return nil
}

// encodeObject writes known non-zero fields, then Extra members, as one JSON object. Member
// order does not matter on the wire: signatures cover the RFC 8785 canonical form.
func encodeObject(fields []field, extra Extra) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(name string, value []byte) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		b, _ := json.Marshal(name)
		buf.Write(b)
		buf.WriteByte(':')
		buf.Write(value)
	}
	for _, f := range fields {
		if _, shadowed := extra[f.name]; shadowed || f.zero() {
			continue
		}
		b, err := json.Marshal(f.ptr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		write(f.name, b)
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		write(name, extra[name])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func str(p *string) field           { return field{ptr: p, zero: func() bool { return *p == "" }} }
func named(n string, f field) field { f.name = n; return f }

func (m *Message) fields() []field {
	return []field{
		{name: "envelope", ptr: &m.Envelope, zero: func() bool { return false }},
		{name: "message", ptr: &m.Message, zero: func() bool { return false }},
	}
}

func (e *Envelope) fields() []field {
	return []field{
		named("version", str(&e.Version)),
		named("message_id", str(&e.MessageID)),
		named("correlation_id", str(&e.CorrelationID)),
		{name: "sender", ptr: &e.Sender, zero: func() bool { return false }},
		{name: "recipient", ptr: &e.Recipient, zero: func() bool { return false }},
		named("timestamp", str(&e.Timestamp)),
		{name: "ttl_seconds", ptr: &e.TTLSeconds, zero: func() bool { return e.TTLSeconds == 0 }},
	}
}

func (s *Sender) fields() []field {
	return []field{
		named("agent_id", str(&s.AgentID)),
		named("identity_sig", str(&s.IdentitySig)),
		named("peer_id", str(&s.PeerID)),
	}
}

func (r *Recipient) fields() []field {
	return []field{
		named("agent_id", str(&r.AgentID)),
		named("channel", str(&r.Channel)),
	}
}

func (b *Body) fields() []field {
	return []field{
		{name: "type", ptr: (*string)(&b.Type), zero: func() bool { return b.Type == "" }},
		{name: "intent", ptr: (*string)(&b.Intent), zero: func() bool { return b.Intent == "" }},
		{name: "payload", ptr: &b.Payload, zero: func() bool { return len(b.Payload) == 0 }},
	}
}

// MarshalJSON encodes the document.
func (m Message) MarshalJSON() ([]byte, error) { return encodeObject(m.fields(), m.Extra) }

// UnmarshalJSON decodes the document, keeping unknown members in Extra.
func (m *Message) UnmarshalJSON(data []byte) (err error) {
	*m = Message{}
	m.Extra, err = decodeObject("document", data, m.fields())
	return err
}

// MarshalJSON encodes the envelope.
func (e Envelope) MarshalJSON() ([]byte, error) { return encodeObject(e.fields(), e.Extra) }

// UnmarshalJSON decodes the envelope, keeping unknown members in Extra.
func (e *Envelope) UnmarshalJSON(data []byte) (err error) {
	*e = Envelope{}
	e.Extra, err = decodeObject("envelope", data, e.fields())
	return err
}

// MarshalJSON encodes the sender.
func (s Sender) MarshalJSON() ([]byte, error) { return encodeObject(s.fields(), s.Extra) }

// UnmarshalJSON decodes the sender, keeping unknown members in Extra.
func (s *Sender) UnmarshalJSON(data []byte) (err error) {
	*s = Sender{}
	s.Extra, err = decodeObject("sender", data, s.fields())
	return err
}

// MarshalJSON encodes the recipient.
func (r Recipient) MarshalJSON() ([]byte, error) { return encodeObject(r.fields(), r.Extra) }

// UnmarshalJSON decodes the recipient, keeping unknown members in Extra.
func (r *Recipient) UnmarshalJSON(data []byte) (err error) {
	*r = Recipient{}
	r.Extra, err = decodeObject("recipient", data, r.fields())
	return err
}

// MarshalJSON encodes the message body.
func (b Body) MarshalJSON() ([]byte, error) { return encodeObject(b.fields(), b.Extra) }

// UnmarshalJSON decodes the message body, keeping unknown members in Extra.
func (b *Body) UnmarshalJSON(data []byte) (err error) {
	*b = Body{}
	b.Extra, err = decodeObject("message", data, b.fields())
	return err
}

// Clone returns a deep copy of m.
func (m *Message) Clone() *Message {
	c := *m
	c.Extra = m.Extra.clone()
	c.Envelope.Extra = m.Envelope.Extra.clone()
	c.Envelope.Sender.Extra = m.Envelope.Sender.Extra.clone()
	c.Envelope.Recipient.Extra = m.Envelope.Recipient.Extra.clone()
	c.Message.Extra = m.Message.Extra.clone()
	c.Message.Payload = bytes.Clone(m.Message.Payload)
	return &c
}

func (x Extra) clone() Extra {
	if x == nil {
		return nil
	}
	c := make(Extra, len(x))
	for k, v := range x {
		c[k] = bytes.Clone(v)
	}
	return c
}
