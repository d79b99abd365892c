package authority

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/iacp-node/iacp-node/protocol"
)

const agentID = "acme:host1:builder"

// issue issues the standard test certificate.
func (f *fixture) issue(t *testing.T) *Certificate {
	t.Helper()
	c, err := f.auth.Issue(CertRequest{AgentID: agentID, Peer: f.agent, Capabilities: []string{"build"}, Permissions: []string{"handoff"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertificate_IssuedThenVerified(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	got, err := f.verifier.Certificate(c.Raw, f.agent, agentID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentID != agentID || got.Namespace != "acme" || got.Peer != f.agent || got.Issuer != f.auth.ID() ||
		got.ID != c.ID || len(got.ID) != 22 || !slices.Equal(got.Capabilities, []string{"build"}) ||
		!slices.Equal(got.Permissions, []string{"handoff"}) {
		t.Fatalf("verified %+v, issued %+v", got, c)
	}
	if !got.IssuedAt.Equal(t0) || !got.NotBefore.Equal(t0) || !got.Expires.Equal(t0.Add(DefaultCertTTL)) {
		t.Fatalf("times %v %v %v", got.IssuedAt, got.NotBefore, got.Expires)
	}
	if f.verifier.MeshID() != f.auth.ID() || !strings.HasPrefix(f.auth.ID(), "12D3KooW") {
		t.Fatalf("mesh id %s, authority id %s", f.verifier.MeshID(), f.auth.ID())
	}
	// Empty peer and agent skip those comparisons.
	if _, err := f.verifier.Certificate(c.Raw, "", ""); err != nil {
		t.Fatal(err)
	}
	// The claims are the documented ones.
	m := claimsOf(t, c.Raw)
	cnf := m["cnf"].(map[string]any)["jwk"].(map[string]any)
	if m["sub"] != agentID || m["ns"] != "acme" || m["iss"] != f.auth.ID() || cnf["kty"] != "OKP" || cnf["crv"] != "Ed25519" {
		t.Fatalf("claims %v", m)
	}
	want := []string{"capabilities", "cnf", "exp", "iat", "iss", "jti", "nbf", "ns", "permissions", "sub"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
}

func TestIssue_RefusesBadRequests(t *testing.T) {
	f := newFixture(t)
	rsa, _, _ := crypto.GenerateKeyPair(crypto.Secp256k1, 0)
	secp := peerOfKey(t, rsa)
	for name, req := range map[string]CertRequest{
		"bad agent id":       {AgentID: "nocolons", Peer: f.agent},
		"no peer":            {AgentID: agentID},
		"secp256k1 peer":     {AgentID: agentID, Peer: secp},
		"ttl too long":       {AgentID: agentID, Peer: f.agent, TTL: MaxCertTTL + time.Hour},
		"negative ttl":       {AgentID: agentID, Peer: f.agent, TTL: -time.Hour},
		"larger than 8 KiB ": {AgentID: agentID, Peer: f.agent, Capabilities: slices.Repeat([]string{strings.Repeat("c", 100)}, 80)},
	} {
		if _, err := f.auth.Issue(req); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
}

// certCase is a certificate that violates one check, the agent and peer it is checked for, and
// the check that must refuse it.
type certCase struct {
	name  string
	raw   string
	agent string
	check Check
	want  string // in the message
}

func TestCertificate_EachCheckRefusesAlone(t *testing.T) {
	f := newFixture(t)
	good := f.issue(t)
	mesh := seedKey(t, seedAuthority)
	header := map[string]any{"alg": "EdDSA", "typ": typCert}
	// resign returns the good certificate's claims changed by edit, signed by the mesh key.
	resign := func(edit func(map[string]any)) string {
		m := claimsOf(t, good.Raw)
		edit(m)
		return forge(t, header, m, edSigner(t, mesh))
	}
	meshPub, _ := f.auth.PublicKey().Raw()
	hs256 := func(in []byte) []byte { h := hmac.New(sha256.New, meshPub); h.Write(in); return h.Sum(nil) }
	other, err := New(f.other, WithClock(f.clock.now))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(CertRequest{AgentID: agentID, Peer: f.agent})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good.Raw, ".")
	cases := []certCase{
		{"larger than MaxCertBytes", good.Raw + strings.Repeat("A", MaxCertBytes), agentID, CheckSize, "bytes, more than 8192"},
		{"not a JWS", "not.a.jws", agentID, CheckParse, "not a compact JWS"},
		{"two segments", parts[0] + "." + parts[1], agentID, CheckParse, "not a compact JWS"},
		{"alg none", forge(t, map[string]any{"alg": "none", "typ": typCert}, claimsOf(t, good.Raw), func([]byte) []byte { return nil }), agentID, CheckAlg, `alg "none"`},
		{"HS256 keyed with the public key", forge(t, map[string]any{"alg": "HS256", "typ": typCert}, claimsOf(t, good.Raw), hs256), agentID, CheckAlg, `alg "HS256"`},
		{"alg unknown", forge(t, map[string]any{"alg": "Ed448", "typ": typCert}, claimsOf(t, good.Raw), edSigner(t, mesh)), agentID, CheckAlg, `alg "Ed448"`},
		{"typ of a token", forge(t, map[string]any{"alg": "EdDSA", "typ": "JWT"}, claimsOf(t, good.Raw), edSigner(t, mesh)), agentID, CheckType, `typ is "JWT"`},
		{"signed by another authority", foreign.Raw, agentID, CheckSignature, "not signed by the mesh authority"},
		{"payload changed after signing", parts[0] + "." + b64.EncodeToString([]byte(`{"sub":"acme:host1:builder"}`)) + "." + parts[2], agentID, CheckSignature, "not signed by the mesh authority"},
		{"iss of another mesh", resign(func(m map[string]any) { m["iss"] = other.ID() }), agentID, CheckIssuer, "is not the mesh id"},
		{"not yet valid", resign(func(m map[string]any) { m["nbf"] = t0.Add(time.Minute).Unix() }), agentID, CheckNotBefore, "valid from 2026-05-01T12:01:00Z"},
		{"issued in the future", resign(func(m map[string]any) { m["iat"] = t0.Add(time.Minute).Unix() }), agentID, CheckNotBefore, "in the future"},
		{"expired", resign(func(m map[string]any) { m["exp"] = t0.Add(-time.Minute).Unix() }), agentID, CheckExpiry, "expired at 2026-05-01T11:59:00Z"},
		{"no exp", resign(func(m map[string]any) { delete(m, "exp") }), agentID, CheckExpiry, "exp is required"},
		{"another agent", good.Raw, "acme:host1:tester", CheckSubject, `issued to "acme:host1:builder"`},
		{"ns not the namespace", resign(func(m map[string]any) { m["ns"] = "evil" }), agentID, CheckSubject, `ns "evil"`},
		{"no cnf", resign(func(m map[string]any) { delete(m, "cnf") }), agentID, CheckConfirmation, "no cnf.jwk"},
		{"cnf of another peer", resign(func(m map[string]any) {
			jwk, _ := peerJWK(peerOfKey(t, f.other))
			m["cnf"] = map[string]any{"jwk": jwk}
		}), agentID, CheckConfirmation, "bound to peer " + peerOfKey(t, f.other).String()},
		{"cnf not Ed25519", resign(func(m map[string]any) {
			m["cnf"] = map[string]any{"jwk": map[string]any{"kty": "EC", "crv": "P-256", "x": "AA"}}
		}), agentID, CheckConfirmation, "want OKP Ed25519"},
		{"no jti", resign(func(m map[string]any) { delete(m, "jti") }), agentID, CheckRevoked, "no jti"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.verifier.Certificate(c.raw, f.agent, c.agent)
			var ce *CertError
			if !errors.As(err, &ce) || ce.Check != c.check {
				t.Fatalf("error %v: want check %q", err, c.check)
			}
			wantCode(t, err, protocol.CodeIdentityInvalid)
			msg := err.Error()
			if !strings.Contains(msg, "certificate of agent "+c.agent+": "+string(c.check)+": ") || !strings.Contains(msg, c.want) {
				t.Fatalf("message %q: want the agent, the check %q and %q", msg, c.check, c.want)
			}
		})
	}
	// The good certificate still passes: each case above broke only its own check.
	if _, err := f.verifier.Certificate(good.Raw, f.agent, agentID); err != nil {
		t.Fatal(err)
	}
}

func TestCertificate_ClockSkewIsTolerated(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	f.clock.t = t0.Add(-DefaultSkew) // the verifier's clock is 30 s behind
	if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err != nil {
		t.Fatalf("30 s behind: %v", err)
	}
	f.clock.t = t0.Add(-DefaultSkew - time.Second)
	if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err == nil {
		t.Fatal("31 s behind: accepted")
	}
	f.clock.t = c.Expires.Add(DefaultSkew - time.Second)
	if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err != nil {
		t.Fatalf("29 s past exp: %v", err)
	}
	f.clock.t = c.Expires.Add(DefaultSkew)
	if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err == nil {
		t.Fatal("30 s past exp: accepted")
	}
}

func TestCertificate_RevokedIsRefused(t *testing.T) {
	f := newFixture(t)
	c := f.issue(t)
	crl, err := f.auth.RevocationList(1, []Revoked{{ID: c.ID, AgentID: c.AgentID, Expires: c.Expires}})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := f.verifier.ApplyRevocations(crl); err != nil || !changed {
		t.Fatalf("ApplyRevocations = %v, %v", changed, err)
	}
	_, err = f.verifier.Certificate(c.Raw, f.agent, agentID)
	var ce *CertError
	if !errors.As(err, &ce) || ce.Check != CheckRevoked || !strings.Contains(err.Error(), "revocation list 1") {
		t.Fatalf("revoked certificate: %v", err)
	}
}

func TestAuthority_SaveLoad(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "authority.key")
	if err := a.Save(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(path); err == nil {
		t.Fatal("Save overwrote a key")
	}
	b, err := Load(path)
	if err != nil || b.ID() != a.ID() || !b.PublicKey().Equals(a.PublicKey()) {
		t.Fatalf("Load: %v, id %s want %s", err, b.ID(), a.ID())
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Load of a key others can read: %v", err)
	}
	if _, err := New(nil); err == nil {
		t.Fatal("New(nil) succeeded")
	}
	k, _, _ := crypto.GenerateKeyPair(crypto.Secp256k1, 0)
	if _, err := New(k); err == nil {
		t.Fatal("New accepted a secp256k1 key")
	}
}

// TestCertificate_HeldSinceDecidesBetweenTwoHolders: a renewal carries its predecessor's
// held_since, a first certificate holds since its issue (without the claim), and Precedes picks
// the first holder of an agent id whichever certificate is newer; held_since after iat is
// refused.
func TestCertificate_HeldSinceDecidesBetweenTwoHolders(t *testing.T) {
	f := newFixture(t)
	first := f.issue(t)
	if _, ok := claimsOf(t, first.Raw)["held_since"]; ok || !first.HeldSince.Equal(t0) {
		t.Fatalf("a first certificate: held_since claim present or HeldSince %v; want none and iat", first.HeldSince)
	}
	later := t0.Add(48 * time.Hour)
	auth2, err := New(seedKey(t, seedAuthority), WithClock(func() time.Time { return later }))
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := auth2.Issue(CertRequest{AgentID: agentID, Peer: f.agent, HeldSince: first.HeldSince})
	if err != nil {
		t.Fatal(err)
	}
	second, err := auth2.Issue(CertRequest{AgentID: agentID, Peer: peerOfKey(t, f.other)})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.t = later
	got, err := f.verifier.Certificate(renewed.Raw, f.agent, agentID)
	if err != nil || !got.HeldSince.Equal(t0) || !got.IssuedAt.Equal(later) {
		t.Fatalf("the renewal verified as %+v, %v; want held since %v, issued %v", got, err, t0, later)
	}
	other, err := f.verifier.Certificate(second.Raw, "", agentID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Precedes(other) || other.Precedes(got) {
		t.Fatal("the renewed first holder must precede a later holder, and not the other way")
	}
	if got.Precedes(got) {
		t.Fatal("a certificate precedes itself")
	}

	m := claimsOf(t, first.Raw)
	m["held_since"] = t0.Add(time.Hour).Unix()
	bad := forge(t, map[string]any{"alg": "EdDSA", "typ": "iacp-cert+jwt"}, m, edSigner(t, seedKey(t, seedAuthority)))
	if _, err := f.verifier.Certificate(bad, f.agent, agentID); err == nil || !strings.Contains(err.Error(), "held_since") {
		t.Fatalf("held_since after iat: %v; want a refusal naming it", err)
	}
}
