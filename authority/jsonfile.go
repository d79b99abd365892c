package authority

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/iacp-node/iacp-node/internal/fsutil"
)

// readJSONFile decodes the JSON file at path into v. A missing file is (false, nil); a file
// larger than limit bytes, or (when private) one that others can read, is refused. what
// names the file in errors ("invitation book").
func readJSONFile(path, what string, limit int64, private bool, v any) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	if private {
		if err := fsutil.CheckPrivate(path); err != nil {
			return false, fmt.Errorf("%s: %w", what, err)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return false, fmt.Errorf("%s %s is larger than %d bytes", what, path, limit)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s %s is damaged: %w", what, path, err)
	}
	return true, nil
}

// versioned is the content of a file that names its format's version.
type versioned interface{ fileVersion() int }

func (f *bookFile) fileVersion() int     { return f.Version }
func (f *registryFile) fileVersion() int { return f.Version }

// readVersionedFile is readJSONFile for a file whose content names its version, which must be
// 1.
func readVersionedFile(path, what string, limit int64, private bool, v versioned) (bool, error) {
	ok, err := readJSONFile(path, what, limit, private, v)
	if err != nil || !ok {
		return false, err
	}
	if ver := v.fileVersion(); ver != 1 {
		return false, fmt.Errorf("%s %s has version %d; this node reads version 1", what, path, ver)
	}
	return true, nil
}

// unexpired returns a copy of entries, with room for one more, without those whose expiry
// (exp) is not after now.
func unexpired[E any](entries map[string]*E, now time.Time, exp func(*E) time.Time) map[string]*E {
	next := make(map[string]*E, len(entries)+1)
	for id, e := range entries {
		if now.Before(exp(e)) {
			next[id] = e
		}
	}
	return next
}

// writeJSONFile writes v as indented JSON to path, mode 0600, atomically and durably,
// creating its directory.
func writeJSONFile(path, what string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := fsutil.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
