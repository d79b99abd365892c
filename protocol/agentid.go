package protocol

import (
	"fmt"
	"strings"
)

// MaxAgentIDLength is the longest agent id allowed (IaCP 1.0 section 10.1; not configurable).
const MaxAgentIDLength = 64

// ValidateAgentID checks the `namespace:host:name` syntax of a sender agent id: three
// non-empty segments of letters, digits, '.', '_' and '-', each starting with a letter or a
// digit, at most 64 characters in all. Wildcards are refused: a sender is one agent.
func ValidateAgentID(id string) error { return validateAgentID(id, false) }

// ValidateRecipientID is ValidateAgentID for recipients, which may also be "*" (every agent)
// or have "*" as any whole segment ("*:*:builder" is every builder).
func ValidateRecipientID(id string) error { return validateAgentID(id, true) }

func validateAgentID(id string, wildcards bool) error {
	if id == "" {
		return Errorf(CodePayloadInvalid, "agent id is empty; the form is namespace:host:name")
	}
	if len(id) > MaxAgentIDLength {
		return Errorf(CodePayloadInvalid, "agent id %.20q... is %d characters; at most %d are allowed", id, len(id), MaxAgentIDLength)
	}
	if wildcards && id == Broadcast {
		return nil
	}
	parts := strings.Split(id, ":")
	if len(parts) != 3 {
		return Errorf(CodePayloadInvalid, "agent id %q must have three segments, namespace:host:name", id)
	}
	for i, p := range parts {
		if p == "*" {
			if !wildcards {
				return Errorf(CodePayloadInvalid, "agent id %q: wildcards are only allowed in recipients", id)
			}
			continue
		}
		if err := checkSegment(p); err != nil {
			return Errorf(CodePayloadInvalid, "agent id %q, %s segment: %v", id, [3]string{"namespace", "host", "name"}[i], err)
		}
	}
	return nil
}

func checkSegment(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return fmt.Errorf("character %q at %d is not allowed (letters, digits, '.', '_', '-'; a letter or digit first)", c, i)
	}
	return nil
}

// MatchAgent reports whether the recipient pattern (which may hold wildcards) addresses the
// agent id.
func MatchAgent(pattern, id string) bool {
	if pattern == Broadcast || pattern == id {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return false
	}
	pp, ip := strings.Split(pattern, ":"), strings.Split(id, ":")
	if len(pp) != 3 || len(ip) != 3 {
		return false
	}
	for i := range pp {
		if pp[i] != "*" && pp[i] != ip[i] {
			return false
		}
	}
	return true
}

// IsWildcard reports whether a recipient id addresses more than one agent.
func IsWildcard(id string) bool { return strings.Contains(id, "*") }
