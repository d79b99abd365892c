package cli

import (
	"io"
	"testing"

	"github.com/iacp-node/iacp-node/sim"
)

// UseTestBubble has `sim --virtual` run in a synctest bubble of t for the rest of the test (a
// test binary cannot host the test of its own that the command hosts in the binary), and a
// run that will not end panic rather than end the test binary.
func UseTestBubble(t *testing.T) {
	prev, prevStuck := virtualHost, stuckHandler
	virtualHost = func(_ io.Writer, run func(sim.Bubble) error) error { return run(bubbleOf(t)) }
	stuckHandler = func(io.Writer) func(string) { return func(msg string) { panic(msg) } }
	t.Cleanup(func() { virtualHost, stuckHandler = prev, prevStuck })
}
