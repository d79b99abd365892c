package authority

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A2ACP token lifetimes and size.
const (
	// DefaultTokenTTL is a token's lifetime when TokenRequest.TTL is zero (the A2ACP draft's
	// example asks for 3600 s).
	DefaultTokenTTL = time.Hour
	// MaxTokenTTL is the longest lifetime IssueToken grants: tokens are not revocable, so
	// they stay short.
	MaxTokenTTL = 24 * time.Hour
	// MaxTokenBytes bounds a token; Verifier.Token refuses a larger one under rule 1.
	MaxTokenBytes = 8 << 10
)

// TokenRequest is what IssueToken grants: Subject may call Audience with Capabilities.
type TokenRequest struct {
	// Subject is the calling agent ("sub") and Audience the called one ("aud").
	Subject, Audience string
	// Capabilities are the granted capabilities, e.g. "read:datasets".
	Capabilities []string
	// Domain is the subject's domain; when empty, the namespace of Subject (the part before
	// its first ':') if it has one.
	Domain string
	// TTL is the lifetime: DefaultTokenTTL when zero, at most MaxTokenTTL.
	TTL time.Duration
}

// Token is an A2ACP authorization token and its claims.
type Token struct {
	// Raw is the compact JWS, what goes into security.auth_token.
	Raw string
	// Subject, Issuer, Audience and Domain are "sub", "iss", "aud" and "domain"; ID is "jti".
	Subject, Issuer, Audience, Domain, ID string
	Capabilities                          []string
	// IssuedAt and Expires are "iat" and "exp".
	IssuedAt, Expires time.Time
}

// tokenClaims are the claims of an A2ACP token, named exactly as the draft names them.
type tokenClaims struct {
	jwt.RegisteredClaims
	Audience     audience `json:"aud"`
	Capabilities []string `json:"capabilities"`
	Domain       string   `json:"domain"`
}

// IssueToken signs an A2ACP token for req.
func (a *Authority) IssueToken(req TokenRequest) (*Token, error) {
	if req.Subject == "" || req.Audience == "" {
		return nil, errors.New("authority: token request: Subject and Audience are required")
	}
	domain := req.Domain
	if domain == "" && strings.Contains(req.Subject, ":") {
		domain = namespace(req.Subject)
	}
	if domain == "" {
		return nil, fmt.Errorf("authority: token request for %s: Domain is required (the subject has no namespace)", req.Subject)
	}
	ttl, err := checkTTL("TTL", req.TTL, DefaultTokenTTL, MaxTokenTTL)
	if err != nil {
		return nil, fmt.Errorf("authority: token request for %s: %w", req.Subject, err)
	}
	jti, err := a.newID()
	if err != nil {
		return nil, err
	}
	now := a.now().UTC().Truncate(time.Second)
	t := &Token{
		Subject: req.Subject, Issuer: a.id, Audience: req.Audience, Domain: domain, ID: jti,
		Capabilities: nonNil(req.Capabilities), IssuedAt: now, Expires: now.Add(ttl),
	}
	claims := &tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject: t.Subject, Issuer: t.Issuer, ID: t.ID,
			IssuedAt: jwt.NewNumericDate(t.IssuedAt), ExpiresAt: jwt.NewNumericDate(t.Expires),
		},
		Audience: audience{t.Audience}, Capabilities: t.Capabilities, Domain: t.Domain,
	}
	if t.Raw, err = a.sign(typToken, claims); err != nil {
		return nil, err
	}
	if len(t.Raw) > MaxTokenBytes {
		return nil, fmt.Errorf("authority: token for %s would be %d bytes, more than MaxTokenBytes (%d)", req.Subject, len(t.Raw), MaxTokenBytes)
	}
	return t, nil
}

// tokenTyp accepts a token header whose typ is "JWT" (in any case, RFC 7519 section 5.1) or
// absent, as other issuers may omit it; certificates and revocation lists have their own.
func tokenTyp(typ string, present bool) error {
	if present && !strings.EqualFold(typ, typToken) {
		return fmt.Errorf("typ %q is not %q", typ, typToken)
	}
	return nil
}

