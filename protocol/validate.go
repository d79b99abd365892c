package protocol

import (
	"errors"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Limits bound what a message may be. The zero value means the defaults below.
type Limits struct {
	// MaxMessageBytes bounds the encoded document. Default 16 MiB (IaCP 1.0 section 10.1);
	// gossip uses MaxGossipBytes.
	MaxMessageBytes int
	// MaxNesting bounds payload nesting: the payload object itself is level 1. Default 10.
	MaxNesting int
	// MaxClockSkew is how far in the future a timestamp may lie. Default 30 s (the draft's
	// tolerated sender drift).
	MaxClockSkew time.Duration
	// MaxTTL bounds ttl_seconds, so that the replay window's entries expire. Default 7 days.
	MaxTTL time.Duration
}

// Default limits; see Limits for why each number.
const (
	DefaultMaxMessageBytes = 16 << 20
	// MaxMessageBytesLimit is the largest MaxMessageBytes a node may be configured with
	// (max_message_bytes), and so the largest message its store must take.
	MaxMessageBytesLimit = 1 << 30
	MaxGossipBytes       = 1 << 20
	DefaultMaxNesting    = 10
	DefaultMaxClockSkew  = 30 * time.Second
	DefaultMaxTTL        = 7 * 24 * time.Hour
	// MaxCorrelationIDLen bounds envelope.correlation_id, in bytes.
	MaxCorrelationIDLen = 128
)

func (l Limits) withDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = DefaultMaxNesting
	}
	if l.MaxClockSkew <= 0 {
		l.MaxClockSkew = DefaultMaxClockSkew
	}
	if l.MaxTTL <= 0 {
		l.MaxTTL = DefaultMaxTTL
	}
	return l
}

// Validate checks every syntactic and temporal rule of a message at time now, and returns the
// first failure as an *Error with its IACP code (docs/protocol.md, "Receiving, in order"). size is the
// encoded length as received; pass 0 to have Validate encode the message to measure it.
// Validate does not check the signature (Verify) or the replay window (ReplayWindow).
func Validate(m *Message, now time.Time, size int, lim Limits) error {
	lim = lim.withDefaults()
	env := &m.Envelope

	if err := checkVersion(env.Version); err != nil {
		return err
	}
	if size == 0 {
		b, err := EncodeJSON(m)
		if err != nil {
			return Errorf(CodePayloadInvalid, "encode: %w", err)
		}
		size = len(b)
	}
	if size > lim.MaxMessageBytes {
		return Errorf(CodePayloadInvalid, "message is %d bytes; the limit is %d", size, lim.MaxMessageBytes)
	}
	if _, err := uuid.Parse(env.MessageID); err != nil || len(env.MessageID) != 36 {
		return Errorf(CodePayloadInvalid, "envelope.message_id %q is not a UUID (RFC 9562, 8-4-4-4-12 hex)", clip(env.MessageID))
	}
	if len(env.CorrelationID) > MaxCorrelationIDLen {
		return Errorf(CodePayloadInvalid, "envelope.correlation_id is longer than %d characters", MaxCorrelationIDLen)
	}
	if err := ValidateAgentID(env.Sender.AgentID); err != nil {
		return prefix(err, "envelope.sender.agent_id")
	}
	if env.Sender.PeerID == "" {
		return Errorf(CodeIdentityInvalid, "envelope.sender.peer_id is missing: the receiver needs it to verify the signature")
	}
	if err := ValidateRecipientID(env.Recipient.AgentID); err != nil {
		return prefix(err, "envelope.recipient.agent_id")
	}
	if !KnownChannel(env.Recipient.Channel) {
		return Errorf(CodeChannelUnknown, "envelope.recipient.channel %q is not one of %s or an x- custom channel",
			clip(env.Recipient.Channel), strings.Join(StandardChannels, ", "))
	}
	ts, err := time.Parse(time.RFC3339Nano, env.Timestamp)
	if err != nil {
		return Errorf(CodePayloadInvalid, "envelope.timestamp %q is not an RFC 3339 time", clip(env.Timestamp))
	}
	if ts.Sub(now) > lim.MaxClockSkew {
		return Errorf(CodePayloadInvalid, "envelope.timestamp is %s in the future; at most %s of clock drift is tolerated",
			ts.Sub(now).Round(time.Second), lim.MaxClockSkew)
	}
	if env.TTLSeconds <= 0 {
		return Errorf(CodePayloadInvalid, "envelope.ttl_seconds must be a positive integer")
	}
	if time.Duration(env.TTLSeconds) > lim.MaxTTL/time.Second {
		return Errorf(CodePayloadInvalid, "envelope.ttl_seconds %d exceeds the limit of %d", env.TTLSeconds, int64(lim.MaxTTL/time.Second))
	}
	if exp := ts.Add(time.Duration(env.TTLSeconds) * time.Second); !now.Before(exp) {
		return &Error{Code: CodeTimeout, Message: "message expired at " + exp.UTC().Format(time.RFC3339) + " (timestamp + ttl_seconds)"}
	}
	return validateBody(m, lim)
}

func checkVersion(v string) error {
	major, _, ok := strings.Cut(v, ".")
	if ok {
		for _, s := range SupportedVersions {
			if sm, _, _ := strings.Cut(s, "."); sm == major {
				return nil
			}
		}
	}
	return &Error{
		Code:    CodeVersionUnsupported,
		Message: "envelope.version " + quote(clip(v)) + " is not supported; supported: " + strings.Join(SupportedVersions, ", "),
		Detail:  map[string]any{"supported_versions": SupportedVersions},
	}
}

