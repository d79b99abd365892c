package node

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// A log line says what failed: an error attribute is written as its text, whether the line
// or the logger carries it, where a handler that encodes values by reflection would write {}.
func TestErrorsAsText_WritesTheErrorsText(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(errorsAsText{slog.NewJSONHandler(&buf, nil)})
	joined := errors.Join(errors.New("put /iacp-agent/a: failed to find any peer in table"), fmt.Errorf("put /iacp-peer/p: %w", errors.New("no route")))
	log.With("cause", errors.New("dial backoff")).Warn("publishing failed", "err", joined, "attempt", 2)
	line := buf.String()
	for _, want := range []string{
		`"err":"put /iacp-agent/a: failed to find any peer in table\nput /iacp-peer/p: no route"`,
		`"cause":"dial backoff"`,
		`"attempt":2`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the line %s\nlacks %s", line, want)
		}
	}
}
