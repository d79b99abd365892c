//go:build !linux

package store

import "os"

// fdatasync is fsync where the platform has no fdatasync in package syscall.
func fdatasync(f *os.File) error { return f.Sync() }

// preallocate grows f to size; the file system may still allocate the blocks on first write.
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
