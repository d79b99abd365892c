package authority

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// The fuzz targets check that no input panics, that every refusal carries an IACP code, and
// that whatever is accepted is consistent with what the caller asked for.

func FuzzDecodeInvite(f *testing.F) {
	fx := newFixture(f)
	f.Add(testInvite(fx).Encode())
	inv := testInvite(fx)
	inv.AgentID = ""
	f.Add(inv.Encode())
	f.Add(InvitePrefix)
	f.Add(InvitePrefix + "e30")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := DecodeInvite(s)
		if err != nil {
			if protocol.CodeOf(err) != protocol.CodePayloadInvalid {
				t.Fatalf("refusal without PAYLOAD_INVALID: %v", err)
			}
			return
		}
		again, err := DecodeInvite(inv.Encode())
		if err != nil || !reflect.DeepEqual(again, inv) {
			t.Fatalf("re-encoding changed the invitation: %+v %v", again, err)
		}
	})
}

func FuzzVerifierCertificate(f *testing.F) {
	fx := newFixture(f)
	c, err := fx.auth.Issue(CertRequest{AgentID: agentID, Peer: fx.agent, Capabilities: []string{"build"}})
	if err != nil {
		f.Fatal(err)
	}
	tok, _ := fx.auth.IssueToken(tokenRequest)
	f.Add(c.Raw)
	f.Add(tok.Raw)
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("..")
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := fx.verifier.Certificate(raw, fx.agent, agentID)
		if err != nil {
			var ce *CertError
			if !errors.As(err, &ce) || protocol.CodeOf(err) != protocol.CodeIdentityInvalid {
				t.Fatalf("refusal without a CertError and IDENTITY_INVALID: %v", err)
			}
			return
		}
		if got.AgentID != agentID || got.Peer != fx.agent || got.Issuer != fx.auth.ID() || got.Raw != raw {
			t.Fatalf("accepted a certificate for something else: %+v", got)
		}
	})
}

func FuzzVerifierToken(f *testing.F) {
	fx := newFixture(f)
	tok, err := fx.auth.IssueToken(tokenRequest)
	if err != nil {
		f.Fatal(err)
	}
	c, _ := fx.auth.Issue(CertRequest{AgentID: agentID, Peer: fx.agent})
	f.Add(tok.Raw, tokenAudience, "read:datasets")
	f.Add(tok.Raw, "", "")
	f.Add(c.Raw, agentID, "")
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.", tokenAudience, "")
	f.Fuzz(func(t *testing.T, raw, target, required string) {
		var req []string
		if required != "" {
			req = []string{required}
		}
		got, err := fx.verifier.Token(raw, target, req)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) || re.Rule < RuleSignature || re.Rule > RuleIssuer || protocol.CodeOf(err) != re.Rule.Code() {
				t.Fatalf("refusal without a rule and its code: %v", err)
			}
			return
		}
		if got.Audience != target || got.Issuer != fx.auth.ID() || got.Subject == "" {
			t.Fatalf("accepted a token for something else: %+v", got)
		}
	})
}

func FuzzApplyRevocations(f *testing.F) {
	fx := newFixture(f)
	crl, err := fx.auth.RevocationList(7, []Revoked{{ID: "a", AgentID: agentID, Expires: t0}, {ID: "b"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(crl)
	f.Add("eyJhbGciOiJFZERTQSIsInR5cCI6ImlhY3AtY3JsK2p3dCJ9.e30.")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		v := NewVerifier(fx.auth.PublicKey(), WithVerifierClock(fx.clock.now))
		changed, err := v.ApplyRevocations(raw)
		if err != nil {
			if changed || protocol.CodeOf(err) != protocol.CodeIdentityInvalid || v.RevocationSeq() != 0 {
				t.Fatalf("refusal changed state or lacks IDENTITY_INVALID: %v", err)
			}
			return
		}
		if changed != (v.RevocationSeq() > 0) || (changed && v.CurrentRevocations() != raw) {
			t.Fatalf("changed=%v seq=%d", changed, v.RevocationSeq())
		}
		if again, err := v.ApplyRevocations(raw); again || err != nil {
			t.Fatalf("the same list applied twice: %v %v", again, err)
		}
	})
}

// FuzzOpenRegistry: any registry file opens or is refused with an error, never a panic; what
// opens lists no entry twice and can be written back.
func FuzzOpenRegistry(f *testing.F) {
	f.Add([]byte(`{"version":1,"crl_seq":2,"issued":[{"id":"a","agent_id":"acme:h:x","peer":"","issued_at":"2026-01-01T00:00:00Z","expires":"2999-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"issued":[{"id":"a"},{"id":"a"}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "registry.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := OpenRegistry(path, func() time.Time { return t0 })
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range r.List() {
			if seen[e.ID] {
				t.Fatalf("entry %q listed twice", e.ID)
			}
			seen[e.ID] = true
		}
		r.mu.Lock()
		err = r.commit(r.pruned(t0), r.seq)
		r.mu.Unlock()
		if err != nil {
			t.Fatalf("an opened registry does not write back: %v", err)
		}
	})
}
