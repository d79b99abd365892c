package authority

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The JOSE header "typ" of each kind of signed object, so that none can stand in for another.
const (
	typCert  = "iacp-cert+jwt"
	typCRL   = "iacp-crl+jwt"
	typToken = "JWT"
)

// algEdDSA is the only signature algorithm accepted (RFC 8037: Ed25519).
const algEdDSA = "EdDSA"

// b64 is base64url without padding (RFC 4648 section 5), as JOSE uses it. Decoding is strict:
// each value has exactly one encoding.
var b64 = base64.RawURLEncoding.Strict()

// sign signs claims as a compact JWS with EdDSA and the given typ.
func (a *Authority) sign(typ string, claims jwt.Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["typ"] = typ
	s, err := t.SignedString(a.signer)
	if err != nil {
		return "", fmt.Errorf("authority: sign: %w", err)
	}
	return s, nil
}

// stage is the step of JWS verification that failed.
type stage int

const (
	stageParse stage = iota + 1
	stageAlg
	stageTyp
	stageKey
	stageSignature
)

// jwsError is a failed JWS verification: the stage, and what went wrong in words.
type jwsError struct {
	stage stage
	msg   string
}

// keyError is returned by a key lookup that knows no key for the token.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

// typError is returned when the header's typ is not the expected one.
type typError struct{ msg string }

func (e *typError) Error() string { return e.msg }

// verifyJWS parses raw into claims and checks, in this order: well-formed compact JWS (parse),
// alg EdDSA (alg), typ (typ, by typOK), a key for it (key, by keyFor, which sees the decoded
// claims) and the Ed25519 signature (signature). Time and other claims are the caller's.
func verifyJWS(raw string, claims jwt.Claims, typOK func(typ string, present bool) error,
	keyFor func() (ed25519.PublicKey, error)) *jwsError {
	p := jwt.NewParser(jwt.WithValidMethods([]string{algEdDSA}), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())
	tok, err := p.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		typ, present := t.Header["typ"]
		s, isString := typ.(string)
		if present && !isString {
			return nil, &typError{fmt.Sprintf("typ is %T, not a string", typ)}
		}
		if err := typOK(s, present); err != nil {
			return nil, &typError{err.Error()}
		}
		if _, ok := t.Header["crit"]; ok {
			return nil, &typError{"header has crit extensions, which are not understood"}
		}
		return keyFor()
	})
	if err == nil {
		return nil
	}
	var te *typError
	var ke *keyError
	switch {
	case errors.As(err, &te):
		return &jwsError{stageTyp, te.msg}
	case errors.As(err, &ke):
		return &jwsError{stageKey, ke.msg}
	case errors.Is(err, jwt.ErrTokenMalformed):
		return &jwsError{stageParse, "not a compact JWS: " + err.Error()}
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return &jwsError{stageAlg, fmt.Sprintf("alg %s is not %s", algOf(tok), algEdDSA)}
	case tok != nil && tok.Method != nil && tok.Method.Alg() != algEdDSA:
		return &jwsError{stageAlg, fmt.Sprintf("alg %s is not %s", algOf(tok), algEdDSA)}
	default:
		return &jwsError{stageSignature, "the signature does not verify"}
	}
}

// algOf returns the header's alg for a message, quoted.
func algOf(t *jwt.Token) string {
	if t == nil || t.Header == nil {
		return "(none)"
	}
	if alg, ok := t.Header["alg"]; ok {
		return fmt.Sprintf("%q", fmt.Sprint(alg))
	}
	return "(missing)"
}

// exactTyp accepts exactly want.
func exactTyp(want string) func(string, bool) error {
	return func(typ string, present bool) error {
		if !present || typ != want {
			return fmt.Errorf("typ is %q, want %q", typ, want)
		}
		return nil
	}
}

// timeOf returns the time of a NumericDate, and whether it was present.
func timeOf(d *jwt.NumericDate) (time.Time, bool) {
	if d == nil {
		return time.Time{}, false
	}
	return d.UTC(), true
}

// audience is the "aud" claim: written as one string (the A2ACP draft), read as a string or
// an array of strings (RFC 7519).
type audience []string

// MarshalJSON writes a single audience as a string.
func (a audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

// UnmarshalJSON reads a string or an array of strings.
func (a *audience) UnmarshalJSON(b []byte) error {
	var s jwt.ClaimStrings
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	*a = audience(s)
	return nil
}

// namespace returns the part of an agent id before the first ':'.
func namespace(agentID string) string {
	ns, _, _ := strings.Cut(agentID, ":")
	return ns
}

// fmtTime formats an instant for messages.
func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
