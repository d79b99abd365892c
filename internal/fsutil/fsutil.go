// Package fsutil writes the node's small state files (identity key, trust pins, API token,
// config) so that a crash at any instant leaves either the old file or the new one, never an
// empty or half-written one, and checks that secret files are private.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// WriteFile replaces path with data durably and atomically: renameio writes a temporary file
// in the same directory with mode perm, fsyncs it and renames it over path; then the
// directory is fsynced, so that the rename itself survives a power loss.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := renameio.WriteFile(path, data, perm, renameio.WithPermissions(perm)); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// CreateFile writes data to path, which must not exist yet, durably and atomically: the data
// goes to a temporary file in the same directory, is fsynced, and is then hard-linked to path,
// which fails if path exists (two processes creating one identity both see which one won).
// The temporary file is removed and the directory fsynced. It returns an error wrapping
// fs.ErrExist when path exists.
func CreateFile(path string, data []byte, perm os.FileMode) (err error) {
	t, err := renameio.NewPendingFile(path, renameio.WithPermissions(perm))
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := t.Sync(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Link(t.Name(), path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making the creation, removal or renaming of its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// CheckPrivate returns an error naming the fix when path can be read or written by anyone but
// its owner: a secret (an identity key, a token) that others can read is no longer one.
func CheckPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %v: it must be readable by its owner only (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	return nil
}
