package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/cmd/iacp-node/internal/cli"
)

// `iacp-node sim` runs a scenario end to end (in virtual time): progress on stderr, the table
// on stdout, the JSON report and both profiles written, exit 0 when every expectation held.
func TestSim_RunsAScenarioAndWritesReports(t *testing.T) {
	cli.UseTestBubble(t)
	dir := t.TempDir()
	js, cpu, mem := filepath.Join(dir, "r.json"), filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	code, stdout, stderr := run(t, "", "sim", "--virtual", "--scenario", "smoke", "--nodes", "3", "--json", js,
		"--cpuprofile", cpu, "--memprofile", mem)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "sim smoke: 3 nodes") || !strings.Contains(stdout, "PASSED") {
		t.Fatalf("no progress or summary:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	var rep struct {
		Passed bool `json:"passed"`
		Nodes  int  `json:"nodes"`
	}
	raw, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(raw, &rep) != nil || !rep.Passed || rep.Nodes != 3 {
		t.Fatalf("report %s: %v %+v", js, err, rep)
	}
	for _, p := range []string{cpu, mem} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("profile %s not written: %v", p, err)
		}
	}
}

// Bad input is refused with a message that names it, before any node starts.
func TestSim_RefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--scenario", "no-such-scenario"}, "--list"},
		{[]string{"sim", "--log-level", "loud"}, "--log-level"},
		{[]string{"sim", "--cpuprofile", "/nonexistent-dir/x"}, "--cpuprofile"},
		{[]string{"sim", "--profile-step", "converge"}, "give --cpuprofile FILE or --trace-stall FILE too"},
		{[]string{"sim", "--profile-step", "no-such-step", "--cpuprofile", filepath.Join(t.TempDir(), "p")}, `no step named "no-such-step"`},
		{[]string{"sim", "--profile-step", "converge", "--cpuprofile", filepath.Join(t.TempDir(), "p"), "--sizes", "2,3"}, "--profile-step"},
		{[]string{"sim", "--repeat", "3"}, "--repeat goes with --sizes"},
		{[]string{"sim", "--stall-threshold", "1s"}, "--stall-threshold goes with --trace-stall"},
		{[]string{"sim", "--stall-threshold", "500ms"}, "--stall-threshold goes with --trace-stall"},
		{[]string{"sim", "--trace-stall", filepath.Join(t.TempDir(), "t"), "--stall-threshold", "-1s"}, "--stall-threshold -1s"},
		{[]string{"sim", "--trace-stall", filepath.Join(t.TempDir(), "t"), "--sizes", "2,3"}, "--stall-threshold follow one run"},
		{[]string{"sim", "--stall-threshold", "1s", "--sizes", "2,3"}, "--stall-threshold follow one run"},
		{[]string{"sim", "--sizes", "2,3", "--repeat", "0"}, "--repeat 0"},
		{[]string{"sim", "--sizes", "2,3", "--repeat", "10"}, "--repeat 10"},
	} {
		code, _, stderr := run(t, "", c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure naming %q", c.args, code, stderr, c.want)
		}
	}
}

// --profile-step narrows --cpuprofile to one step: the profile is written, and the run is
// otherwise the same.
func TestSim_ProfilesOneStep(t *testing.T) {
	cli.UseTestBubble(t)
	cpu := filepath.Join(t.TempDir(), "converge.pprof")
	code, stdout, stderr := run(t, "", "sim", "--virtual", "--scenario", "smoke", "--nodes", "3", "--cpuprofile", cpu, "--profile-step", "converge")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if st, err := os.Stat(cpu); err != nil || st.Size() == 0 {
		t.Fatalf("profile of the converge step not written: %v", err)
	}
}

// --trace-stall writes the execution trace of the seconds before the first stall: with a
// threshold every timer reaches, the first tick of the run's lag monitor.
func TestSim_TracesAStall(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "stall.trace")
	code, stdout, stderr := run(t, "", "sim", "--scenario", "smoke", "--nodes", "3", "--trace-stall", trace, "--stall-threshold", "1ns")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(trace)
	if err != nil || !strings.HasPrefix(string(raw), "go 1.") || !strings.Contains(stderr, "stall: the simulator's timer fired") {
		t.Fatalf("trace %s: %v, %d bytes; stderr:\n%s", trace, err, len(raw), stderr)
	}
}

// `sim --virtual` runs in virtual time (in a test, in the test's own bubble: the binary hosts
// one of its own, e2e/sim_test.go); what needs the real clock, or a virtual run, is refused
// with a message that names it.
func TestSim_VirtualTime(t *testing.T) {
	cli.UseTestBubble(t)
	js := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := run(t, "", "sim", "--virtual", "--scenario", "smoke", "--nodes", "3", "--json", js, "--cost-model=false")
	if code != 0 || !strings.Contains(stdout, "CPU costs no virtual time") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, _ := os.ReadFile(js)
	if !strings.Contains(string(raw), `"clock": "virtual"`) {
		t.Fatalf("the report does not say virtual:\n%.400s", raw)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--cost-model=false"}, "go with a run in virtual time"},
		{[]string{"sim", "--wall-limit", "1m"}, "go with a run in virtual time"},
		{[]string{"sim", "--virtual", "--wall-limit", "-1s"}, "--wall-limit -1s"},
		{[]string{"sim", "--virtual", "--scenario", "loopback"}, "needs transport mocknet"},
		{[]string{"sim", "--virtual", "--trace-stall", filepath.Join(t.TempDir(), "t")}, "a run in virtual time has no stall"},
		{[]string{"sim", "--compare", filepath.Join(t.TempDir(), "none.json")}, "--compare"},
		{[]string{"sim", "--compare", js + "x"}, "--compare"},
	} {
		code, _, stderr := run(t, "", c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure naming %q", c.args, code, stderr, c.want)
		}
	}
}
