package protocol

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Code is a machine-readable IACP error code, carried in the `code` field of an error payload.
type Code string

// The IACP error-code registry: the Internet-Draft's eight codes (section "error"), plus
// AGENT_NOT_FOUND and PERMISSION_DENIED from IaCP 1.0 section 10.1 and DUPLICATE for the replay
// window. docs/protocol.md maps the other drafts' codes onto these.
const (
	CodeVersionUnsupported Code = "VERSION_UNSUPPORTED"
	CodeIdentityInvalid    Code = "IDENTITY_INVALID"
	CodeCapabilityMismatch Code = "CAPABILITY_MISMATCH"
	CodeRateLimited        Code = "RATE_LIMITED"
	CodeTimeout            Code = "TIMEOUT"
	CodeChannelUnknown     Code = "CHANNEL_UNKNOWN"
	CodePayloadInvalid     Code = "PAYLOAD_INVALID"
	CodeInternalError      Code = "INTERNAL_ERROR"
	CodeAgentNotFound      Code = "AGENT_NOT_FOUND"
	CodePermissionDenied   Code = "PERMISSION_DENIED"
	CodeDuplicate          Code = "DUPLICATE"
)

// CodeInfo describes one registered error code.
type CodeInfo struct {
	Code        Code
	Description string
	// Retryable says whether the sender MAY send the same request again (with a new
	// message_id) and expect a different outcome.
	Retryable bool
}

var registry = map[Code]CodeInfo{
	CodeVersionUnsupported: {CodeVersionUnsupported, "envelope version not supported", false},
	CodeIdentityInvalid:    {CodeIdentityInvalid, "signature verification failed or identity not trusted", false},
	CodeCapabilityMismatch: {CodeCapabilityMismatch, "agent cannot fulfil the requested intent", false},
	CodeRateLimited:        {CodeRateLimited, "recipient is overloaded; retry after the given delay", true},
	CodeTimeout:            {CodeTimeout, "request expired before processing or no response within the TTL", true},
	CodeChannelUnknown:     {CodeChannelUnknown, "recipient does not support the specified channel", false},
	CodePayloadInvalid:     {CodePayloadInvalid, "message or payload failed validation", false},
	CodeInternalError:      {CodeInternalError, "unspecified recipient error", true},
	CodeAgentNotFound:      {CodeAgentNotFound, "target agent not known or not reachable", true},
	CodePermissionDenied:   {CodePermissionDenied, "sender is not allowed to use this intent", false},
	CodeDuplicate:          {CodeDuplicate, "message_id already processed within its TTL", false},
}

// Lookup returns the registry entry of a code and whether the code is registered.
func Lookup(c Code) (CodeInfo, bool) {
	info, ok := registry[c]
	return info, ok
}

// Codes returns every registered code, sorted.
func Codes() []CodeInfo {
	out := make([]CodeInfo, 0, len(registry))
	for _, info := range registry {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Retryable reports whether the registry marks the code retryable. Unknown codes are not.
func (c Code) Retryable() bool { return registry[c].Retryable }

// Error is a failure with an IACP error code. It is what validation, verification and the
// replay window return, and what becomes an error message on the wire (see Builder.Error).
type Error struct {
	Code    Code
	Message string
	// Detail is optional structured data, encoded as the payload's `detail`.
	Detail any
	// RetryAfter, when positive, tells the sender how long to wait (RATE_LIMITED).
	RetryAfter time.Duration
	// Err is the underlying cause, if any.
	Err error
}

// Errorf returns an *Error with the given code and a formatted message. A %w verb in format
// wraps its operand as the cause.
func Errorf(code Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches any *Error with the same code, so errors.Is(err, ErrTimeout) asks "is this a
// TIMEOUT?".
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinel errors, one per code, for errors.Is. They carry no message.
var (
	// ErrVersionUnsupported: the envelope's MAJOR version is not one this node speaks.
	ErrVersionUnsupported = &Error{Code: CodeVersionUnsupported}
	// ErrIdentityInvalid: the signature does not verify, the key does not match
	// sender.peer_id, or the agent id is pinned to another key.
	ErrIdentityInvalid = &Error{Code: CodeIdentityInvalid}
	// ErrCapabilityMismatch: the recipient has no handler for the intent.
	ErrCapabilityMismatch = &Error{Code: CodeCapabilityMismatch}
	// ErrRateLimited: the sender exceeded its rate; see Error.RetryAfter.
	ErrRateLimited = &Error{Code: CodeRateLimited}
	// ErrTimeout: the TTL passed, or no response came in time.
	ErrTimeout = &Error{Code: CodeTimeout}
	// ErrChannelUnknown: recipient.channel is neither standard nor `x-` custom.
	ErrChannelUnknown = &Error{Code: CodeChannelUnknown}
	// ErrPayloadInvalid: the document or its payload failed validation.
	ErrPayloadInvalid = &Error{Code: CodePayloadInvalid}
	// ErrInternal: something failed on the recipient's side.
	ErrInternal = &Error{Code: CodeInternalError}
	// ErrAgentNotFound: the recipient agent is unknown or unreachable.
	ErrAgentNotFound = &Error{Code: CodeAgentNotFound}
	// ErrPermissionDenied: policy forbids this sender this intent.
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
	// ErrDuplicate: the replay window has seen this message_id within its TTL.
	ErrDuplicate = &Error{Code: CodeDuplicate}
)

// CodeOf returns the IACP code of err: the code of the first *Error in its chain, or of the
// first error that names one (Coded: a client's error answer, apiclient.APIError), or
// INTERNAL_ERROR for any other error. It returns "" for a nil error.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var c Coded
	if errors.As(err, &c) {
		return Code(c.IACPCode())
	}
	return CodeInternalError
}

// Coded is an error that carries an IACP code without being an *Error: a package that
// cannot import this one (the API's Go client) names the code of its errors so, and errors.Is
// matches it against the sentinels when its Is compares IACPCode.
type Coded interface {
	error
	IACPCode() string
}

// IACPCode returns e's code: *Error is Coded too.
func (e *Error) IACPCode() string { return string(e.Code) }
