package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Log appends entries to the audit log in one directory.
//
// Durability: Append writes the whole line to the file with one write(2) before it returns,
// so an entry survives a crash of the process as soon as Append returns. Appends are fsynced
// every SyncInterval (default 1 s) by a background goroutine, on rotation and on Close; with
// WithSyncInterval(0) every Append fsyncs before it returns. A power loss can therefore lose
// at most the last SyncInterval of entries, or leave an incomplete last line, which the next
// Open drops and records (EventRecovered).
//
// Retention: after every rotation, at Open and at most once a minute (by the injected clock,
// from the background goroutine), the Log removes its oldest rotated files while the files
// together exceed MaxTotalBytes or a file's newest entry is older than MaxAge. It never
// removes the current file, and it appends and fsyncs an EventRetention entry naming the files
// before it removes them (see docs/delivery.md, "Retention").
//
// If a write fails, the file may hold part of a line; the Log then refuses every further
// Append with that error, rather than write after a damaged line.
//
// A Log is safe for concurrent use: mu guards the file and the chain state; retainMu
// serializes retention passes and guards lastRetain and recorded, and is never taken while
// mu is held.
type Log struct {
	dir    string
	cfg    config
	log    *slog.Logger
	broken *ChainError // the break Open found; set before Open returns, then read-only

	mu      sync.Mutex
	f       *os.File
	fileNum int
	size    int64
	seq     uint64
	prev    string
	dirty   bool
	closed  bool
	failed  error
	scratch []byte // the last line's buffer, reused for the next (up to maxScratch)

	retainMu   sync.Mutex
	lastRetain time.Time
	recorded   []RemovedFile // the files of the last retention entry, until they are removed

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open opens the audit log in dir (created with mode 0700 if missing) and resumes the chain
// from its last line. It checks the last file's lines and that its first line chains from
// the file before.
//
// When they do not hold (an edited, removed or inserted line, a missing file before it, ...),
// Open does not refuse to start and does not append to the damaged file: it starts a new
// segment, a new file whose first entry is an EventChainBroken entry with the ChainError as
// Reason, seq one past the highest seq of the damaged file and prev the hash of its last
// complete line. It logs the break at error level, and Broken returns it; run
// `iacp-node audit verify`, which reports both the break and the new segment.
//
// An incomplete last line (a write cut by a crash) is not a break: it is truncated away and
// recorded as an EventRecovered entry with the dropped bytes' length and SHA-256. Open then
// applies retention.
func Open(dir string, opts ...Option) (_ *Log, err error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: create directory: %w", err)
	}
	l := &Log{dir: dir, cfg: cfg, log: cfg.log, prev: GenesisHash}
	torn, err := l.resume()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = l.f.Close()
		}
	}()
	switch {
	case l.broken != nil:
		l.log.Error("audit: THE AUDIT CHAIN IS BROKEN: the damaged file is left as it is and the log continues in a new segment; run `iacp-node audit verify`",
			"break", l.broken.Error(), "new_file", fileName(l.fileNum))
		if err := l.Append(Entry{Event: EventChainBroken, Reason: l.broken.Error()}); err != nil {
			return nil, err
		}
		if err := l.Sync(); err != nil {
			return nil, err
		}
	case torn != nil:
		sum := sha256.Sum256(torn)
		l.log.Warn("audit: dropped an incomplete last line", "file", fileName(l.fileNum), "bytes", len(torn))
		if err := l.Append(Entry{Event: EventRecovered, Reason: fmt.Sprintf(
			"dropped an incomplete last line of %d bytes (sha256 %s) left by a crash", len(torn), hex.EncodeToString(sum[:]))}); err != nil {
			return nil, err
		}
	}
	if err := l.retain(); err != nil {
		l.log.Error("audit: retention failed", "err", err)
	}
	l.mu.Lock()
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		return nil, failed
	}
	if cfg.syncInterval > 0 || cfg.maxAge > 0 {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.loop()
	}
	return l, nil
}

// Broken returns the break Open found in the last file, after which it started a new
// segment, or nil when the chain held. The node reports it in its status and metrics.
func (l *Log) Broken() *ChainError { return l.broken }

func (l *Log) openFile(n int, create bool) error {
	flags := os.O_WRONLY | os.O_APPEND
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	path := filepath.Join(l.dir, fileName(n))
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open %s: %w", path, err)
	}
	if create {
		if err := syncDir(l.dir); err != nil {
			_ = f.Close()
			return err
		}
	}
	l.f, l.fileNum, l.size = f, n, 0
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync directory %s: %w", dir, err)
	}
	return nil
}

