package protocol

import "strings"

// The dialects: IACP itself, and the other drafts (docs/protocol.md, "Drafts") that the node
// understands at its edge, whose error codes MapForeignCode knows. Dialects is the one list of
// them, in order: the dialect package, the local API's documentation and the command line's
// help read it.
const (
	// DialectIACP is IACP itself, draft-vystartas-iacp-00 (specs/001).
	DialectIACP = "iacp"
	// DialectIaCP1 is the IaCP Specification 1.0-draft (specs/000): section 10.1's error codes
	// and section 5.4.2's protocol errors.
	DialectIaCP1 = "iacp-1.0"
	// DialectACPv2 is ACP v2.0 (specs/002): its ErrorCategory values.
	DialectACPv2 = "acp-v2"
	// DialectA2ACP is A2ACP v1.0 (specs/003): its "Standard Error Codes".
	DialectA2ACP = "a2acp"
	// DialectElizaOS is the ElizaOS multi-agent draft (specs/004): the FAILURE and
	// NOT_UNDERSTOOD performatives and the reason codes of NOT_UNDERSTOOD and TASK_REJECT.
	DialectElizaOS = "elizaos"
)

// DialectInfo is one dialect the node speaks at its edge.
type DialectInfo struct {
	// Name is the dialect as a config file, a flag, ?dialect= and the documents spell it.
	Name string
	// Draft is the draft it comes from, and Shape what its documents are.
	Draft, Shape string
	// Sendable says an agent may hand the node a document of it to send (the local API's
	// POST, `iacp-node send --file`); A2ACP's documents are answers and handshakes the node
	// builds, not requests an agent writes.
	Sendable bool
}

var dialects = []DialectInfo{
	{DialectIACP, "draft-vystartas-iacp-00 (specs/001)", "the IACP envelope and message", true},
	{DialectIaCP1, "IaCP Specification 1.0-draft (specs/000)", "IaCP 1.0 messages", true},
	{DialectElizaOS, "ElizaOS multi-agent draft (specs/004)", "FIPA-ACL style performatives", true},
	{DialectACPv2, "ACP v2.0 (specs/002)", "AgentCommand and AgentResponse", true},
	{DialectA2ACP, "A2ACP v1.0 (specs/003)", "A2ACP messages, validated against the draft's JSON Schema", false},
}

// Dialects returns every dialect the node speaks, IACP first.
func Dialects() []DialectInfo { return append([]DialectInfo(nil), dialects...) }

// DialectNames returns the names of the dialects, IACP first; with sendable, only those an
// agent may hand the node to send.
func DialectNames(sendable bool) []string {
	var out []string
	for _, d := range dialects {
		if !sendable || d.Sendable {
			out = append(out, d.Name)
		}
	}
	return out
}

// DialectList writes names as a person reads a list: "a, b, c or d".
func DialectList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// ForeignCode is one row of the table that maps another draft's error code onto ours
// (docs/protocol.md, "Other drafts' error codes"; a test keeps the two identical).
type ForeignCode struct {
	Dialect string
	// Code is spelled as the dialect spells it; MapForeignCode matches it case-insensitively.
	Code string
	// Source is where the dialect defines the code.
	Source string
	// IACP is our code.
	IACP Code
	// TheirRetry is the dialect's own retry advice: "yes", "no", or "" where it gives none.
	TheirRetry string
}

var foreignCodes = []ForeignCode{
	{DialectIaCP1, "INVALID_FORMAT", "10.1", CodePayloadInvalid, "no"},
	{DialectIaCP1, "UNSUPPORTED_VERSION", "10.1, 5.4.2", CodeVersionUnsupported, "no"},
	{DialectIaCP1, "AGENT_NOT_FOUND", "10.1", CodeAgentNotFound, "yes"},
	{DialectIaCP1, "TIMEOUT", "10.1", CodeTimeout, "yes"},
	{DialectIaCP1, "PERMISSION_DENIED", "10.1", CodePermissionDenied, "no"},
	{DialectIaCP1, "INVALID_MESSAGE_FORMAT", "5.4.2", CodePayloadInvalid, ""},
	{DialectIaCP1, "AUTHENTICATION_FAILED", "5.4.2", CodeIdentityInvalid, ""},

	{DialectACPv2, "user_error", "Error Categories", CodePayloadInvalid, ""},
	{DialectACPv2, "agent_error", "Error Categories", CodeInternalError, ""},
	{DialectACPv2, "system_error", "Error Categories", CodeInternalError, ""},
	{DialectACPv2, "timeout_error", "Error Categories", CodeTimeout, ""},
	{DialectACPv2, "permission_error", "Error Categories", CodePermissionDenied, ""},

	{DialectA2ACP, "CAPABILITY_NOT_FOUND", "Standard Error Codes", CodeCapabilityMismatch, "no"},
	{DialectA2ACP, "SCHEMA_MISMATCH", "Standard Error Codes", CodeCapabilityMismatch, "no"},
	{DialectA2ACP, "AUTH_FAILED", "Standard Error Codes", CodeIdentityInvalid, "no"},
	{DialectA2ACP, "TIMEOUT", "Standard Error Codes", CodeTimeout, "yes"},
	{DialectA2ACP, "INTERNAL_ERROR", "Standard Error Codes", CodeInternalError, "yes"},
	{DialectA2ACP, "RATE_LIMIT_EXCEEDED", "Standard Error Codes", CodeRateLimited, "yes"},
	{DialectA2ACP, "CONTRACT_VIOLATION", "Standard Error Codes", CodePayloadInvalid, "no"},
	{DialectA2ACP, "SECURITY_POLICY_VIOLATION", "Standard Error Codes", CodePermissionDenied, "no"},

	{DialectElizaOS, "FAILURE", "4.6 performative", CodeInternalError, ""},
	{DialectElizaOS, "NOT_UNDERSTOOD", "4.7 performative", CodePayloadInvalid, ""},
	{DialectElizaOS, "unknown_performative", "4.7 reason_code", CodeCapabilityMismatch, ""},
	{DialectElizaOS, "parsing_error", "4.7 reason_code", CodePayloadInvalid, ""},
	{DialectElizaOS, "unknown_ontology", "4.7 reason_code", CodeCapabilityMismatch, ""},
	{DialectElizaOS, "invalid_payload_structure", "4.7 reason_code", CodePayloadInvalid, ""},
	{DialectElizaOS, "busy", "4.5 TASK_REJECT reason_code", CodeRateLimited, ""},
	{DialectElizaOS, "incapable", "4.5 TASK_REJECT reason_code", CodeCapabilityMismatch, ""},
	{DialectElizaOS, "unauthorized", "4.5 TASK_REJECT reason_code", CodePermissionDenied, ""},
}

// ForeignCodes returns the whole mapping table, in the order docs/protocol.md lists it.
func ForeignCodes() []ForeignCode { return append([]ForeignCode(nil), foreignCodes...) }

// MapForeignCode maps an error code of another draft onto the IACP registry. dialect is one
// of the Dialect constants; code is matched case-insensitively, so ACP v2's enum names
// (USER_ERROR) work as well as its values (user_error). For ElizaOS, pass the message's
// reason_code when it has one, else its performative. ok is false for a dialect or code the
// table does not list; a caller then usually reports INTERNAL_ERROR.
func MapForeignCode(dialect, code string) (c Code, ok bool) {
	for _, f := range foreignCodes {
		if strings.EqualFold(f.Dialect, dialect) && strings.EqualFold(f.Code, code) {
			return f.IACP, true
		}
	}
	return "", false
}
