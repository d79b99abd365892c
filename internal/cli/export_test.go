package cli

import (
	"io"
	"testing"

	"github.com/iacp-node/iacp-node/sim"
)

// UseTestBubble has `sim --virtual` run in a synctest bubble of t for the rest of the test: a
// test binary cannot host the test of its own that the command hosts in the binary.
func UseTestBubble(t *testing.T) {
	prev := virtualHost
	virtualHost = func(_ io.Writer, run func(sim.Bubble) error) error { return run(bubbleOf(t)) }
	t.Cleanup(func() { virtualHost = prev })
}
