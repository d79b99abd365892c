package sim

import (
	"log/slog"
	"os"
	"testing"
)

// testLogger shows node logs at warn and above when SIM_LOG is set, else discards them.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	if os.Getenv("SIM_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
