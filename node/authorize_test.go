package node

import (
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/protocol"
)

// tokenMesh is a mesh whose node 1 (alice) is granted "deploy" by its certificate, node 2
// (bob) requires "deploy" for intent notify and trusts the token issuer it returns, and node
// 3 (carol) is granted nothing.
func tokenMesh(t *testing.T) (*mesh, *authority.Authority) {
	t.Helper()
	issuer, err := authority.Generate()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := certifiedMeshGrants(t, 4, []Option{
		WithIntentPolicy(map[string][]string{"notify": {"deploy"}}),
		WithTokenIssuers(issuer.ID()),
	}, map[int][]string{1: {"deploy"}})
	return m, issuer
}

func secured(t *testing.T, b *protocol.Builder, to string, s protocol.Security) *protocol.Message {
	t.Helper()
	m, err := b.Event(to, protocol.IntentNotify, protocol.EventPayload{EventType: "x"}, protocol.WithSecurity(s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustToken(t *testing.T, a *authority.Authority, req authority.TokenRequest) string {
	t.Helper()
	tok, err := a.IssueToken(req)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Raw
}

// The intent policy: notify needs "deploy". Alice's certificate grants it; carol's does not,
// and carol is refused under A2ACP rule 4 until she carries a token that grants it, from an
// issuer bob trusts, for bob, in her name.
func TestAuthorize_TheIntentPolicyIsGrantedByCertificateOrToken(t *testing.T) {
	m, issuer := tokenMesh(t)
	alice, bob, carol := m.nodes[1], m.nodes[2], m.nodes[3]
	bobID, carolID := agentName(2), agentName(3)
	if code, perr := dialRaw(t, alice, bob).refusal(event(t, alice.Builder(), bobID)); code != "" {
		t.Fatalf("alice, granted deploy by her certificate, was refused: %s %v", code, perr)
	}
	code, perr := dialRaw(t, carol, bob).refusal(event(t, carol.Builder(), bobID))
	expectCode(t, code, protocol.CodePermissionDenied)
	if !strings.Contains(perr.Message, "rule 4") || !strings.Contains(perr.Message, "deploy") {
		t.Fatalf("refusal %q does not name rule 4 and the capability", perr.Message)
	}
	tok := mustToken(t, issuer, authority.TokenRequest{Subject: carolID, Audience: bobID, Capabilities: []string{"deploy"}})
	if code, perr := dialRaw(t, carol, bob).refusal(secured(t, carol.Builder(), bobID, protocol.Security{AuthToken: tok})); code != "" {
		t.Fatalf("carol with a good token was refused: %s %v", code, perr)
	}
}

// The five A2ACP rules, each violated alone by a token carol sends to bob, are refused with
// the rule's code and number; and a token issued to another agent is not carol's to use.
func TestAuthorize_TheFiveTokenRulesEachAlone(t *testing.T) {
	m, issuer := tokenMesh(t)
	carol, bob := m.nodes[3], m.nodes[2]
	bobID, carolID := agentName(2), agentName(3)
	stranger, _ := authority.Generate()
	good := authority.TokenRequest{Subject: carolID, Audience: bobID, Capabilities: []string{"deploy"}}
	pastIssuer := func() *authority.Authority {
		t.Helper()
		dir := t.TempDir() + "/issuer.key"
		if err := issuer.Save(dir); err != nil {
			t.Fatal(err)
		}
		a, err := authority.Load(dir, authority.WithClock(func() time.Time { return time.Now().Add(-3 * time.Hour) }))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}()
	tamper := func(raw string) string { // change the signature's last character
		last := raw[len(raw)-2]
		repl := byte('A')
		if last == 'A' {
			repl = 'B'
		}
		return raw[:len(raw)-2] + string(repl) + raw[len(raw)-1:]
	}
	with := func(f func(*authority.TokenRequest)) authority.TokenRequest { r := good; f(&r); return r }
	cases := []struct {
		name  string
		token string
		rule  authority.Rule
	}{
		{"1 signature", tamper(mustToken(t, issuer, good)), authority.RuleSignature},
		{"2 expiration", mustToken(t, pastIssuer, good), authority.RuleExpiration},
		{"3 audience", mustToken(t, issuer, with(func(r *authority.TokenRequest) { r.Audience = agentName(1) })), authority.RuleAudience},
		{"4 capabilities", mustToken(t, issuer, with(func(r *authority.TokenRequest) { r.Capabilities = []string{"read"} })), authority.RuleCapabilities},
		{"5 issuer", mustToken(t, stranger, good), authority.RuleIssuer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, perr := dialRaw(t, carol, bob).refusal(secured(t, carol.Builder(), bobID, protocol.Security{AuthToken: c.token}))
			expectCode(t, code, c.rule.Code())
			if want := "rule " + string(rune('0'+int(c.rule))); !strings.Contains(perr.Message, want) {
				t.Fatalf("refusal %q does not name %s", perr.Message, want)
			}
		})
	}
	alices := mustToken(t, issuer, with(func(r *authority.TokenRequest) { r.Subject = agentName(1) }))
	code, perr := dialRaw(t, carol, bob).refusal(secured(t, carol.Builder(), bobID, protocol.Security{AuthToken: alices}))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if !strings.Contains(perr.Message, "sub") {
		t.Fatalf("refusal %q does not name the token's sub", perr.Message)
	}
}

// ACP v2 security.permissions: what a message lists is required of its sender, granted by its
// certificate or a token.
func TestAuthorize_ACPPermissionsAreCheckedAgainstTheGrants(t *testing.T) {
	m, issuer := tokenMesh(t)
	alice, bob, carol := m.nodes[1], m.nodes[2], m.nodes[3]
	bobID := agentName(2)
	ask := func(from *Node, s protocol.Security) (protocol.Code, *protocol.Error) {
		m, err := from.Builder().Request(bobID, protocol.IntentQuery, map[string]any{}, protocol.WithSecurity(s))
		if err != nil {
			t.Fatal(err)
		}
		return dialRaw(t, from, bob).refusal(m)
	}
	code, perr := ask(alice, protocol.Security{Permissions: []string{"deploy", "admin"}})
	expectCode(t, code, protocol.CodePermissionDenied)
	if !strings.Contains(perr.Message, `"admin"`) || strings.Contains(perr.Message, `"deploy"`) {
		t.Fatalf("refusal %q should name admin alone, which alice lacks", perr.Message)
	}
	tok := mustToken(t, issuer, authority.TokenRequest{Subject: agentName(3), Audience: bobID, Capabilities: []string{"admin"}})
	code, perr = ask(carol, protocol.Security{AuthToken: tok, Permissions: []string{"admin"}})
	if code == protocol.CodePermissionDenied || code == protocol.CodeIdentityInvalid {
		t.Fatalf("carol's token grants admin; refused with %s: %v", code, perr)
	}
	code, _ = ask(carol, protocol.Security{Permissions: []string{"admin"}})
	expectCode(t, code, protocol.CodePermissionDenied)
}

// POST /auth/token, through the node: the authority's node issues a token for this node's
// agent with capabilities its certificate grants, and no others, and for nobody else.
func TestAuthorize_TokensComeFromTheAuthorityWithinTheCertificatesGrants(t *testing.T) {
	m, _ := tokenMesh(t)
	alice, bob, carol := m.nodes[1], m.nodes[2], m.nodes[3]
	bobID := agentName(2)
	tok, err := alice.Trust().Token(testCtx(t), TokenRequest{TargetAgentID: bobID, RequestedCapabilities: []string{"deploy"}, TTL: 600})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Subject != agentName(1) || tok.Audience != bobID || tok.Issuer != alice.cfg.Authority || time.Until(tok.Expires) > 11*time.Minute {
		t.Fatalf("token %+v", tok)
	}
	if code, perr := dialRaw(t, alice, bob).refusal(secured(t, alice.Builder(), bobID, protocol.Security{AuthToken: tok.Raw})); code != "" {
		t.Fatalf("alice's token from the authority was refused: %s %v", code, perr)
	}
	if _, err := carol.Trust().Token(testCtx(t), TokenRequest{TargetAgentID: bobID, RequestedCapabilities: []string{"deploy"}}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("carol, granted nothing, obtained deploy: %v", err)
	}
	if _, err := carol.Trust().Token(testCtx(t), TokenRequest{AgentID: agentName(1), TargetAgentID: bobID}); protocol.CodeOf(err) != protocol.CodePermissionDenied {
		t.Fatalf("carol obtained a token in alice's name: %v", err)
	}
	if tok, err := m.nodes[0].Trust().Token(testCtx(t), TokenRequest{TargetAgentID: bobID}); err != nil || tok.Subject != agentName(0) {
		t.Fatalf("the authority's own node: %v %v", tok, err)
	}
}
