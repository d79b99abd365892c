package protocol

import (
	"bytes"
	"encoding/json"
)

// MaxPermissions bounds the permissions a document's security member may require.
const MaxPermissions = 64

// securityMember is the top-level member that carries Security.
const securityMember = "security"

// Security is the top-level "security" member that A2ACP (specs/003: auth_token) and ACP v2
// (specs/002: permissions) put on a document. IACP keeps it as an extension member, covered
// by the sender's signature like the rest of the document.
type Security struct {
	// AuthToken is an A2ACP token (a compact JWS) whose capabilities authorise the message.
	AuthToken string `json:"auth_token,omitempty"`
	// Permissions are the ACP v2 permissions the message requires of its sender.
	Permissions []string `json:"permissions,omitempty"`
	// RequireApproval asks the sending node to hold the message until a human approves it
	// (ACP v2's security.requireApproval, docs/coordination.md "Approval"). It travels on,
	// signed, to the recipient, whose node does nothing with it.
	RequireApproval bool `json:"require_approval,omitempty"`
}

// Security returns the document's security member; a document without one has the zero
// Security. A malformed member is a PAYLOAD_INVALID error.
func (m *Message) Security() (Security, error) {
	var s Security
	raw, ok := m.Extra[securityMember]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return s, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return Security{}, Errorf(CodePayloadInvalid, "security: %v (want {\"auth_token\": string, \"permissions\": [string], \"require_approval\": bool})", err)
	}
	if len(s.Permissions) > MaxPermissions {
		return Security{}, Errorf(CodePayloadInvalid, "security.permissions: %d, more than %d", len(s.Permissions), MaxPermissions)
	}
	return s, nil
}

// WithSecurity sets the document's security member (removed when s is zero).
func WithSecurity(s Security) Option {
	return func(m *Message) {
		if s.AuthToken == "" && len(s.Permissions) == 0 && !s.RequireApproval {
			delete(m.Extra, securityMember)
			return
		}
		raw, _ := json.Marshal(s)
		if m.Extra == nil {
			m.Extra = Extra{}
		}
		m.Extra[securityMember] = raw
	}
}