// Append adds e to the log. It sets e.Seq and e.Prev, stamps e.Time when it is zero, and
// with WithOmitPayloads replaces the payload by its SHA-256. See Log for when the entry is
// durable. When the entry starts a new file, Append applies retention before it returns. It
// returns ErrClosed after Close.
func (l *Log) Append(e Entry) error {
	if len(e.Payload) > 0 && l.cfg.omitPayloads {
		sum := sha256.Sum256(e.Payload)
		e.PayloadSHA256, e.Payload = hex.EncodeToString(sum[:]), nil
	}
	if e.Time.IsZero() {
		e.Time = l.cfg.now()
	}
	e.Time = e.Time.UTC()
	l.mu.Lock()
	rotated, err := l.appendLocked(e)
	l.mu.Unlock()
	if rotated {
		if err := l.retain(); err != nil {
			l.log.Error("audit: retention after rotation failed", "err", err)
		}
	}
	return err
}

// appendLocked writes e as the next line, rotating first when it would not fit. l.mu is held.
func (l *Log) appendLocked(e Entry) (rotated bool, err error) {
	if l.closed {
		return false, ErrClosed
	}
	if l.failed != nil {
		return false, l.failed
	}
	e.Seq, e.Prev = l.seq+1, l.prev
	pieces, err := l.encode(&e)
	if err != nil {
		return false, fmt.Errorf("audit: encode entry for %s: %w", e.MessageID, err)
	}
	size := int64(0) // of the line and its newline
	for _, p := range pieces {
		size += int64(len(p))
	}
	if l.size > 0 && l.size+size > l.cfg.maxFileBytes {
		if err := l.rotate(); err != nil {
			l.failed = err
			return false, err
		}
		rotated = true
	}
	h := sha256.New() // the chain hash covers the line without its newline
	for i, p := range pieces {
		if i == len(pieces)-1 {
			h.Write(p[:len(p)-1])
		} else {
			h.Write(p)
		}
		if _, err := l.f.Write(p); err != nil {
			l.failed = fmt.Errorf("audit: write %s: %w (the log refuses further entries; restart to recover)", fileName(l.fileNum), err)
			return rotated, l.failed
		}
	}
	l.seq, l.prev = e.Seq, hex.EncodeToString(h.Sum(nil))
	l.size += size
	l.dirty = true
	if cap(l.scratch) > maxScratch {
		l.scratch = nil // an entry with a large payload is not kept for the next one
	}
	if l.cfg.syncInterval == 0 {
		return rotated, l.syncLocked()
	}
	return rotated, nil
}

// encode returns e's line and its newline in pieces to write one after the other, in the
// log's scratch buffer: one piece, or for a payload larger than maxScratch that is compact
// already, the line's head, the payload as it is and the rest, so that a 16 MiB message is
// not copied into the log's buffer. l.mu is held.
func (l *Log) encode(e *Entry) ([][]byte, error) {
	if len(e.Payload) > maxScratch && plainEntry(e) && protocol.IsCompactJSON(e.Payload) {
		head := appendHead(l.scratch[:0], e)
		tail := append(appendTail(head[len(head):], e), '\n')
		l.scratch = head
		return [][]byte{head, e.Payload, tail}, nil
	}
	buf, err := appendEntry(l.scratch[:0], e)
	if err != nil {
		return nil, err
	}
	l.scratch = append(buf, '\n')
	return [][]byte{l.scratch}, nil
}

// rotate fsyncs and closes the current file and starts the next one.
func (l *Log) rotate() error {
	if err := l.syncLocked(); err != nil {
		return err
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("audit: close %s: %w", fileName(l.fileNum), err)
	}
	return l.openFile(l.fileNum+1, true)
}

func (l *Log) syncLocked() error {
	if !l.dirty {
		return nil
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit: fsync %s: %w", fileName(l.fileNum), err)
	}
	l.dirty = false
	return nil
}

// Sync fsyncs every entry appended so far.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.syncLocked()
}

// loop fsyncs every SyncInterval and checks retention at most once a minute (every minute
// when SyncInterval is 0), until Close.
func (l *Log) loop() {
	defer close(l.done)
	every := l.cfg.syncInterval
	if every == 0 {
		every = retentionEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			if l.cfg.syncInterval > 0 {
				l.mu.Lock()
				if err := l.syncLocked(); err != nil {
					l.log.Error("audit: periodic fsync failed", "err", err)
				}
				l.mu.Unlock()
			}
			if err := l.retainIfDue(); err != nil {
				l.log.Error("audit: retention failed", "err", err)
			}
		}
	}
}

// Head returns the seq and hash of the last entry appended (0 and GenesisHash when empty).
func (l *Log) Head() (uint64, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, l.prev
}

// Close stops the background goroutine, waits for a retention pass in progress, fsyncs and
// closes the file. It is safe to call more than once; later calls return the first result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.done
		}
		l.retainMu.Lock()
		defer l.retainMu.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		l.closeErr = errors.Join(l.syncLocked(), l.f.Close())
	})
	return l.closeErr
}
