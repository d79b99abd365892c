//go:build !linux

package protocol_test

import "time"

// threadCPU is not available here; benchmarks then report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
