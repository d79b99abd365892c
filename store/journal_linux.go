package store

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and its size only if it changed: the journal is allocated
// ahead, so a synced append writes no metadata.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// preallocate allocates size bytes for f, so that writing them changes no file size.
func preallocate(f *os.File, size int64) error { return syscall.Fallocate(int(f.Fd()), 0, 0, size) }
