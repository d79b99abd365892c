package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestInit_WritesKeyAndCommentedConfigThatLoads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	out, errOut, code := runCLI(t, "init", "--data-dir", dir, "--agent-id", "acme:eu1:planner", "--capabilities", "tool:terminal,model:llama3")
	if code != 0 {
		t.Fatalf("init: %d %s", code, errOut)
	}
	if !strings.Contains(out, "acme:eu1:planner") || !strings.Contains(out, "12D3KooW") {
		t.Fatalf("init output: %s", out)
	}
	for _, f := range []string{"identity.key", "config.yaml"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v mode %v, want 0600", f, err, st.Mode().Perm())
		}
	}
	cfg, found, err := loadConfig(filepath.Join(dir, "config.yaml"))
	if err != nil || !found {
		t.Fatalf("the written config does not load: %v", err)
	}
	if cfg.AgentID != "acme:eu1:planner" || len(cfg.Manifest.Models) != 1 || cfg.HeartbeatInterval != 30*time.Second {
		t.Fatalf("config round trip: %+v", cfg)
	}
	if _, _, code := runCLI(t, "init", "--data-dir", dir); code == 0 {
		t.Fatal("a second init without --force must refuse to rewrite the config")
	}
	out, _, code = runCLI(t, "id", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "acme:eu1:planner") {
		t.Fatalf("id: %d %s", code, out)
	}
}

func TestID_WithoutKeySaysHowToCreateOne(t *testing.T) {
	_, errOut, code := runCLI(t, "id", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errOut, "iacp-node init") {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
}

// run prints its peer id and listen multiaddrs, takes settings from the environment, and
// stops cleanly when its context ends (as on SIGINT).
func TestRun_PrintsIdentityAndStopsCleanly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	if _, e, code := runCLI(t, "init", "--data-dir", dir, "--agent-id", "acme:eu1:runner"); code != 0 {
		t.Fatal(e)
	}
	t.Setenv("IACP_AGENT_ID", "acme:eu1:from-env")
	var out syncBuffer
	root := NewRoot(strings.NewReader(""), &out, &out)
	root.SetArgs([]string{"run", "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--nat=false", "--api", "127.0.0.1:0", "--log-level", "error"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "listen    /ip4/127.0.0.1/tcp/") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("run printed no listen address: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "acme:eu1:from-env") {
		t.Fatalf("IACP_AGENT_ID did not override the config: %s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
}

// The config init writes says "every setting is shown at its default" and left out
// durable, retry_min, retry_max, audit and audit_payloads. Every key of node.Config is in the
// file init writes (now rendered from node.Config: configfile.go), and the file loads back to
// the defaults.
func TestInit_ConfigShowsEverySettingAtItsDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	if _, e, code := runCLI(t, "init", "--data-dir", dir, "--agent-id", "acme:eu1:planner"); code != 0 {
		t.Fatal(e)
	}
	path := filepath.Join(dir, "config.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]any
	if err := yaml.Unmarshal(raw, &written); err != nil {
		t.Fatal(err)
	}
	ct := reflect.TypeOf(node.Config{})
	for i := 0; i < ct.NumField(); i++ {
		key, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		if key == "-" || key == "" || key == "data_dir" { // the data directory is where the file lives
			continue
		}
		if _, ok := written[key]; !ok {
			t.Errorf("config.yaml has no %q (node.Config.%s)", key, ct.Field(i).Name)
		}
	}
	got, _, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := node.DefaultConfig()
	want.AgentID = "acme:eu1:planner"
	// init founds a mesh by default: the only settings not at their default say so.
	a, err := authority.Load(filepath.Join(dir, node.AuthorityKeyFile))
	if err != nil {
		t.Fatalf("init founded no mesh: %v", err)
	}
	want.Trust, want.Authority = node.TrustAuthority, a.ID()
	got.DataDir, want.DataDir = "", ""
	g, _ := yaml.Marshal(got) // empty and nil lists are the same setting
	w, _ := yaml.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("config.yaml does not load back to the defaults:\n got %s\nwant %s", g, w)
	}
}

// run refuses to serve the local API off loopback, saying how to allow it, unless
// --api-allow-remote (env IACP_API_ALLOW_REMOTE) is given. Nothing listens on the refused
// address; the allowed case, which would, is tested in package api on 127.0.0.1.
func TestRun_APIOffLoopbackNeedsAllowRemote(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	if _, e, code := runCLI(t, "init", "--data-dir", dir, "--agent-id", "acme:eu1:remote"); code != 0 {
		t.Fatal(e)
	}
	_, errOut, code := runCLI(t, "run", "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--nat=false",
		"--api", "0.0.0.0:0", "--log-level", "error")
	if code == 0 || !strings.Contains(errOut, "--api-allow-remote") || !strings.Contains(errOut, "IACP_API_ALLOW_REMOTE=true") ||
		!strings.Contains(errOut, "in clear") {
		t.Fatalf("run --api 0.0.0.0:0: exit %d, stderr %q; want a refusal that says how to allow it", code, errOut)
	}
	t.Setenv("IACP_API_ALLOW_REMOTE", "true")
	cmd := newRunCmd()
	if err := applyEnv(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	if on, err := cmd.Flags().GetBool("api-allow-remote"); err != nil || !on {
		t.Fatalf("IACP_API_ALLOW_REMOTE=true did not set --api-allow-remote: %v %v", on, err)
	}
}

// `run --capabilities code-review` started and `discover --tool code-review` found
// nothing for a minute, which read as the bare name being dropped. A bare name is a tool, and
// init and run say what they understood; an unknown kind is refused with the accepted forms.
func TestCapabilities_BareNameIsAToolAndIsShown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	out, e, code := runCLI(t, "init", "--data-dir", dir, "--agent-id", "acme:eu1:reviewer", "--capabilities", "code-review,model:llama3")
	if code != 0 {
		t.Fatal(e)
	}
	if !strings.Contains(out, "capabilities tool:code-review model:llama3") {
		t.Fatalf("init did not say how it read the capabilities:\n%s", out)
	}
	cfg, _, err := loadConfig(filepath.Join(dir, "config.yaml"))
	if err != nil || len(cfg.Manifest.Tools) != 1 || cfg.Manifest.Tools[0] != "code-review" {
		t.Fatalf("the bare name is not a tool in the config: %+v %v", cfg.Manifest, err)
	}
	_, e, code = runCLI(t, "init", "--data-dir", dir, "--force", "--capabilities", "skill:cooking")
	if code == 0 || !strings.Contains(e, "tool, model or domain") {
		t.Fatalf("an unknown kind: code %d, %s", code, e)
	}
}

// run on a data directory that chose no trust mode (no init) refuses, naming the three ways
// to choose, instead of running open; after init it runs.
func TestRun_RefusesADataDirectoryThatChoseNoTrust(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh")
	_, errOut, code := runCLI(t, "run", "--data-dir", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--nat=false",
		"--api", "127.0.0.1:0", "--log-level", "error")
	for _, want := range []string{"belongs to no mesh", "init --data-dir " + dir, "--join TOKEN", "--open"} {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Fatalf("run on a fresh directory: exit %d, stderr %q; want a refusal naming %q", code, errOut, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "authority.key")); err == nil {
		t.Fatal("the refused run founded a mesh anyway")
	}
}
