package protocol

import (
	"bytes"
	"encoding/json"
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
	// receiver can verify without a lookup (docs/protocol.md, "Drafts": whose key).
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

// The codec of these types is in wire.go; canonicalisation is in canon.go and sign.go.

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
