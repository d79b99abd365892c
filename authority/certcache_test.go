package authority

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Verifiers that share a CertCache check a certificate's signature once: the second finds it
// verified, and gets the very Certificate the first one made. Everything else is still each
// Verifier's own: its revocations, its clock, its mesh, and who it asks about. A certificate
// that failed is never kept.
func TestCertCache_OneSignatureCheckForEveryVerifierThatSharesIt(t *testing.T) {
	cache := NewCertCache(8)
	f := newFixture(t, WithCertCache(cache))
	c := f.issue(t)
	second := NewVerifier(f.auth.PublicKey(), WithVerifierClock(f.clock.now), WithCertCache(cache))
	first, err := f.verifier.Certificate(c.Raw, f.agent, agentID)
	if err != nil {
		t.Fatal(err)
	}
	copied := strings.Clone(c.Raw) // as each node decodes its own copy from the wire
	hit, err := second.Certificate(copied, f.agent, agentID)
	if err != nil {
		t.Fatal(err)
	}
	if cache.Hits() != 1 || cache.Len() != 1 {
		t.Fatalf("after two verifiers: %d hits, %d kept; want 1 and 1", cache.Hits(), cache.Len())
	}
	if hit != first || unsafe.StringData(hit.Raw) != unsafe.StringData(first.Raw) {
		t.Fatal("the second verifier made a certificate of its own rather than share the first one's")
	}

	refused := func(v *Verifier, raw string, check Check) {
		t.Helper()
		if _, err := v.Certificate(raw, f.agent, agentID); !isCheck(err, check) {
			t.Fatalf("want a refusal by %v, got %v", check, err)
		}
	}
	crl, err := f.auth.RevocationList(1, []Revoked{{ID: c.ID, AgentID: c.AgentID, Expires: c.Expires}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.ApplyRevocations(crl); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Certificate(c.Raw, f.agent, "acme:host1:other"); !isCheck(err, CheckSubject) {
		t.Fatalf("a hit asked for another agent: want a refusal by %v, got %v", CheckSubject, err)
	}
	if _, err := second.Certificate(c.Raw, peerOfKey(t, seedKey(t, seedOther)), agentID); !isCheck(err, CheckConfirmation) {
		t.Fatalf("a hit asked for another peer: want a refusal by %v, got %v", CheckConfirmation, err)
	}
	refused(second, c.Raw, CheckRevoked)
	if _, err := f.verifier.Certificate(c.Raw, f.agent, agentID); err != nil {
		t.Fatalf("a revocation applied by another verifier reached this one: %v", err)
	}
	late := NewVerifier(f.auth.PublicKey(), WithVerifierClock(func() time.Time { return c.Expires.Add(time.Hour) }), WithCertCache(cache))
	refused(late, c.Raw, CheckExpiry)
	foreign := NewVerifier(seedKey(t, seedOther).GetPublic(), WithCertCache(cache))
	refused(foreign, c.Raw, CheckSignature)

	parts := strings.Split(c.Raw, ".")
	changed := parts[0] + "." + b64.EncodeToString([]byte(`{"sub":"acme:host1:builder"}`)) + "." + parts[2]
	refused(f.verifier, changed, CheckSignature)
	refused(second, changed, CheckSignature)
	if cache.Len() != 1 {
		t.Fatalf("%d certificates kept; a refused one was among them", cache.Len())
	}
}

// isCheck reports whether err is a *CertError of check.
func isCheck(err error, check Check) bool {
	var ce *CertError
	return errors.As(err, &ce) && ce.Check == check
}

// A nil cache is no cache: every check verifies the signature.
func TestCertCache_NilIsNone(t *testing.T) {
	var c *CertCache
	if NewCertCache(0) != nil || c.Hits() != 0 || c.Len() != 0 {
		t.Fatal("a cache of size 0 is not nil, or a nil cache counts something")
	}
	f := newFixture(t, WithCertCache(nil))
	if _, err := f.verifier.Certificate(f.issue(t).Raw, f.agent, agentID); err != nil {
		t.Fatal(err)
	}
}
