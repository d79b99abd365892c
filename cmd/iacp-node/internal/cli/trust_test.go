package cli_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
)

// startFromDir runs the node of a data directory that init wrote, on a loopback port, with
// its local API, as `iacp-node run` would.
func startFromDir(t *testing.T, dir string) *node.Node {
	t.Helper()
	cfg := readConfig(t, dir)
	cfg.DataDir = dir
	cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.Discovery, cfg.Gossip, cfg.NAT, cfg.MDNS = false, false, false, false
	nd, err := node.New(node.WithConfig(cfg), node.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(nd, api.WithListen("127.0.0.1:0"), api.WithDataDir(dir), api.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); nd.Close() })
	return nd
}

// The secure path is the short path: a plain init founds a mesh, iacp-node invite invites,
// init --join joins. The joined node starts under the authority with its certificate, and a
// used invitation is refused. init --force keeps a joined node in its mesh.
func TestTrustCommands_FoundInviteJoin(t *testing.T) {
	founder, joiner := t.TempDir(), t.TempDir()
	code, out, errOut := runIn(t, "", "init", "--data-dir", founder, "--agent-id", "acme:h:alice")
	if code != 0 || !strings.Contains(out, "trust     authority") || !strings.Contains(out, "founded here") ||
		!strings.Contains(out, "iacp-node invite --data-dir "+founder) {
		t.Fatalf("init: exit %d, %s %s", code, out, errOut)
	}
	if st, err := os.Stat(filepath.Join(founder, node.AuthorityKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("authority key: %v %v", st, err)
	}
	alice := startFromDir(t, founder)
	if alice.Trust().Mode() != node.TrustAuthority {
		t.Fatalf("the founder runs in %s mode", alice.Trust().Mode())
	}

	code, out, errOut = runIn(t, "", "invite", "--data-dir", founder, "--agent", "acme:h:bob", "-o", "json")
	var inv api.InviteDoc
	if code != 0 || json.Unmarshal([]byte(out), &inv) != nil || !strings.HasPrefix(inv.Token, "iacp-invite-v1.") {
		t.Fatalf("invite: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runIn(t, "", "init", "--data-dir", joiner, "--join", inv.Token)
	if code != 0 || !strings.Contains(out, "acme:h:bob") || !strings.Contains(out, "joined") {
		t.Fatalf("init --join: exit %d, %s %s", code, out, errOut)
	}
	bob := startFromDir(t, joiner)
	if bob.Trust().Mode() != node.TrustAuthority || bob.AgentID() != "acme:h:bob" {
		t.Fatalf("the joined node runs %s as %s", bob.Trust().Mode(), bob.AgentID())
	}
	again := t.TempDir()
	if code, _, errOut := runIn(t, "", "init", "--data-dir", again, "--join", inv.Token); code == 0 || !strings.Contains(errOut, "refused") {
		t.Fatalf("a used invitation: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "init", "--data-dir", t.TempDir(), "--join", "iacp-invite-v1.garbage"); code == 0 || !strings.Contains(errOut, "--join") {
		t.Fatalf("a garbage invitation: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "invite", "--data-dir", joiner); code == 0 || !strings.Contains(errOut, "not the mesh authority") {
		t.Fatalf("invite on a node that is not the authority: exit %d, %s", code, errOut)
	}

	// Rewriting the joined node's config keeps it in its mesh; founding over it is refused
	// (it would leave the mesh), and so is joining from the founder's directory.
	code, out, errOut = runIn(t, "", "init", "--data-dir", joiner, "--force")
	if code != 0 || !strings.Contains(out, "authority "+alice.Config().Authority+" (kept") {
		t.Fatalf("init --force on a joined node: exit %d, %s %s", code, out, errOut)
	}
	if cfg := readConfig(t, joiner); cfg.Trust != node.TrustAuthority || cfg.Authority != alice.Config().Authority ||
		len(cfg.Bootstrap) == 0 || cfg.AgentID != "acme:h:bob" || cfg.AuthorityNode != alice.ID().String() {
		t.Fatalf("init --force lost the mesh: trust %q authority %q (node %q) bootstrap %v agent %s",
			cfg.Trust, cfg.Authority, cfg.AuthorityNode, cfg.Bootstrap, cfg.AgentID)
	}
	if code, _, errOut := runIn(t, "", "init", "--data-dir", joiner, "--force", "--agent-id", "acme:h:notbob"); code == 0 || !strings.Contains(errOut, "join again") {
		t.Fatalf("init --force with an agent id the certificate does not name: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "init", "--data-dir", joiner, "--force", "--found"); code == 0 || !strings.Contains(errOut, "remove") {
		t.Fatalf("init --found over a joined node: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "init", "--data-dir", founder, "--force", "--join", inv.Token); code == 0 || !strings.Contains(errOut, node.AuthorityKeyFile) {
		t.Fatalf("init --join in the founder's directory: exit %d, %s", code, errOut)
	}
	// The founder renamed: its own certificate (for acme:h:alice) goes, the key stays, and
	// the node certifies itself again at its next start.
	code, out, errOut = runIn(t, "", "init", "--data-dir", founder, "--force", "--agent-id", "acme:h:alice2")
	if code != 0 || !strings.Contains(out, alice.Config().Authority) {
		t.Fatalf("init --force on the founder: exit %d, %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(founder, node.CertFile)); err == nil {
		t.Fatal("the founder kept a certificate for the agent id it no longer has")
	}
}

// init founds a mesh unless told otherwise: --found says the same explicitly, --open writes a
// lab node (trust: open, no authority), and two trust flags at once are refused, naming both.
func TestInit_FoundsByDefaultOpenOnRequest(t *testing.T) {
	for _, flags := range [][]string{nil, {"--found"}} {
		dir := t.TempDir()
		code, out, errOut := runIn(t, "", append([]string{"init", "--data-dir", dir, "--agent-id", "acme:h:alice"}, flags...)...)
		if code != 0 {
			t.Fatalf("init %v: exit %d, %s", flags, code, errOut)
		}
		a, err := authority.Load(filepath.Join(dir, node.AuthorityKeyFile))
		if err != nil {
			t.Fatalf("init %v founded no mesh: %v", flags, err)
		}
		if cfg := readConfig(t, dir); cfg.Trust != node.TrustAuthority || cfg.Authority != a.ID() || !strings.Contains(out, a.ID()) {
			t.Fatalf("init %v: trust %q authority %q (key %s)\n%s", flags, cfg.Trust, cfg.Authority, a.ID(), out)
		}
	}
	dir := t.TempDir()
	code, out, errOut := runIn(t, "", "init", "--data-dir", dir, "--agent-id", "acme:h:lab", "--open")
	if code != 0 || !strings.Contains(out, "trust     open") {
		t.Fatalf("init --open: exit %d, %s %s", code, out, errOut)
	}
	if cfg := readConfig(t, dir); cfg.Trust != node.TrustOpen || cfg.Authority != "" {
		t.Fatalf("init --open: trust %q authority %q", cfg.Trust, cfg.Authority)
	}
	if _, err := os.Stat(filepath.Join(dir, node.AuthorityKeyFile)); err == nil {
		t.Fatal("init --open created a mesh authority key")
	}
	if lab := startFromDir(t, dir); lab.Trust().Mode() != node.TrustOpen {
		t.Fatalf("the lab node runs in %s mode", lab.Trust().Mode())
	}
	for _, flags := range [][]string{{"--open", "--found"}, {"--open", "--join", "iacp-invite-v1.x"}, {"--found", "--join", "iacp-invite-v1.x"}} {
		fresh := t.TempDir()
		code, _, errOut := runIn(t, "", append([]string{"init", "--data-dir", fresh}, flags...)...)
		if code == 0 || !strings.Contains(errOut, "choose one") || !strings.Contains(errOut, flags[0]) || !strings.Contains(errOut, flags[1]) {
			t.Fatalf("init %v: exit %d, %s", flags, code, errOut)
		}
		if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
			t.Fatalf("init %v wrote %d files before refusing", flags, len(entries))
		}
	}
}

// readConfig loads the config.yaml of a data directory.
func readConfig(t *testing.T, dir string) node.Config {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
