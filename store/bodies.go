package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Large inbox messages live in files of their own, in the directory bodies/ beside store.db,
// and their inbox records hold their metadata and the file's name. bbolt writes a value into
// pages of its own at every commit that touches its leaf, and a leaf holds two to four values
// however large: every message accepted after a large one copied it again, reading it through
// the file's map, which counts as the process's memory. A file is written once, read with
// read(2) when the agent asks for the message, and removed when the agent takes it.
//
// The journal holds a large message whole, as any other (journal.go). The applier writes its
// file, synced and the directory after it, before the commit that names it; Ack removes the
// file once the commit that removed its record is done. A crash between the two, or before
// a commit that would have named a file, leaves a file no record names: Open removes those,
// after replaying the journal (which writes the files of the messages it applies again).

// BodyFileBytes is the size from which an inbox message is kept in a file of its own: 1 MiB.
const BodyFileBytes = 1 << 20

// BodiesDir is the directory of the message files inside the store's directory.
const BodiesDir = "bodies"

// bodyName is the file name of the inbox message numbered seq.
func bodyName(seq uint64) string { return fmt.Sprintf("%016x.msg", seq) }

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

// write writes the message of each entry that is large and not skipped to its file, and
// returns the names by index ("" for the others): each file synced, then the directory.
func (b *bodies) write(entries []*InboxEntry, skip []bool) ([]string, error) {
	names := make([]string, len(entries))
	wrote := false
	for i, e := range entries {
		if len(e.Raw) < BodyFileBytes || (skip != nil && skip[i]) {
			continue
		}
		name := bodyName(e.Seq)
		if err := b.writeFile(name, e.Raw); err != nil {
			b.remove(names...)
			return nil, err
		}
		names[i], wrote = name, true
	}
	if wrote && !b.noSync {
		if err := syncDir(b.dir); err != nil {
			b.remove(names...)
			return nil, fmt.Errorf("store: sync %s: %w", b.dir, err)
		}
	}
	return names, nil
}

func (b *bodies) writeFile(name string, raw []byte) error {
	f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("store: write a message file: %w", err)
	}
	_, err = f.Write(raw)
	if err == nil && !b.noSync {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", filepath.Join(b.dir, name), err)
	}
	return nil
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

// validBodyName reports whether name is a name bodyName gives: a record cannot make the
// store read outside its directory.
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
