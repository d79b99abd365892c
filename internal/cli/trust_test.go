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
	"github.com/iacp-node/iacp-node/node"
)

// startFromDir runs the node of a data directory that init wrote, on a loopback port, with
// its local API, as `iacp-node run` would.
func startFromDir(t *testing.T, dir string) *node.Node {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
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

// The secure path is the short path: found a mesh with init --found, invite with
// iacp-node invite, join with init --join. The joined node starts under the authority with
// its certificate, and a used invitation is refused.
func TestTrustCommands_FoundInviteJoin(t *testing.T) {
	founder, joiner := t.TempDir(), t.TempDir()
	code, out, errOut := runIn(t, "", "init", "--data-dir", founder, "--agent-id", "acme:h:alice", "--found")
	if code != 0 || !strings.Contains(out, "trust     authority") {
		t.Fatalf("init --found: exit %d, %s %s", code, out, errOut)
	}
	if st, err := os.Stat(filepath.Join(founder, node.AuthorityKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("authority key: %v %v", st, err)
	}
	alice := startFromDir(t, founder)
	if alice.TrustMode() != node.TrustAuthority {
		t.Fatalf("the founder runs in %s mode", alice.TrustMode())
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
	if bob.TrustMode() != node.TrustAuthority || bob.AgentID() != "acme:h:bob" {
		t.Fatalf("the joined node runs %s as %s", bob.TrustMode(), bob.AgentID())
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
}
