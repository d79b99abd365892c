package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ErrorPayload is the payload of an `error` message (draft section "error"; retry_after from
// IaCP 1.0 section 5.4.2).
type ErrorPayload struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Detail    any    `json:"detail,omitempty"`
	Retryable bool   `json:"retryable"`
	// RetryAfter is in seconds; set with RATE_LIMITED.
	RetryAfter float64 `json:"retry_after,omitempty"`
}

// AsError turns the payload back into an *Error, for callers that received an error message.
func (p ErrorPayload) AsError() *Error {
	e := &Error{Code: p.Code, Message: p.Message, Detail: p.Detail}
	if p.RetryAfter > 0 {
		e.RetryAfter = secondsToDuration(p.RetryAfter)
	}
	return e
}

// Heartbeat statuses.
const (
	StatusAlive    = "alive"
	StatusBusy     = "busy"
	StatusDraining = "draining"
	StatusOffline  = "offline"
)

// HeartbeatPayload is the payload of a `heartbeat` message.
type HeartbeatPayload struct {
	Status      string  `json:"status"`
	Load        float64 `json:"load"`
	ActiveTasks int     `json:"active_tasks"`
	Version     string  `json:"version,omitempty"`
}

// Event severities.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// EventPayload is the payload of an `event` message. Data is an extension for structured
// event content.
type EventPayload struct {
	EventType string `json:"event_type"`
	Detail    string `json:"detail,omitempty"`
	Severity  string `json:"severity,omitempty"`
	Data      any    `json:"data,omitempty"`
}

// Response statuses (draft section "response").
const (
	ResponseAccepted = "accepted"
	ResponseRejected = "rejected"
	ResponsePending  = "pending"
	ResponseCounter  = "counter"
)

// ResponseStatus is the part every response payload has: status and an optional detail.
type ResponseStatus struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// CapabilitySet names tools, models and domains.
type CapabilitySet struct {
	Tools   []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	Models  []string `json:"models,omitempty" yaml:"models,omitempty"`
	Domains []string `json:"domains,omitempty" yaml:"domains,omitempty"`
}

// Empty reports whether the set names nothing.
func (s CapabilitySet) Empty() bool {
	return len(s.Tools) == 0 && len(s.Models) == 0 && len(s.Domains) == 0
}

// QueryConstraints are the constraints of a capability query.
type QueryConstraints struct {
	MaxLatencyMs int    `json:"max_latency_ms,omitempty" yaml:"max_latency_ms,omitempty"`
	Locality     string `json:"locality,omitempty" yaml:"locality,omitempty"`
}

// CapabilityQuery is the payload of a `request` with intent `query` (draft "Capability Query").
type CapabilityQuery struct {
	Required    CapabilitySet    `json:"required,omitzero" yaml:"required,omitempty"`
	Preferred   CapabilitySet    `json:"preferred,omitzero" yaml:"preferred,omitempty"`
	Constraints QueryConstraints `json:"constraints,omitzero" yaml:"constraints,omitempty"`
}

// RateLimit is the rate a manifest advertises, so that senders can self-throttle.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty" yaml:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty" yaml:"tokens_per_minute,omitempty"`
}

// Manifest is an agent's capability manifest (draft "Capability Manifest").
type Manifest struct {
	AgentID          string    `json:"agent_id" yaml:"agent_id"`
	Name             string    `json:"name,omitempty" yaml:"name,omitempty"`
	Tools            []string  `json:"tools,omitempty" yaml:"tools,omitempty"`
	Models           []string  `json:"models,omitempty" yaml:"models,omitempty"`
	MaxContextTokens int       `json:"max_context_tokens,omitempty" yaml:"max_context_tokens,omitempty"`
	Domains          []string  `json:"domains,omitempty" yaml:"domains,omitempty"`
	RateLimit        RateLimit `json:"rate_limit,omitzero" yaml:"rate_limit,omitempty"`
	TrustScore       float64   `json:"trust_score,omitempty" yaml:"trust_score,omitempty"`
	Deployment       string    `json:"deployment,omitempty" yaml:"deployment,omitempty"`
	Version          string    `json:"version,omitempty" yaml:"version,omitempty"`
	UptimeSeconds    int64     `json:"uptime_seconds,omitempty" yaml:"uptime_seconds,omitempty"`
}

// Capabilities returns the manifest's tools, models and domains as a set.
func (m Manifest) Capabilities() CapabilitySet {
	return CapabilitySet{Tools: m.Tools, Models: m.Models, Domains: m.Domains}
}

// NormalizeCapability is how capability names are compared and keyed: trimmed and lower-cased,
// so "Terminal" and "terminal " are the same capability.
func NormalizeCapability(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// ManifestResponse is the payload of a `response` to a capability query.
type ManifestResponse struct {
	Status   string   `json:"status"`
	Manifest Manifest `json:"manifest"`
}

// DecodePayload decodes m's payload into v. A missing payload decodes as an empty object.
// Errors are PAYLOAD_INVALID.
func DecodePayload(m *Message, v any) error {
	raw := m.Message.Payload
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return Errorf(CodePayloadInvalid, "%s payload: %w", m.Message.Type, err)
	}
	return nil
}

// ErrorOf decodes the payload of an `error` message into an *Error.
func ErrorOf(m *Message) (*Error, error) {
	if m.Message.Type != TypeError {
		return nil, fmt.Errorf("message is a %s, not an error", m.Message.Type)
	}
	var p ErrorPayload
	if err := DecodePayload(m, &p); err != nil {
		return nil, err
	}
	return p.AsError(), nil
}

// StatusOf returns the status field of a response payload.
func StatusOf(m *Message) (string, error) {
	var s ResponseStatus
	if err := DecodePayload(m, &s); err != nil {
		return "", err
	}
	return s.Status, nil
}
