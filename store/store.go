package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the bbolt file inside the directory given to Open.
const FileName = "store.db"

// Bucket names. Keys are described in docs/delivery.md.
var (
	bktOutbox    = []byte("outbox")      // message id -> outbox record
	bktOutDue    = []byte("outbox_due")  // next attempt (8) + seq (8) -> message id
	bktOutExp    = []byte("outbox_exp")  // expires (8) + seq (8) -> message id
	bktOutRcpt   = []byte("outbox_rcpt") // recipient + 0x00 + seq (8) -> message id
	bktInbox     = []byte("inbox")       // seq (8) -> inbox record
	bktInboxID   = []byte("inbox_id")    // message id -> seq (8)
	bktSeen      = []byte("seen")        // message id -> expires (8) + 's' + owner peer
	bktSeenExp   = []byte("seen_exp")    // expires (8) + message id -> empty
	bktGossip    = []byte("gossip")      // message id -> expires (8) + 'g' + owner peer
	bktGossipExp = []byte("gossip_exp")  // expires (8) + message id -> empty
	allBuckets   = [][]byte{bktOutbox, bktOutDue, bktOutExp, bktOutRcpt, bktInbox, bktInboxID, bktSeen, bktSeenExp, bktGossip, bktGossipExp}
)

// bktLegacyReplay held named replay-window snapshots (SaveReplay, never called); Open
// deletes it from files that still have it.
var bktLegacyReplay = []byte("replay")

// Store is the durable outbox, inbox and seen set of one node.
//
// A Store is safe for concurrent use. Writes share commits through the group commit
// (commit.go), and bbolt serialises the commits; the byte counters are guarded by mu. Every method returns ErrClosed after Close.
type Store struct {
	db  *bolt.DB
	cfg config
	log *slog.Logger

	mu       sync.Mutex // guards the counters below and closed
	closed   bool
	outTotal int64
	outRcpt  map[string]int64
	inTotal  int64
	inSender map[string]int64 // inbox bytes by sending peer ("" for records without one)

	group group // the group commit every write goes through (commit.go)

	bodies *bodies // the files of large inbox messages (bodies.go)

	// The inbox journal (journal.go) and its applier: applyMu lets one apply run at a time;
	// applyWake wakes the applier, applyStop stops it, applyDone is closed when it returned.
	j         *journal
	applyMu   sync.Mutex
	applyWake chan struct{}
	applyStop chan struct{}
	applyDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store in dir, which is created with mode 0700. It
// recomputes the byte counters from what is stored, so limits hold across restarts.
//
// Before bbolt reads the file, Open checks it under the file lock: both meta pages, every
// page of every bucket, and every record (see Check). A damaged file is refused with a
// *CorruptError (ErrCorrupt) naming the file, the damage and the commands that check and
// recover it; Open never panics on one. Another process holding the file past the lock
// timeout is ErrLocked.
func Open(dir string, opts ...Option) (_ *Store, err error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, counts, err := openBolt(path, &cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = db.Close()
		}
	}()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bktLegacyReplay) != nil {
			return tx.DeleteBucket(bktLegacyReplay)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: create buckets in %s: %w", path, err)
	}
	bs, err := openBodies(dir, cfg.noSync)
	if err != nil {
		return nil, err
	}
	j, err := replayJournal(dir, db, &cfg, &counts)
	if err != nil {
		return nil, err
	}
	if n, err := bs.sweep(counts.bodies); err != nil {
		cfg.log.Warn("store: message files no record names are left", "err", err.Error())
	} else if n > 0 {
		cfg.log.Info("store: removed message files no record names (a crash left them)", "files", n)
	}
	s := &Store{db: db, cfg: cfg, log: cfg.log, bodies: bs,
		outTotal: counts.outTotal, outRcpt: counts.outRcpt, inTotal: counts.inTotal, inSender: counts.inSender,
		j: j, applyWake: make(chan struct{}, 1), applyStop: make(chan struct{}), applyDone: make(chan struct{})}
	go s.applyLoop()
	s.log.Debug("store opened", "path", path, "outbox_bytes", s.outTotal, "inbox_bytes", s.inTotal, "nosync", cfg.noSync)
	return s, nil
}

// initialMmapSize is the address space bbolt maps for the store file from the start (see
// openBolt); a file larger than it is mapped in full, as bbolt does.
const initialMmapSize = 1 << 30

