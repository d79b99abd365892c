package cli

import (
	"fmt"
	"io"
	"os"
	"testing"
	"testing/synctest"

	"github.com/iacp-node/iacp-node/sim"
)

// A run in virtual time needs a testing/synctest bubble, and synctest.Test needs a
// *testing.T: the command hosts one test of its own through testing.Main, runs the scenario
// in it, and exits with the code its outcome gives (docs/sim.md, "Virtual time").

// virtualHost runs run with a bubble and returns what run returned. In the binary it hosts a
// test of its own and exits the process with run's exit code (printing its error as Main
// does): it does not return. A test binary cannot host a second testing.Main; its tests give
// their own bubble (export_test.go).
var virtualHost = func(stderr io.Writer, run func(sim.Bubble) error) error {
	hostTest(func(t *testing.T) {
		os.Exit(exitCode(run(bubbleOf(t)), stderr))
	})
	return nil // not reached: hostTest exits
}

// bubbleOf is the bubble of test t.
func bubbleOf(t *testing.T) sim.Bubble {
	return func(f func(*testing.T)) { synctest.Test(t, f) }
}

// hostTest runs body as the one test of this process, through testing.Main, which parses the
// process's arguments as test flags: they are set aside first (the command has read its own).
// body ends the process; if it returns, testing.Main ends it with the test's outcome.
func hostTest(body func(t *testing.T)) {
	if testing.Testing() {
		panic("cli: hostTest in a test binary: give the test's own bubble (export_test.go)")
	}
	os.Args = os.Args[:1]
	testing.Main(func(_, _ string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "VirtualSimulation", F: body}}, nil, nil)
}

// stuckHandler is what a virtual run that will not end (frozen, or not ending once stopped)
// does on the command line (stuckExit); tests panic instead (export_test.go).
var stuckHandler = stuckExit

// stuckExit says so on stderr, and ends the process.
func stuckExit(stderr io.Writer) func(msg string) {
	return func(msg string) {
		fmt.Fprintln(stderr, "iacp-node:", msg)
		os.Exit(1)
	}
}