func validateBody(m *Message, lim Limits) error {
	b := &m.Message
	switch b.Type {
	case TypeRequest, TypeResponse, TypeEvent, TypeError, TypeHeartbeat:
	default:
		return Errorf(CodePayloadInvalid, "message.type %q is not request, response, event, error or heartbeat", clip(string(b.Type)))
	}
	if !IntentAllowed(b.Type, b.Intent) {
		return Errorf(CodePayloadInvalid, "message.intent %q makes no sense with type %s", clip(string(b.Intent)), b.Type)
	}
	if len(b.Payload) > 0 {
		depth, isObject := nesting(b.Payload)
		if !isObject {
			return Errorf(CodePayloadInvalid, "message.payload must be a JSON object")
		}
		if depth > lim.MaxNesting {
			return Errorf(CodePayloadInvalid, "message.payload is nested %d levels deep; the limit is %d", depth, lim.MaxNesting)
		}
	}
	return validatePayload(m)
}

// validatePayload checks the payloads the node itself must understand. It decodes only the
// members it checks: the others are checked for their JSON type without a copy (eventCheck).
func validatePayload(m *Message) error {
	switch m.Message.Type {
	case TypeError:
		var p errorCheck
		if err := DecodePayload(m, &p); err != nil {
			return err
		}
		if p.Code == "" {
			return Errorf(CodePayloadInvalid, "error payload has no code")
		}
	case TypeHeartbeat:
		var p HeartbeatPayload
		if err := DecodePayload(m, &p); err != nil {
			return err
		}
		switch p.Status {
		case StatusAlive, StatusBusy, StatusDraining, StatusOffline:
		default:
			return Errorf(CodePayloadInvalid, "heartbeat status %q is not alive, busy, draining or offline", clip(p.Status))
		}
		if p.Load < 0 || p.Load > 1 || math.IsNaN(p.Load) {
			return Errorf(CodePayloadInvalid, "heartbeat load %v is outside 0..1", p.Load)
		}
		if p.ActiveTasks < 0 {
			return Errorf(CodePayloadInvalid, "heartbeat active_tasks is negative")
		}
	case TypeResponse:
		var p responseCheck
		if err := DecodePayload(m, &p); err != nil {
			return err
		}
		switch p.Status {
		case ResponseAccepted, ResponseRejected, ResponsePending, ResponseCounter:
		default:
			return Errorf(CodePayloadInvalid, "response status %q is not accepted, rejected, pending or counter", clip(p.Status))
		}
	case TypeEvent:
		var p eventCheck
		if err := DecodePayload(m, &p); err != nil {
			return err
		}
		if p.EventType == "" {
			return Errorf(CodePayloadInvalid, "event payload has no event_type")
		}
		switch p.Severity {
		case "", SeverityInfo, SeverityWarning, SeverityCritical:
		default:
			return Errorf(CodePayloadInvalid, "event severity %q is not info, warning or critical", clip(p.Severity))
		}
	}
	return nil
}

// errorCheck, responseCheck and eventCheck are ErrorPayload, ResponseStatus and
// EventPayload as validatePayload reads them: the members it checks are decoded, the others
// only checked for the JSON type their payload type gives them, so that validating a message
// whose detail is 16 MiB of text copies none of it.
type errorCheck struct {
	Code       Code      `json:"code"`
	Message    textShape `json:"message"`
	Detail     anyShape  `json:"detail"`
	Retryable  bool      `json:"retryable"`
	RetryAfter float64   `json:"retry_after"`
}

type responseCheck struct {
	Status string    `json:"status"`
	Detail textShape `json:"detail"`
}

type eventCheck struct {
	EventType string    `json:"event_type"`
	Detail    textShape `json:"detail"`
	Severity  string    `json:"severity"`
	Data      anyShape  `json:"data"`
}

// textShape accepts, without keeping it, a value that encoding/json decodes into a string:
// a string or null.
type textShape struct{}

// UnmarshalJSON checks that b is a string or null.
func (*textShape) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' || string(b) == "null" {
		return nil
	}
	return errors.New("want a string")
}

// anyShape accepts any JSON value without keeping it (encoding/json has checked it is JSON).
type anyShape struct{}

// UnmarshalJSON accepts b.
func (*anyShape) UnmarshalJSON([]byte) error { return nil }

// nesting returns the depth of the deepest object or array in a JSON value (an object is
// depth 1) and whether the value is an object. It scans bytes, allocating nothing, and steps
// over strings with stringEnd: a payload is mostly text.
func nesting(raw []byte) (depth int, isObject bool) {
	cur := 0
	first := true
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			i = stringEnd(raw, i+1)
		case '{', '[':
			cur++
			depth = max(depth, cur)
		case '}', ']':
			cur--
		}
		if first {
			isObject = c == '{'
			first = false
		}
	}
	return depth, isObject
}

// Time returns the parsed envelope timestamp.
func (m *Message) Time() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, m.Envelope.Timestamp)
}

// Expires returns timestamp + ttl_seconds, the instant after which the message MUST NOT be
// processed. It returns the zero time when the timestamp does not parse.
func (m *Message) Expires() time.Time {
	ts, err := m.Time()
	if err != nil {
		return time.Time{}
	}
	return ts.Add(time.Duration(m.Envelope.TTLSeconds) * time.Second)
}

func prefix(err error, where string) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Message = where + ": " + e.Message
		return &c
	}
	return err
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func quote(s string) string { return "\"" + s + "\"" }

func secondsToDuration(s float64) time.Duration {
	if s > math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