// openBolt opens the bbolt file at path after checking it (checkedOpen) and runs bbolt's own
// consistency check on it; any panic on the way becomes a *CorruptError. It returns the byte
// counters the check added up.
func openBolt(path string, cfg *config) (db *bolt.DB, _ counters, err error) {
	rc := newRecordCheck()
	rc.bodyDir = filepath.Join(filepath.Dir(path), BodiesDir)
	var problems []Problem
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout:        cfg.lockTimeout,
			NoSync:         cfg.noSync,
			NoFreelistSync: true, // the freelist is rebuilt on open; commits write less
			FreelistType:   bolt.FreelistMapType,
			// Map 1 GiB of address space at once (only the pages read count as memory): each
			// time bbolt grows its map during a commit it copies every value the commit
			// touched, a large message's included, out of the old one.
			InitialMmapSize: initialMmapSize,
			OpenFile:        checkedOpen(cfg.lockTimeout, rc, &problems),
		})
		return err
	})
	corrupt := func(p []Problem) (*bolt.DB, counters, error) {
		return nil, counters{}, &CorruptError{Path: path, Problems: p}
	}
	switch {
	case len(problems) > 0:
		return corrupt(problems)
	case errors.Is(err, errLockTimeout), errors.Is(err, bolterrors.ErrTimeout):
		return nil, counters{}, fmt.Errorf("%w: %s (is another iacp-node running on this data directory?)", ErrLocked, path)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum),
		errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, errPanicked):
		return corrupt([]Problem{{What: err.Error()}})
	case err != nil:
		return nil, counters{}, fmt.Errorf("store: open %s: %w", path, err)
	}
	if problems = boltCheckDB(db); len(problems) > 0 {
		_ = db.Close()
		return corrupt(problems)
	}
	return db, rc.bytes, nil
}

// checkedOpen is bbolt's OpenFile hook: it opens the file, takes bbolt's exclusive lock
// itself (bbolt's own flock on the same descriptor then succeeds at once) and checks the
// file with rc before bbolt reads a byte of it, so that the check sees what bbolt will see.
func checkedOpen(timeout time.Duration, rc *recordCheck, problems *[]Problem) func(string, int, os.FileMode) (*os.File, error) {
	return func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		if err != nil {
			return nil, err
		}
		fail := func(err error) (*os.File, error) { _ = f.Close(); return nil, err }
		if err := lockFile(f, true, timeout); err != nil {
			return fail(err)
		}
		fi, err := f.Stat()
		if err != nil {
			return fail(err)
		}
		data, unmap, err := mapFile(f, fi.Size())
		if err != nil {
			return fail(err)
		}
		*problems = append(verifyFile(data, rc.visit), rc.problems...)
		unmap()
		if len(*problems) > 0 {
			return fail(ErrCorrupt)
		}
		return f, nil
	}
}

// Close closes the file. It is safe to call more than once; later calls return the first
// call's result. Writes in flight finish first (bbolt waits for them), and the journal's
// messages are applied to bbolt.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.closeErr = errors.Join(s.closeJournal(), s.db.Close())
	})
	return s.closeErr
}

// Path returns the bbolt file's path.
func (s *Store) Path() string { return s.db.Path() }

// Usage is a snapshot of the byte counters.
type Usage struct {
	// OutboxBytes is the raw bytes queued in the outbox; ByRecipient splits it.
	OutboxBytes int64
	ByRecipient map[string]int64
	// InboxBytes is the raw bytes accepted and not yet acknowledged; InboxBySender splits it
	// by sending peer ("" for messages stored before the sender was recorded that name none).
	InboxBytes    int64
	InboxBySender map[string]int64
	// MaxRecipientBytes, MaxTotalBytes, MaxInboxBytes and MaxSenderInboxBytes are the
	// configured limits.
	MaxRecipientBytes, MaxTotalBytes, MaxInboxBytes, MaxSenderInboxBytes int64
}

// Usage returns the current byte counters and limits.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{
		OutboxBytes: s.outTotal, ByRecipient: maps.Clone(s.outRcpt),
		InboxBytes: s.inTotal, InboxBySender: maps.Clone(s.inSender),
		MaxRecipientBytes: s.cfg.maxRecipientBytes, MaxTotalBytes: s.cfg.maxTotalBytes,
		MaxInboxBytes: s.cfg.maxInboxBytes, MaxSenderInboxBytes: s.cfg.maxSenderBytes,
	}
}

// Recipients returns the recipients that have messages queued in the outbox, in no order:
// the keys of Usage's ByRecipient, without copying the other counters.
func (s *Store) Recipients() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.outRcpt))
}

// be64 and key helpers. Times are stored as Unix nanoseconds; big-endian keys sort in time
// order for every time after 1970.
func be64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func timeKey(t time.Time, suffix ...[]byte) []byte {
	k := be64(uint64(t.UnixNano()))
	for _, s := range suffix {
		k = append(k, s...)
	}
	return k
}

func keyTime(k []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))) }
