package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// simRun runs `iacp-node sim args...` and returns its exit code, stdout and stderr.
func simRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, append([]string{"sim"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// `iacp-node sim --virtual` runs the scenario in virtual time, in the bubble of a test the
// binary hosts itself, and exits with the simulator's own code: 0 when every expectation held
// (the JSON report says which clock it ran on), 3 when one failed. Run again with --compare,
// the same seed gives the same outcome and counts.
func TestSim_VirtualTimeInTheBinary(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "r.json")
	code, stdout, stderr := simRun(t, "--virtual", "--scenario", "smoke", "--nodes", "4", "--json", js)
	if code != 0 || !strings.Contains(stdout, "of virtual time") || strings.Contains(stdout, "PASS\n") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep struct {
		Clock  string `json:"clock"`
		Passed bool   `json:"passed"`
	}
	raw, _ := os.ReadFile(js)
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Clock != "virtual" || !rep.Passed {
		t.Fatalf("report: %v %+v", err, rep)
	}
	code, stdout, stderr = simRun(t, "--virtual", "--scenario", "smoke", "--nodes", "4", "--compare", js)
	if code != 0 || !strings.Contains(stdout, "the same outcome and the same counts") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	failing := filepath.Join(dir, "fail.yaml")
	if err := os.WriteFile(failing, []byte("virtual: true\nnodes: 3\nsteps:\n  - join: {}\n    expect: {nodes_up: 4}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr = simRun(t, "--scenario", failing); code != 3 || !strings.Contains(stderr, "some expectations") {
		t.Fatalf("a failed expectation: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// An interrupt reaches a virtual run through a flag it polls in virtual time: the run stops,
// closes its nodes and the process exits (a context cancelled from outside the bubble would
// kill it instead).
func TestSim_VirtualRunStopsOnInterrupt(t *testing.T) {
	endless := filepath.Join(t.TempDir(), "endless.yaml")
	if err := os.WriteFile(endless, []byte("nodes: 3\nsteps:\n  - join: {}\n  - sleep: {duration: 1000h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, "sim", "--virtual", "--scenario", endless)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(3 * time.Second)
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "interrupted") ||
			!strings.Contains(errb.String(), "context canceled") {
			t.Fatalf("exit %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the run did not stop after the interrupt\nstderr:\n%s", errb.String())
	}
}
