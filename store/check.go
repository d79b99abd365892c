package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// CheckReport is what Check found in a store file.
type CheckReport struct {
	// Path is the file checked.
	Path string
	// Records counts the keys read in each bucket of the store's layout (index entries
	// included; 0 for a bucket that is empty or could not be read).
	Records map[string]int
	// Problems lists every problem found, in the order found; none when the file is intact.
	Problems []Problem
	// Journaled counts the records at the head of the inbox journal (journal.go), which the
	// next Open replays into the file (skipping the messages the file has already).
	Journaled int
}

// OK reports whether the file is intact.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }

// Check checks the store file in dir without changing it: both meta pages, every page of
// every bucket (reached from the root, bounds, page ids, types, key order, each page reached
// once), then bbolt's own consistency check (tx.Check) when the pages are sound enough for it
// to run safely, and every record, which must decode. It reports the records in each bucket
// and every problem found; a damaged file is a report with Problems, not an error.
//
// Check takes a shared lock on the file, as bbolt's read-only mode does, so it refuses with
// ErrLocked while a node is running on the store: stop the node first. Its error is nil
// unless the check could not run (no store, locked, unreadable). Of the options, only
// WithLockTimeout applies.
func Check(dir string, opts ...Option) (CheckReport, error) {
	path := filepath.Join(dir, FileName)
	rep := CheckReport{Path: path}
	cfg, err := configure(opts)
	if err != nil {
		return rep, err
	}
	_, data, release, err := openForRepair(path, false, cfg.lockTimeout)
	if err != nil {
		return rep, err
	}
	defer release()
	rc := newRecordCheck()
	rc.bodyDir = filepath.Join(dir, BodiesDir)
	for _, b := range allBuckets {
		rc.counts[string(b)] = 0
	}
	rep.Problems = verifyFile(data, rc.visit)
	rep.Records = rc.counts
	if j, err := os.Open(filepath.Join(dir, JournalFile)); err == nil {
		if st, err := j.Stat(); err == nil {
			entries, _, _, _ := parseJournal(j, st.Size())
			rep.Journaled = len(entries)
		}
		j.Close()
	}
	rep.Problems = append(rep.Problems, rc.problems...)
	if len(rep.Problems) == 0 {
		rep.Problems = boltCheck(path, cfg.lockTimeout)
	}
	return rep, nil
}

// openForRepair opens the store file at path, locks it (shared for Check, exclusive for
// Recover) and maps it. release unmaps, unlocks and closes.
func openForRepair(path string, exclusive bool, timeout time.Duration) (f *os.File, data []byte, release func(), err error) {
	f, err = os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("store: no store at %s: give the node's data directory (--data-dir)", path)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := lockFile(f, exclusive, timeout); err != nil {
		_ = f.Close()
		return nil, nil, nil, lockError(path, err)
	}
	fi, err := f.Stat()
	unmap := func() {}
	if err == nil {
		data, unmap, err = mapFile(f, fi.Size())
	}
	if err != nil {
		_ = f.Close()
		return nil, nil, nil, fmt.Errorf("store: read %s: %w", path, err)
	}
	return f, data, func() { unmap(); _ = f.Close() }, nil
}

func lockError(path string, err error) error {
	if errors.Is(err, errLockTimeout) {
		return fmt.Errorf("%w: %s: a node is running on this data directory; stop it first (the store is only checked, recovered or opened by one process at a time)", ErrLocked, path)
	}
	return fmt.Errorf("store: lock %s: %w", path, err)
}

// verifyFile checks the meta pages and walks the tree of the current one, calling visit for
// every record; it returns the structural problems found.
func verifyFile(data []byte, visit func(bucket string, key, value []byte)) (problems []Problem) {
	defer func() {
		if r := recover(); r != nil { // a bug in this reader, never bbolt's: report, not crash
			problems = append(problems, Problem{What: fmt.Sprintf("the check itself failed: %v", r)})
		}
	}()
	if len(data) == 0 {
		return nil // a file bbolt has not yet initialised
	}
	metas, pageSize := readMetas(data, os.Getpagesize())
	for _, m := range metas {
		if m.err != nil {
			problems = append(problems, Problem{What: m.err.Error()})
		}
	}
	if metas[0].err == nil && metas[1].err == nil && metas[0].pageSize != metas[1].pageSize {
		problems = append(problems, Problem{What: fmt.Sprintf("the meta pages disagree on the page size (%d, %d)", metas[0].pageSize, metas[1].pageSize)})
	}
	m, ok := current(metas)
	if !ok {
		return problems
	}
	w := newWalker(data, pageSize, m.hwm, visit)
	w.file(m)
	return append(problems, w.problems...)
}

// boltCheck runs bbolt's own consistency check on a file verifyFile found sound (on a
// damaged one it can panic on a goroutine of its own, which would end the process). The
// caller holds a shared lock; bbolt's read-only open takes one of its own beside it.
func boltCheck(path string, timeout time.Duration) []Problem {
	var db *bolt.DB
	err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
		return err
	})
	if err != nil {
		return []Problem{{What: "bbolt cannot open the file: " + err.Error()}}
	}
	defer db.Close()
	return boltCheckDB(db)
}

