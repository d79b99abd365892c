package cli

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
)

// applyMemoryLimit sets the process's soft memory limit (runtime/debug.SetMemoryLimit) to
// limit bytes, none when limit is 0, unless the environment variable GOMEMLIMIT is set: the
// Go runtime read it when the process started, and it wins over the config file. It returns
// run's line saying which limit holds and where it came from.
func applyMemoryLimit(limit int64) string {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return fmt.Sprintf("memory    soft limit %s (GOMEMLIMIT; memory_limit ignored)", v)
	}
	if limit <= 0 {
		debug.SetMemoryLimit(math.MaxInt64)
		return "memory    no soft limit (memory_limit 0)"
	}
	debug.SetMemoryLimit(limit)
	return fmt.Sprintf("memory    soft limit %d MiB (memory_limit; GOMEMLIMIT overrides)", limit>>20)
}
