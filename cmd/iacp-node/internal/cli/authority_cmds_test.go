package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/api"
)

// The mesh authority's commands end to end: invite --grant puts permissions in the joined
// agent's certificate; that agent obtains a token for them (and no others) from the
// authority, over the mesh; the authority lists the certificates and revokes them.
func TestAuthorityCommands_GrantTokenCertsRevoke(t *testing.T) {
	founder, joiner := t.TempDir(), t.TempDir()
	if code, out, errOut := runIn(t, "", "init", "--data-dir", founder, "--agent-id", "acme:h:alice", "--found"); code != 0 {
		t.Fatalf("init --found: exit %d, %s %s", code, out, errOut)
	}
	startFromDir(t, founder)
	code, out, errOut := runIn(t, "", "invite", "--data-dir", founder, "--agent", "acme:h:bob", "--grant", "deploy", "-o", "json")
	var inv api.InviteDoc
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || len(inv.Grants) != 1 {
		t.Fatalf("invite --grant: exit %d, %s %s", code, out, errOut)
	}
	if code, out, errOut := runIn(t, "", "init", "--data-dir", joiner, "--join", inv.Token); code != 0 {
		t.Fatalf("init --join: exit %d, %s %s", code, out, errOut)
	}
	startFromDir(t, joiner)

	code, out, errOut = runIn(t, "", "token", "acme:h:alice", "--cap", "deploy", "--ttl", "10m", "--data-dir", joiner, "-o", "json")
	var tok api.TokenDoc
	if code != 0 || json.Unmarshal([]byte(out), &tok) != nil || strings.Count(tok.Token, ".") != 2 {
		t.Fatalf("token: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "token", "acme:h:alice", "--cap", "admin", "--data-dir", joiner); code == 0 || !strings.Contains(errOut, "not granted") {
		t.Fatalf("a token for a capability the certificate does not grant: exit %d, %s", code, errOut)
	}

	code, out, errOut = runIn(t, "", "trust", "certs", "--data-dir", founder)
	if code != 0 || !strings.Contains(out, "acme:h:bob") || !strings.Contains(out, "deploy") || !strings.Contains(out, "acme:h:alice") {
		t.Fatalf("trust certs: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "revoke", "acme:h:bob", "--data-dir", joiner); code == 0 || !strings.Contains(errOut, "not the mesh authority") {
		t.Fatalf("revoke on a node that is not the authority: exit %d, %s", code, errOut)
	}
	// One agent id, one holder: an invitation for bob's id is refused while bob holds it, and
	// one that names no id says so.
	if code, _, errOut := runIn(t, "", "invite", "--data-dir", founder, "--agent", "acme:h:bob"); code == 0 || !strings.Contains(errOut, "--replace") {
		t.Fatalf("invite for a held id: exit %d, %s; want a refusal offering --replace", code, errOut)
	}
	if code, out, errOut := runIn(t, "", "invite", "--data-dir", founder); code != 0 || !strings.Contains(out, "names no agent id") {
		t.Fatalf("invite without --agent: exit %d, %s %s; want it to say it names no agent id", code, out, errOut)
	}
	if code, out, errOut := runIn(t, "", "invite", "--data-dir", founder, "--agent", "acme:h:bob", "--replace"); code != 0 || !strings.Contains(out, "replaces acme:h:bob") {
		t.Fatalf("invite --replace: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runIn(t, "", "revoke", "acme:h:bob", "--dry-run", "--data-dir", founder)
	if code != 0 || !strings.Contains(out, "would revoke 1 certificates") || !strings.Contains(out, "acme:h:bob") {
		t.Fatalf("revoke --dry-run: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runIn(t, "", "revoke", "acme:h:bob", "--data-dir", founder)
	if code != 0 || !strings.Contains(out, "revoked 1 certificates") {
		t.Fatalf("revoke: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "revoke", "acme:h:nobody", "--data-dir", founder); code == 0 || !strings.Contains(errOut, "no unexpired certificate") {
		t.Fatalf("revoke an unknown agent: exit %d, %s", code, errOut)
	}
	// the revoked agent can no longer obtain tokens
	if code, _, errOut := runIn(t, "", "token", "acme:h:alice", "--data-dir", joiner); code == 0 || !strings.Contains(errOut, "revoked") {
		t.Fatalf("a token for a revoked agent: exit %d, %s", code, errOut)
	}
}
