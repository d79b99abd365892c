//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package store

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockRetry is how often lockFile tries again for a lock another process holds: 50 ms, as
// bbolt does.
const lockRetry = 50 * time.Millisecond

// lockFile takes an advisory lock on f, the same flock(2) lock bbolt takes, waiting up to
// timeout (0 waits forever) before it returns errLockTimeout. Exclusive locks conflict with
// every other lock; shared ones only with exclusive ones. Closing f releases it.
func lockFile(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH | syscall.LOCK_NB
	if exclusive {
		how = syscall.LOCK_EX | syscall.LOCK_NB
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if timeout > 0 && time.Now().After(deadline) {
			return errLockTimeout
		}
		time.Sleep(lockRetry)
	}
}

// mapFile maps size bytes of f read-only and returns them with the function that unmaps them.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
