package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Large inbox messages live in files of their own, in the directory bodies/ beside store.db,
// and their records (the journal's, then bbolt's) hold their metadata and the file's name.
// bbolt writes a value into pages of its own at every commit that touches its leaf, and a leaf
// holds two to four values however large: every message accepted after a large one copied it
// again, reading it through the file's map, which counts as the process's memory; and a
// journal record holding the message kept it in memory until its apply. A file is written
// once, from the frame the message was read into, read with read(2) when the agent asks for
// the message, and removed when the agent takes it.
//
// AcceptAll writes the file (synced, and its directory) before the journal record that names
// it, under a name of its own (a copy of the message arriving meanwhile gets another file,
// removed when it turns out a duplicate). Ack removes the file once the commit that removed
// its record is done; an apply that finds the message acknowledged or expired removes it
// then. A crash between the two, or before the journal record that would have named a file,
// leaves a file no record names: Open removes those after replaying the journal.

// BodyFileBytes is the size from which an inbox message is kept in a file of its own: 1 MiB.
const BodyFileBytes = 1 << 20

// BodiesDir is the directory of the message files inside the store's directory.
const BodiesDir = "bodies"

// bodies is the directory of message files.
type bodies struct {
	dir    string
	noSync bool
}

// openBodies creates the directory of message files in the store's directory dir.
func openBodies(dir string, noSync bool) (*bodies, error) {
	b := &bodies{dir: filepath.Join(dir, BodiesDir), noSync: noSync}
	if err := os.Mkdir(b.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("store: create %s: %w", b.dir, err)
	}
	return b, nil
}

// create writes the message of each entry of BodyFileBytes or more (nil entries are
// skipped) to a new file, synced, then the directory; it sets the entry's body to the file's
// name and drops its Raw, which the journal and the applier then do without. errs[i] says why
// entry i could not be written (it is left as it was).
func (b *bodies) create(entries []*InboxEntry) (errs []error) {
	errs = make([]error, len(entries))
	created := false
	for i, e := range entries {
		if e == nil || len(e.Raw) < BodyFileBytes {
			continue
		}
		name, err := b.writeNew(e.Raw)
		if err != nil {
			errs[i] = err
			continue
		}
		e.body, e.Size, e.Raw, created = name, int64(len(e.Raw)), nil, true
	}
	if created && !b.noSync {
		if err := syncDir(b.dir); err != nil {
			err = fmt.Errorf("store: sync %s: %w", b.dir, err)
			for i, e := range entries {
				if e != nil && e.body != "" {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// writeNew writes raw to a file of a new name, synced, and returns the name.
func (b *bodies) writeNew(raw []byte) (string, error) {
	for range 8 {
		name := fmt.Sprintf("%016x.msg", rand.Uint64())
		f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("store: write a message file: %w", err)
		}
		_, err = f.Write(raw)
		if err == nil && !b.noSync {
			err = fdatasync(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(f.Name())
			return "", fmt.Errorf("store: write %s: %w", f.Name(), err)
		}
		return name, nil
	}
	return "", errors.New("store: no free name for a message file")
}

// read returns the message in the file name, which must be size bytes long.
func (b *bodies) read(name string, size int64) ([]byte, error) {
	if !validBodyName(name) || size <= 0 || size > maxJournalBody {
		return nil, fmt.Errorf("store: a record names the message file %q of %d bytes, which cannot be", name, size)
	}
	f, err := os.Open(filepath.Join(b.dir, name))
	if err != nil {
		return nil, fmt.Errorf("store: read a message: %w", err)
	}
	defer f.Close()
	raw := make([]byte, size)
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil, fmt.Errorf("store: read %s: %w", f.Name(), err)
	}
	return raw, nil
}

// remove removes the named files ("" names nothing); a file already gone is no error, and a
// file that cannot be removed is left for the next Open.
func (b *bodies) remove(names ...string) {
	for _, name := range names {
		if name != "" {
			_ = os.Remove(filepath.Join(b.dir, name))
		}
	}
}

// sweep removes the files that keep does not name: what a crash left behind.
func (b *bodies) sweep(keep map[string]bool) (int, error) {
	des, err := os.ReadDir(b.dir)
	if err != nil {
		return 0, fmt.Errorf("store: list %s: %w", b.dir, err)
	}
	n := 0
	for _, de := range des {
		if !keep[de.Name()] {
			if err := os.Remove(filepath.Join(b.dir, de.Name())); err != nil {
				return n, fmt.Errorf("store: remove a message file no record names: %w", err)
			}
			n++
		}
	}
	return n, nil
}

// validBodyName reports whether name is a name writeNew gives: a record cannot make the store
// read outside its directory.
func validBodyName(name string) bool {
	hex, ok := strings.CutSuffix(name, ".msg")
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
