package cli

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/node"
)

// The process's soft memory limit: memory_limit sets it (the default, DefaultMemoryLimit,
// when the config file says nothing), 0 sets none, and GOMEMLIMIT, which the Go runtime read
// at start, wins over both.
func TestMemoryLimit_ConfigSetsItAndGOMEMLIMITWins(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })

	t.Setenv("GOMEMLIMIT", "")
	line := applyMemoryLimit(node.DefaultConfig().MemoryLimit)
	if got := debug.SetMemoryLimit(-1); got != node.DefaultMemoryLimit {
		t.Fatalf("the default memory_limit set a soft limit of %d bytes, not %d", got, node.DefaultMemoryLimit)
	}
	if !strings.Contains(line, "soft limit 384 MiB (memory_limit") {
		t.Fatalf("run's line does not say which limit holds: %q", line)
	}
	applyMemoryLimit(0)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory_limit 0 left a soft limit of %d bytes", got)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30) // what the runtime read from GOMEMLIMIT at start
	line = applyMemoryLimit(200 << 20)
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("memory_limit replaced GOMEMLIMIT's limit: %d bytes", got)
	}
	if !strings.Contains(line, "1GiB (GOMEMLIMIT") {
		t.Fatalf("run's line does not say that GOMEMLIMIT holds: %q", line)
	}
}

// memory_limit below the floor is refused, naming the key.
func TestMemoryLimit_BelowTheFloorIsRefused(t *testing.T) {
	c := node.DefaultConfig()
	c.AgentID = "acme:eu1:planner"
	c.MemoryLimit = 64 << 20
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "memory_limit") {
		t.Fatalf("a 64 MiB memory_limit: %v", err)
	}
}
