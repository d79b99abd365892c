package sim

import (
	"context"
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

// testCluster returns the cluster of sc, closed when the test ends, with the nodes of slots
// start running.
func testCluster(t *testing.T, sc *Scenario, start ...int) *cluster {
	t.Helper()
	c, err := newCluster(sc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, i := range start {
		if err := c.startNode(context.Background(), i); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
