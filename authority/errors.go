package authority

import (
	"errors"
	"fmt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Check names one check of Verifier.Certificate; a CertError says which one failed. They are
// listed in the order they are made.
type Check string

// The certificate checks, in order.
const (
	CheckSize         Check = "size"          // at most MaxCertBytes
	CheckParse        Check = "parse"         // a compact JWS with JSON header and claims
	CheckAlg          Check = "alg"           // EdDSA, nothing else
	CheckType         Check = "typ"           // "iacp-cert+jwt"
	CheckSignature    Check = "signature"     // by the mesh authority key
	CheckIssuer       Check = "issuer"        // iss is the mesh id
	CheckNotBefore    Check = "not yet valid" // nbf and iat not after now + skew
	CheckExpiry       Check = "expired"       // exp after now - skew
	CheckSubject      Check = "subject"       // sub is a valid agent id, the expected one, ns its namespace
	CheckConfirmation Check = "cnf"           // the cnf key is an Ed25519 key, the expected peer's
	CheckRevoked      Check = "revoked"       // the jti is on no applied revocation list
)

// CertError is a certificate refused by Verifier.Certificate. Its Err is a *protocol.Error
// with CodeIdentityInvalid whose message names the agent and the check, so that errors.As to
// *protocol.Error and protocol.CodeOf see the code.
type CertError struct {
	Check Check
	Err   *protocol.Error
}

func (e *CertError) Error() string { return e.Err.Error() }

// Unwrap returns the *protocol.Error.
func (e *CertError) Unwrap() error { return e.Err }

// certError returns a CertError for the certificate of agent (the caller's expected agent, or
// the certificate's sub when the caller named none).
func certError(agent string, c Check, format string, args ...any) *CertError {
	if agent == "" {
		agent = "(unnamed)"
	}
	msg := fmt.Sprintf(format, args...)
	return &CertError{Check: c, Err: protocol.Errorf(protocol.CodeIdentityInvalid, "certificate of agent %s: %s: %s", agent, c, msg)}
}

// Rule is one of the A2ACP draft's five token validation rules (section "Token Validation
// Rules"), numbered as the draft numbers them.
type Rule int

// The A2ACP token validation rules.
const (
	RuleSignature    Rule = 1 // signed by the issuer's key (alg EdDSA), and well-formed
	RuleExpiration   Rule = 2 // exp > now (with skew); nbf and iat not in the future
	RuleAudience     Rule = 3 // aud == the target agent id
	RuleCapabilities Rule = 4 // every required capability is granted
	RuleIssuer       Rule = 5 // iss is the mesh id or a trusted issuer
)

// String names the rule.
func (r Rule) String() string {
	switch r {
	case RuleSignature:
		return "signature"
	case RuleExpiration:
		return "expiration"
	case RuleAudience:
		return "audience"
	case RuleCapabilities:
		return "capabilities"
	case RuleIssuer:
		return "issuer"
	}
	return fmt.Sprintf("rule(%d)", int(r))
}

// Code returns the IACP error code a violation of the rule is answered with: IDENTITY_INVALID
// for rules 1, 2 and 5 (who is this?), PERMISSION_DENIED for rules 3 and 4 (not for this).
func (r Rule) Code() protocol.Code {
	if r == RuleAudience || r == RuleCapabilities {
		return protocol.CodePermissionDenied
	}
	return protocol.CodeIdentityInvalid
}

// RuleError is a token refused by Verifier.Token: the rule it violates and a *protocol.Error
// with the rule's code and a message naming the rule.
type RuleError struct {
	Rule Rule
	Err  *protocol.Error
}

func (e *RuleError) Error() string { return e.Err.Error() }

// Unwrap returns the *protocol.Error.
func (e *RuleError) Unwrap() error { return e.Err }

// Code returns the IACP error code.
func (e *RuleError) Code() protocol.Code { return e.Err.Code }

// ruleError returns a RuleError.
func ruleError(r Rule, format string, args ...any) *RuleError {
	msg := fmt.Sprintf(format, args...)
	return &RuleError{Rule: r, Err: protocol.Errorf(r.Code(), "A2ACP token rule %d (%s): %s", int(r), r, msg)}
}

// Sentinel errors of the InviteBook, wrapped (with %w) in *protocol.Error values whose code the
// doc comment names, so that errors.Is and protocol.CodeOf both work.
var (
	// ErrInviteUnknown (IDENTITY_INVALID): Redeem and RedeemProof know no such invitation:
	// never issued, or expired and pruned.
	ErrInviteUnknown = errors.New("unknown invitation")
	// ErrInviteProof (IDENTITY_INVALID): RedeemProof's proof or Redeem's secret does not match.
	ErrInviteProof = errors.New("invitation proof does not match")
	// ErrInviteUsed (PERMISSION_DENIED): the invitation was already redeemed.
	ErrInviteUsed = errors.New("invitation already used")
	// ErrInviteExpired (PERMISSION_DENIED): the invitation expired.
	ErrInviteExpired = errors.New("invitation expired")
	// ErrInviteAgent (PERMISSION_DENIED): the invitation is bound to another agent id.
	ErrInviteAgent = errors.New("invitation is for another agent")
	// ErrInviteBookFull: Create refuses a new invitation while MaxInvites are held.
	ErrInviteBookFull = errors.New("too many outstanding invitations")
)
