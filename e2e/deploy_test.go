package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd unit of docs/deploy.md is valid as systemd reads it: systemd-analyze verify,
// with the unit's binary path pointed at this build, reports nothing (an unknown key, a
// missing binary or a bad value would be reported).
func TestDeploy_SystemdUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit is not verified here")
	}
	unit, err := os.ReadFile("../deploy/iacp-node.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/iacp-node run --data-dir /var/lib/iacp-node") {
		t.Fatal("the unit no longer starts /usr/local/bin/iacp-node run: update docs/deploy.md and this test")
	}
	path := filepath.Join(t.TempDir(), "iacp-node.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/iacp-node", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The Dockerfile needs no base image (FROM scratch) and copies only what the repository has
// or `make static` builds; that build (the one these tests run) is static (no interpreter, no
// shared library), and runs.
func TestDeploy_DockerfileIsFromScratchOverAStaticBinary(t *testing.T) {
	steps := dockerfile(t, "../deploy/Dockerfile")
	if len(steps) == 0 || steps[0][0] != "FROM" || steps[0][1] != "scratch" {
		t.Fatalf("the Dockerfile must start FROM scratch: %v", steps)
	}
	var entry []string
	for _, s := range steps[1:] {
		switch s[0] {
		case "FROM":
			t.Errorf("a second FROM (%v): the image is one stage, from scratch", s)
		case "RUN":
			t.Errorf("RUN %v: a scratch image has no shell", s[1:])
		case "COPY":
			src := s[len(s)-2]
			if src == "bin/iacp-node-static" {
				continue // built by make static, below
			}
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("COPY %s: not in the repository: %v", src, err)
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.Join(s[1:], " ")), &entry); err != nil {
				t.Errorf("ENTRYPOINT must be a JSON array (no shell to run a string): %v", err)
			}
		}
	}
	if len(entry) != 1 || entry[0] != "/iacp-node" {
		t.Errorf("ENTRYPOINT %q, want [\"/iacp-node\"]", entry)
	}

	// The binary the e2e tests run is built as make static builds it (TestMain).
	if os.Getenv("E2E_BINARY") != "" {
		t.Skip("E2E_BINARY gives another build: its static linking is not checked")
	}
	static := binary
	f, err := elf.Open(static)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the static build has a %v segment: it would need a loader or libraries FROM scratch lacks", p.Type)
		}
	}
	if out, err := exec.Command(static, "version").CombinedOutput(); err != nil {
		t.Fatalf("the static build does not run: %v\n%s", err, out)
	}
}

// dockerfile reads a Dockerfile into its instructions, each split into words, with comments
// dropped and continued lines joined.
func dockerfile(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps [][]string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		words := strings.Fields(cur.String())
		cur.Reset()
		switch op := strings.ToUpper(words[0]); op {
		case "FROM", "COPY", "USER", "ENV", "VOLUME", "EXPOSE", "ENTRYPOINT", "CMD", "WORKDIR", "LABEL", "RUN", "ARG":
			words[0] = op
		default:
			t.Fatalf("%s: unknown instruction %q", path, words[0])
		}
		steps = append(steps, words)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}