// Token validates the A2ACP token raw for a call to the agent target that needs the
// capabilities required, by the draft's five rules. A refusal is a *RuleError with the rule
// and its code. An unknown issuer is reported as rule 5, before any signature is looked at;
// a known issuer's bad signature, a malformed or oversized token, or a missing sub is rule 1.
//
// A token that passed is remembered (TokenCacheSize of them, by hash), so that an agent
// sending the same token with every message pays for one signature check: a remembered token
// is checked again for expiry, audience and capabilities, which cost nothing; if it fails
// any, the full check runs and says why.
func (v *Verifier) Token(raw string, target string, required []string) (*Token, error) {
	if len(raw) > MaxTokenBytes {
		return nil, ruleError(RuleSignature, "%d bytes, more than %d", len(raw), MaxTokenBytes)
	}
	key := sha256.Sum256([]byte(raw))
	if e, ok := v.tokens.Get(key); ok && e.tok.Expires.After(v.now().Add(-v.skew)) && slices.Contains(e.aud, target) && len(Missing(required, e.tok.Capabilities)) == 0 {
		t := *e.tok
		t.Audience, t.Capabilities = target, slices.Clone(t.Capabilities)
		return &t, nil
	}
	var c tokenClaims
	keyFor := func() (ed25519.PublicKey, error) {
		if c.Issuer != "" && c.Issuer == v.meshID {
			return v.meshKey, nil
		}
		k, ok := v.issuers[c.Issuer]
		switch {
		case !ok:
			return nil, &keyError{fmt.Sprintf("iss %q is neither the mesh id %s nor a trusted issuer", c.Issuer, v.meshID)}
		case k == nil:
			return nil, &typError{fmt.Sprintf("the key of issuer %q is not Ed25519", c.Issuer)}
		}
		return k, nil
	}
	if err := verifyJWS(raw, &c, tokenTyp, keyFor); err != nil {
		if err.stage == stageKey {
			return nil, ruleError(RuleIssuer, "%s", err.msg)
		}
		if err.stage == stageSignature {
			err.msg = fmt.Sprintf("not signed by the key of issuer %q", c.Issuer)
		}
		return nil, ruleError(RuleSignature, "%s", err.msg)
	}
	if c.Subject == "" {
		return nil, ruleError(RuleSignature, "no sub claim: not an A2ACP token")
	}
	now := v.now()
	exp, ok := timeOf(c.ExpiresAt)
	if !ok {
		return nil, ruleError(RuleExpiration, "exp is required")
	}
	if !exp.After(now.Add(-v.skew)) {
		return nil, ruleError(RuleExpiration, "expired at %s (now %s, skew %v)", fmtTime(exp), fmtTime(now), v.skew)
	}
	if nbf, ok := timeOf(c.NotBefore); ok && nbf.After(now.Add(v.skew)) {
		return nil, ruleError(RuleExpiration, "not valid before %s (now %s, skew %v)", fmtTime(nbf), fmtTime(now), v.skew)
	}
	iat, _ := timeOf(c.IssuedAt)
	if iat.After(now.Add(v.skew)) {
		return nil, ruleError(RuleExpiration, "issued at %s, in the future (now %s, skew %v)", fmtTime(iat), fmtTime(now), v.skew)
	}
	if target == "" || !slices.Contains(c.Audience, target) {
		return nil, ruleError(RuleAudience, "aud %q does not name the target %q", []string(c.Audience), target)
	}
	if missing := Missing(required, c.Capabilities); len(missing) > 0 {
		return nil, ruleError(RuleCapabilities, "capabilities %q not granted", missing)
	}
	t := &Token{
		Raw: raw, Subject: c.Subject, Issuer: c.Issuer, Audience: target, Domain: c.Domain, ID: c.ID,
		Capabilities: slices.Clone(c.Capabilities), IssuedAt: iat, Expires: exp,
	}
	kept := *t
	kept.Capabilities = slices.Clone(t.Capabilities)
	v.tokens.Add(key, verifiedToken{tok: &kept, aud: slices.Clone([]string(c.Audience))})
	return t, nil
}

// TokenCacheSize is how many verified tokens a Verifier remembers.
const TokenCacheSize = 1024

// verifiedToken is a token that passed every rule once, with its whole audience.
type verifiedToken struct {
	tok *Token
	aud []string
}

// Missing returns the members of required that granted lacks, each once, in order.
func Missing(required, granted []string) []string {
	var missing []string
	for _, r := range required {
		if !slices.Contains(granted, r) && !slices.Contains(missing, r) {
			missing = append(missing, r)
		}
	}
	return missing
}
