//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package store

import (
	"io"
	"os"
	"time"
)

// lockFile does nothing on this platform: bbolt's own lock still keeps two nodes apart, but
// Check and Recover cannot tell that a node is running.
func lockFile(*os.File, bool, time.Duration) error { return nil }

// mapFile reads size bytes of f into memory.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, nil, err
	}
	return b, func() {}, nil
}
