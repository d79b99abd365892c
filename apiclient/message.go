package apiclient

import (
	"bytes"
	"encoding/json"
)

// Message is an IACP document as an agent writes it to the API or reads it back: the
// envelope and body members an agent uses. Raw, when set, is the whole document as the node
// wrote it (signature and every member kept): it is what the message encodes to, and
// protocol.DecodeJSON(m.Raw) gives the node's own type.
type Message struct {
	Envelope Envelope `json:"envelope"`
	Message  Body     `json:"message"`
	// Raw is the document as decoded; it is sent as it is.
	Raw json.RawMessage `json:"-"`
}

// Envelope carries routing, identity and temporal metadata. The node fills what an agent
// leaves out (version, message_id, timestamp, ttl_seconds, sender).
type Envelope struct {
	Version       string    `json:"version,omitempty"`
	MessageID     string    `json:"message_id,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Sender        Sender    `json:"sender,omitzero"`
	Recipient     Recipient `json:"recipient"`
	Timestamp     string    `json:"timestamp,omitempty"`
	TTLSeconds    int64     `json:"ttl_seconds,omitempty"`
}

// Sender is who sent the message; the node signs as its agent.
type Sender struct {
	AgentID     string `json:"agent_id,omitempty"`
	IdentitySig string `json:"identity_sig,omitempty"`
	PeerID      string `json:"peer_id,omitempty"`
}

// Recipient names the target agent and the channel.
type Recipient struct {
	AgentID string `json:"agent_id"`
	Channel string `json:"channel,omitempty"`
}

// Body is the typed part: type (request, response, event, notification, error), intent and
// payload, a JSON object.
type Body struct {
	Type    string          `json:"type,omitempty"`
	Intent  string          `json:"intent,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// The message types.
const (
	TypeRequest      = "request"
	TypeResponse     = "response"
	TypeEvent        = "event"
	TypeNotification = "notification"
	TypeError        = "error"
)

// ParseMessage decodes an IACP document, keeping it whole as Raw.
func ParseMessage(raw []byte) (*Message, error) {
	m := &Message{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalJSON decodes the members and keeps the document as Raw.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = Message(p)
	m.Raw = bytes.Clone(b)
	return nil
}

// MarshalJSON encodes Raw when set, else the members.
func (m Message) MarshalJSON() ([]byte, error) {
	if m.Raw != nil {
		return m.Raw, nil
	}
	type plain Message
	return json.Marshal(plain(m))
}

// Status is a response's payload status (accepted, rejected, pending, counter), "" for
// another message or a payload without one.
func (m *Message) Status() string {
	var p struct {
		Status string `json:"status"`
	}
	if m.Message.Type != TypeResponse || json.Unmarshal(m.Message.Payload, &p) != nil {
		return ""
	}
	return p.Status
}

// AsError is an error message's payload as an *APIError (Status 0), nil for another message.
func (m *Message) AsError() *APIError {
	var p ErrorPayload
	if m.Message.Type != TypeError || json.Unmarshal(m.Message.Payload, &p) != nil {
		return nil
	}
	return &APIError{ErrorPayload: p, MessageID: m.Envelope.CorrelationID}
}
