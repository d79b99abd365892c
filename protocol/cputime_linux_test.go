//go:build linux

package protocol_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user + system) the calling OS thread has used. Benchmarks
// report it per operation beside ns/op, because on a shared machine wall time mostly measures
// the neighbours.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
