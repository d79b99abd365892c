package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The IACP error codes the API answers with (docs/api.md "Errors").
const (
	CodePayloadInvalid     = "PAYLOAD_INVALID"
	CodeIdentityInvalid    = "IDENTITY_INVALID"
	CodePermissionDenied   = "PERMISSION_DENIED"
	CodeAgentNotFound      = "AGENT_NOT_FOUND"
	CodeDuplicate          = "DUPLICATE"
	CodeCapabilityMismatch = "CAPABILITY_MISMATCH"
	CodeRateLimited        = "RATE_LIMITED"
	CodeTimeout            = "TIMEOUT"
	CodeChannelUnknown     = "CHANNEL_UNKNOWN"
	CodeVersionUnsupported = "VERSION_UNSUPPORTED"
	CodeInternalError      = "INTERNAL_ERROR"
)

// ErrorPayload is the payload of an IACP error message: what an error answer carries.
type ErrorPayload struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Detail    any    `json:"detail,omitempty"`
	Retryable bool   `json:"retryable"`
	// RetryAfter is in seconds; set with RATE_LIMITED.
	RetryAfter float64 `json:"retry_after,omitempty"`
}

// ErrorDoc is the body of every error answer.
type ErrorDoc struct {
	Error ErrorPayload `json:"error"`
	// MessageID is the id of the message the error is about, when there is one.
	MessageID string `json:"message_id,omitempty"`
}

// APIError is an error answer of the API: the HTTP status and the IACP error it carries. Its
// text is the node's, "CODE: what happened; what to do".
type APIError struct {
	Status int
	ErrorPayload
	MessageID string
}

func (e *APIError) Error() string {
	if e.Message == "" {
		return e.ErrorPayload.Code
	}
	if strings.HasPrefix(e.Message, e.ErrorPayload.Code+":") {
		return e.Message
	}
	return e.ErrorPayload.Code + ": " + e.Message
}

// Code returns the IACP error code.
func (e *APIError) Code() string { return e.ErrorPayload.Code }

// IACPCode returns the IACP error code: protocol.CodeOf reads it (protocol.Coded).
func (e *APIError) IACPCode() string { return e.ErrorPayload.Code }

// Is matches any error that names the same IACP code, such as protocol's sentinels:
// errors.Is(err, protocol.ErrTimeout) asks "is this a TIMEOUT?".
func (e *APIError) Is(target error) bool {
	t, ok := target.(interface{ IACPCode() string })
	return ok && t.IACPCode() == e.ErrorPayload.Code
}

// RetryAfterDuration is how long a RATE_LIMITED answer asks to wait (0 when it does not).
func (e *APIError) RetryAfterDuration() time.Duration {
	return time.Duration(e.RetryAfter * float64(time.Second))
}

// CodeOf returns the IACP code of err: an *APIError's code, INTERNAL_ERROR for any other
// error, "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var e *APIError
	if errors.As(err, &e) {
		return e.Code()
	}
	return CodeInternalError
}

// DecodeError returns the *APIError of an error answer with the HTTP status and body raw.
func DecodeError(status int, raw []byte) error {
	var doc ErrorDoc
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Error.Code == "" {
		return &APIError{Status: status, ErrorPayload: ErrorPayload{Code: CodeInternalError,
			Message: fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(raw)))}}
	}
	return &APIError{Status: status, ErrorPayload: doc.Error, MessageID: doc.MessageID}
}
