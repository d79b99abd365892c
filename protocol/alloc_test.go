package protocol_test

import (
	"io"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/protocol"
)

// The request path encodes, signs, verifies and frames every document: each
// allocates only what it hands back, so that a busy node's garbage collector runs as seldom
// as it can. The canonical form that a signature covers and the frame given to the stream are
// scratch bytes, taken from a pool. (A number with a fraction or an exponent costs
// Digest a few small allocations for its exactness check; integers and strings cost none.)
func TestRequestPath_AllocatesOnlyWhatItHandsBack(t *testing.T) {
	m, err := newTestBuilder(t, "acme:host-1:planner").Request("acme:host-2:analyst", protocol.IntentHandoff,
		map[string]any{"task": "summarise", "text": strings.Repeat("lorem ipsum ", 80), "priority": 3,
			"tags": []string{"finance", "q3"}, "options": map[string]any{"language": "en", "max_tokens": 800}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := protocol.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		want   float64
		pooled bool // under the race detector, sync.Pool drops items at random by design
		op     func()
	}{
		{"EncodeJSON: the document, grown once at most", 1, false, func() { _, _ = protocol.EncodeJSON(m) }},
		{"Digest: nothing", 0, true, func() { _, _ = protocol.Digest(m) }},
		{"WriteFrame: nothing", 0, true, func() { _ = protocol.WriteFrame(io.Discard, doc) }},
	} {
		if c.pooled && raceEnabled {
			continue // counted in the ordinary run of make test
		}
		if got := testing.AllocsPerRun(200, c.op); got > c.want {
			t.Errorf("%s: %.1f allocations a call, want at most %.0f", c.name, got, c.want)
		}
	}
}
