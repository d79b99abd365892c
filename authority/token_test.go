package authority

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/protocol"
)

const (
	tokenSubject  = "acme:host1:tester"
	tokenAudience = "acme:host2:datasets"
)

// tokenRequest is the standard test request.
var tokenRequest = TokenRequest{Subject: tokenSubject, Audience: tokenAudience, Capabilities: []string{"read:datasets", "write:test_scenarios"}}

func TestToken_IssuedThenValidated(t *testing.T) {
	f := newFixture(t)
	tok, err := f.auth.IssueToken(tokenRequest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.verifier.Token(tok.Raw, tokenAudience, []string{"read:datasets"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != tokenSubject || got.Issuer != f.auth.ID() || got.Audience != tokenAudience || got.Domain != "acme" ||
		got.ID != tok.ID || !got.Expires.Equal(t0.Add(DefaultTokenTTL)) || !got.IssuedAt.Equal(t0) ||
		!slices.Equal(got.Capabilities, tokenRequest.Capabilities) {
		t.Fatalf("validated %+v, issued %+v", got, tok)
	}
	m := claimsOf(t, tok.Raw)
	want := []string{"aud", "capabilities", "domain", "exp", "iat", "iss", "jti", "sub"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("claims %v, want the draft's %v", got, want)
	}
	if m["aud"] != tokenAudience {
		t.Fatalf("aud %v: want a single string", m["aud"])
	}
}

func TestIssueToken_RefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	for name, req := range map[string]TokenRequest{
		"no subject":               {Audience: tokenAudience},
		"no audience":              {Subject: tokenSubject},
		"no domain, no namespace":  {Subject: "sdlc-test-agent", Audience: tokenAudience},
		"ttl longer than 24 hours": {Subject: tokenSubject, Audience: tokenAudience, TTL: 25 * time.Hour},
	} {
		if _, err := f.auth.IssueToken(req); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
	tok, err := f.auth.IssueToken(TokenRequest{Subject: "sdlc-test-agent", Audience: "x", Domain: "a_domain"})
	if err != nil || tok.Domain != "a_domain" {
		t.Fatalf("explicit domain: %v %+v", err, tok)
	}
}

// tokenCase is a token, the call it is validated for, and the rule that must refuse it.
type tokenCase struct {
	name     string
	raw      string
	now      time.Time
	target   string
	required []string
	rule     Rule
	want     string
}

// tokenCases returns one valid token and one token per violated rule (some rules more than
// once), all issued at t0. The vectors are made from the same cases.
func tokenCases(t testing.TB, f *fixture) (valid tokenCase, invalid []tokenCase) {
	tok, err := f.auth.IssueToken(tokenRequest)
	if err != nil {
		t.Fatal(err)
	}
	mesh := seedKey(t, seedAuthority)
	header := map[string]any{"alg": "EdDSA", "typ": "JWT"}
	claims := func(edit func(map[string]any)) map[string]any {
		m := claimsOf(t, tok.Raw)
		edit(m)
		return m
	}
	other, err := New(f.other, WithClock(func() time.Time { return t0 }), withRandom(&detRand{label: "other"}))
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := other.IssueToken(tokenRequest)
	if err != nil {
		t.Fatal(err)
	}
	meshPub, _ := f.auth.PublicKey().Raw()
	hs256 := func(in []byte) []byte { h := hmac.New(sha256.New, meshPub); h.Write(in); return h.Sum(nil) }
	parts := strings.Split(tok.Raw, ".")
	tampered := parts[0] + "." + b64.EncodeToString(mustJSON(t, claims(func(m map[string]any) {
		m["capabilities"] = []string{"read:datasets", "write:test_scenarios", "admin"}
	}))) + "." + parts[2]
	now := t0.Add(10 * time.Second)
	req := []string{"read:datasets"}
	valid = tokenCase{name: "valid", raw: tok.Raw, now: now, target: tokenAudience, required: req}
	invalid = []tokenCase{
		{"rule-1-tampered", tampered, now, tokenAudience, req, RuleSignature, "not signed by the key of issuer"},
		{"rule-1-signed-by-another-key", forge(t, header, claimsOf(t, tok.Raw), edSigner(t, f.other)), now, tokenAudience, req, RuleSignature, "not signed by the key of issuer"},
		{"rule-1-alg-none", forge(t, map[string]any{"alg": "none", "typ": "JWT"}, claimsOf(t, tok.Raw), func([]byte) []byte { return nil }), now, tokenAudience, req, RuleSignature, `alg "none"`},
		{"rule-1-hs256-keyed-with-the-public-key", forge(t, map[string]any{"alg": "HS256", "typ": "JWT"}, claimsOf(t, tok.Raw), hs256), now, tokenAudience, req, RuleSignature, `alg "HS256"`},
		{"rule-2-expired", tok.Raw, tok.Expires.Add(DefaultSkew), tokenAudience, req, RuleExpiration, "expired at"},
		{"rule-3-other-audience", tok.Raw, now, "acme:host3:other", req, RuleAudience, `does not name the target "acme:host3:other"`},
		{"rule-4-capability-missing", tok.Raw, now, tokenAudience, []string{"read:datasets", "delete:datasets"}, RuleCapabilities, `capabilities ["delete:datasets"] not granted`},
		{"rule-5-unknown-issuer", unknown.Raw, now, tokenAudience, req, RuleIssuer, "is neither the mesh id"},
		{"rule-5-unknown-issuer-signed-by-mesh", forge(t, header, claims(func(m map[string]any) { m["iss"] = "a_domain-auth-service" }), edSigner(t, mesh)), now, tokenAudience, req, RuleIssuer, `iss "a_domain-auth-service"`},
	}
	return valid, invalid
}

func TestToken_EachRuleViolatedAloneGivesItsRuleAndCode(t *testing.T) {
	f := newFixture(t)
	valid, invalid := tokenCases(t, f)
	for _, c := range append(invalid, valid) {
		t.Run(c.name, func(t *testing.T) {
			f.clock.t = c.now
			_, err := f.verifier.Token(c.raw, c.target, c.required)
			if c.rule == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var re *RuleError
			if !errors.As(err, &re) || re.Rule != c.rule {
				t.Fatalf("error %v: want rule %d", err, c.rule)
			}
			wantCode(t, err, c.rule.Code())
			if re.Code() != c.rule.Code() {
				t.Fatalf("RuleError.Code %s", re.Code())
			}
			prefix := "A2ACP token rule " + string(rune('0'+c.rule)) + " (" + c.rule.String() + "): "
			if !strings.Contains(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("message %q: want %q and %q", err, prefix, c.want)
			}
		})
	}
	if RuleAudience.Code() != protocol.CodePermissionDenied || RuleCapabilities.Code() != protocol.CodePermissionDenied ||
		RuleSignature.Code() != protocol.CodeIdentityInvalid || RuleExpiration.Code() != protocol.CodeIdentityInvalid || RuleIssuer.Code() != protocol.CodeIdentityInvalid {
		t.Fatal("rule codes")
	}
}

func TestToken_TrustedIssuerForTokensOnly(t *testing.T) {
	issuerKey := seedKey(t, seedOther)
	f := newFixture(t, WithTrustedIssuer("a_domain-auth-service", issuerKey.GetPublic()))
	claims := map[string]any{
		"sub": "sdlc-test-agent", "iss": "a_domain-auth-service", "aud": []string{"dataset-provisioning-agent"},
		"exp": t0.Add(time.Hour).Unix(), "iat": t0.Unix(), "capabilities": []string{"read:datasets"}, "domain": "a_domain",
	}
	raw := forge(t, map[string]any{"alg": "EdDSA", "typ": "JWT"}, claims, edSigner(t, issuerKey))
	tok, err := f.verifier.Token(raw, "dataset-provisioning-agent", []string{"read:datasets"})
	if err != nil || tok.Issuer != "a_domain-auth-service" || tok.Subject != "sdlc-test-agent" {
		t.Fatalf("trusted issuer's token (aud as an array): %+v, %v", tok, err)
	}
	// The same key claiming to be the mesh is rule 1: the mesh id belongs to the mesh key.
	claims["iss"] = f.auth.ID()
	_, err = f.verifier.Token(forge(t, map[string]any{"alg": "EdDSA", "typ": "JWT"}, claims, edSigner(t, issuerKey)), "dataset-provisioning-agent", nil)
	var re *RuleError
	if !errors.As(err, &re) || re.Rule != RuleSignature {
		t.Fatalf("trusted issuer posing as the mesh: %v", err)
	}
	// A trusted issuer cannot issue certificates.
	other, err := New(issuerKey, WithClock(f.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := other.Issue(CertRequest{AgentID: agentID, Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Certificate(cert.Raw, f.agent, agentID); err == nil {
		t.Fatal("a certificate by a trusted token issuer was accepted")
	}
	// A non-Ed25519 issuer key verifies nothing.
	secp, _, _ := crypto.GenerateKeyPair(crypto.Secp256k1, 0)
	v := NewVerifier(f.auth.PublicKey(), WithVerifierClock(f.clock.now), WithTrustedIssuer("a_domain-auth-service", secp.GetPublic()))
	_, err = v.Token(raw, "dataset-provisioning-agent", nil)
	if !errors.As(err, &re) || re.Rule != RuleSignature {
		t.Fatalf("issuer with a secp256k1 key: %v", err)
	}
}

func TestToken_CertificateIsNotAToken(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	_, err := f.verifier.Token(c.Raw, agentID, nil)
	var re *RuleError
	if !errors.As(err, &re) || re.Rule != RuleSignature || !strings.Contains(err.Error(), "typ") {
		t.Fatalf("certificate as token: %v", err)
	}
	tok, _ := f.auth.IssueToken(tokenRequest)
	_, err = f.verifier.Certificate(tok.Raw, "", "")
	var ce *CertError
	if !errors.As(err, &ce) || ce.Check != CheckType {
		t.Fatalf("token as certificate: %v", err)
	}
}

// A token that passed once is remembered, and a remembered token is still held to every
// rule that can change: it expires, and it is no good for another audience or capability.
func TestToken_RememberedTokensStillExpireAndStayNarrow(t *testing.T) {
	f := newFixture(t)
	tok, err := f.auth.IssueToken(tokenRequest)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // verified, then remembered
		if _, err := f.verifier.Token(tok.Raw, tokenAudience, []string{"read:datasets"}); err != nil {
			t.Fatal(err)
		}
	}
	if f.verifier.tokens.Len() != 1 {
		t.Fatalf("%d tokens remembered, want 1", f.verifier.tokens.Len())
	}
	var re *RuleError
	if _, err := f.verifier.Token(tok.Raw, "acme:host3:other", nil); !errors.As(err, &re) || re.Rule != RuleAudience {
		t.Fatalf("a remembered token for another audience: %v", err)
	}
	if _, err := f.verifier.Token(tok.Raw, tokenAudience, []string{"admin"}); !errors.As(err, &re) || re.Rule != RuleCapabilities {
		t.Fatalf("a remembered token for a capability it lacks: %v", err)
	}
	f.clock.t = tok.Expires.Add(DefaultSkew + time.Second)
	if _, err := f.verifier.Token(tok.Raw, tokenAudience, nil); !errors.As(err, &re) || re.Rule != RuleExpiration {
		t.Fatalf("a remembered token after its exp: %v", err)
	}
}