// boltCheckDB runs tx.Check on db, which verifyFile has found sound.
func boltCheckDB(db *bolt.DB) (problems []Problem) {
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				problems = append(problems, Problem{What: "bbolt check: " + err.Error()})
			}
			return nil
		})
	})
	if err != nil {
		problems = append(problems, Problem{What: err.Error()})
	}
	return problems
}

// errPanicked marks the error guard makes of a panic.
var errPanicked = errors.New("bbolt failed reading the file")

// guard runs fn, turning a panic or a memory fault in it into an error (errPanicked): the
// last line of defence for bbolt code that reads the file on this goroutine.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	return fn()
}

// recordCheck decodes every record a walk visits, counts the keys of each bucket and adds
// up the byte counters Open needs, so that Open reads each record once.
type recordCheck struct {
	counts   map[string]int
	problems []Problem
	bytes    counters
	// bodyDir, when set, is the directory of message files, each of which an inbox record
	// names must be there at its size.
	bodyDir string
}

// counters are the byte counters a Store keeps under its mutex, and the message files its
// inbox records name (bodies.go), for Open to remove those no record names.
type counters struct {
	outTotal, inTotal int64
	outRcpt, inSender map[string]int64
	bodies            map[string]bool
}

func newRecordCheck() *recordCheck {
	return &recordCheck{counts: make(map[string]int), bytes: counters{outRcpt: map[string]int64{}, inSender: map[string]int64{}, bodies: map[string]bool{}}}
}

func (c *recordCheck) visit(bucket string, key, value []byte) {
	c.counts[bucket]++
	if err := c.check(bucket, key, value); err != nil {
		c.problems = append(c.problems, Problem{Bucket: bucket, Key: printableKey(key), What: err.Error()})
	}
}

// check checks one key and value of a bucket of the store's layout, and counts the raw bytes
// of outbox and inbox records.
func (c *recordCheck) check(bucket string, k, v []byte) error {
	switch bucket {
	case string(bktOutbox):
		var m outboxMeta
		raw, err := recordParts(v, &m)
		if err != nil {
			return err
		}
		if m.ID != string(k) {
			return fmt.Errorf("the record is of message %q", m.ID)
		}
		c.bytes.outTotal += int64(len(raw))
		c.bytes.outRcpt[m.Recipient] += int64(len(raw))
	case string(bktInbox):
		var m inboxMeta
		raw, err := recordParts(v, &m)
		if err != nil {
			return err
		}
		if len(k) != 8 || m.Seq != beUint(k) {
			return fmt.Errorf("the record has seq %d", m.Seq)
		}
		if _, err := uuid.Parse(m.ID); err != nil {
			return fmt.Errorf("the record's message id %q is not a UUID", m.ID)
		}
		if m.Peer == "" { // written before the sender was kept
			m.Peer = rawSenderPeer(raw)
		}
		size := int64(len(raw))
		if m.Body != "" {
			if err := c.checkBody(m.Body, m.Size); err != nil {
				return err
			}
			size = m.Size
		}
		c.bytes.inTotal += size
		c.bytes.inSender[m.Peer] += size
	case string(bktOutDue), string(bktOutExp):
		if len(k) != 16 || len(v) == 0 {
			return errors.New("an index entry of the wrong shape")
		}
	case string(bktOutRcpt):
		if len(k) < 9 || k[len(k)-9] != 0 || len(v) == 0 {
			return errors.New("an index entry of the wrong shape")
		}
	case string(bktInboxID):
		if len(v) != 8 {
			return errors.New("an index entry of the wrong shape")
		}
	case string(bktSeen):
		_, _, err := decodeExpiry(kindSeen, v)
		return err
	case string(bktGossip):
		_, _, err := decodeExpiry(kindGossip, v)
		return err
	case string(bktSeenExp), string(bktGossipExp):
		if len(k) <= 8 {
			return errors.New("an index entry of the wrong shape")
		}
	}
	return nil
}

// checkBody checks the message file an inbox record names: a name the store gives, and, when
// the directory is known, a file of the record's size there.
func (c *recordCheck) checkBody(name string, size int64) error {
	if !validBodyName(name) || size < BodyFileBytes || size > maxJournalBody {
		return fmt.Errorf("the record names the message file %q of %d bytes, which the store never writes", name, size)
	}
	c.bytes.bodies[name] = true
	if c.bodyDir == "" {
		return nil
	}
	fi, err := os.Stat(filepath.Join(c.bodyDir, name))
	if err != nil {
		return fmt.Errorf("its message file is missing: %w", err)
	}
	if fi.Size() != size {
		return fmt.Errorf("its message file %s is %d bytes, not %d", name, fi.Size(), size)
	}
	return nil
}
