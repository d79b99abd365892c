package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
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
// If a write fails, the file may hold part of a line; the Log then refuses every further
// Append with that error, rather than write after a damaged line.
//
// A Log is safe for concurrent use: mu guards the file and the chain state.
type Log struct {
	dir string
	cfg config
	log *slog.Logger

	mu      sync.Mutex
	f       *os.File
	fileNum int
	size    int64
	seq     uint64
	prev    string
	dirty   bool
	closed  bool
	failed  error
	scratch []byte

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open opens the audit log in dir (created with mode 0700 if missing) and resumes the chain
// from its last line. It checks the last file's lines (and that its first line chains from
// the file before); if they do not hold, it returns a *ChainError and appends nothing: run
// `iacp-node audit verify`, and move the damaged files aside to start a new chain. An
// incomplete last line (a write cut by a crash) is truncated away and recorded as an
// EventRecovered entry with the dropped bytes' length and SHA-256.
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
	if torn != nil {
		sum := sha256.Sum256(torn)
		l.log.Warn("audit: dropped an incomplete last line", "file", fileName(l.fileNum), "bytes", len(torn))
		if err := l.Append(Entry{Event: EventRecovered, Reason: fmt.Sprintf(
			"dropped an incomplete last line of %d bytes (sha256 %s) left by a crash", len(torn), hex.EncodeToString(sum[:]))}); err != nil {
			return nil, err
		}
	}
	if cfg.syncInterval > 0 {
		l.stop, l.done = make(chan struct{}), make(chan struct{})
		go l.syncLoop()
	}
	return l, nil
}

// resume finds the last file, checks it, truncates an incomplete last line (returned) and
// opens the file for appending.
func (l *Log) resume() (torn []byte, err error) {
	nums, err := listFiles(l.dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list %s: %w", l.dir, err)
	}
	if len(nums) == 0 {
		return nil, l.openFile(1, true)
	}
	last := nums[len(nums)-1]
	c := chain{genesis: last == 1}
	if len(nums) > 1 {
		if err := anchorAt(l.dir, nums[len(nums)-2], &c); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(l.dir, fileName(last))
	lines, tail, err := readLines(path)
	if err != nil {
		return nil, fmt.Errorf("audit: read %s: %w", path, err)
	}
	prevNo := 0
	var end int64
	for _, ln := range lines {
		if _, reason := c.check(ln.data, prevNo); reason != "" {
			return nil, &ChainError{File: fileName(last), Line: ln.no, Reason: reason}
		}
		prevNo, end = ln.no, ln.end
	}
	if len(tail) > 0 {
		if err := os.Truncate(path, end); err != nil {
			return nil, fmt.Errorf("audit: drop the incomplete last line of %s: %w", path, err)
		}
		torn = tail
	}
	if c.anchored {
		l.seq, l.prev = c.seq, c.hash
	}
	if err := l.openFile(last, false); err != nil {
		return nil, err
	}
	l.size = end
	return torn, nil
}

// anchorAt sets c to continue after the last line of file n.
func anchorAt(dir string, n int, c *chain) error {
	path := filepath.Join(dir, fileName(n))
	lines, tail, err := readLines(path)
	if err != nil {
		return fmt.Errorf("audit: read %s: %w", path, err)
	}
	if len(tail) > 0 || len(lines) == 0 {
		return &ChainError{File: fileName(n), Line: len(lines) + 1, Reason: "a rotated file must end with a complete line"}
	}
	lastLine := lines[len(lines)-1]
	var e Entry
	if err := json.Unmarshal(lastLine.data, &e); err != nil || e.Seq == 0 {
		return &ChainError{File: fileName(n), Line: lastLine.no, Reason: "not a JSON entry"}
	}
	*c = chain{anchored: true, seq: e.Seq, hash: hashLine(lastLine.data)}
	return nil
}

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
// durable. It returns ErrClosed after Close.
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
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	e.Seq, e.Prev = l.seq+1, l.prev
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: encode entry for %s: %w", e.MessageID, err)
	}
	if l.size > 0 && l.size+int64(len(line))+1 > l.cfg.maxFileBytes {
		if err := l.rotate(); err != nil {
			l.failed = err
			return err
		}
	}
	l.scratch = append(append(l.scratch[:0], line...), '\n')
	if _, err := l.f.Write(l.scratch); err != nil {
		l.failed = fmt.Errorf("audit: write %s: %w (the log refuses further entries; restart to recover)", fileName(l.fileNum), err)
		return l.failed
	}
	l.seq, l.prev = e.Seq, hashLine(line)
	l.size += int64(len(line)) + 1
	l.dirty = true
	if l.cfg.syncInterval == 0 {
		return l.syncLocked()
	}
	return nil
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

func (l *Log) syncLoop() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.syncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			if err := l.syncLocked(); err != nil {
				l.log.Error("audit: periodic fsync failed", "err", err)
			}
			l.mu.Unlock()
		}
	}
}

// Head returns the seq and hash of the last entry appended (0 and GenesisHash when empty).
func (l *Log) Head() (uint64, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, l.prev
}

// Close stops the sync goroutine, fsyncs and closes the file. It is safe to call more than
// once; later calls return the first result.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		if l.stop != nil {
			close(l.stop)
			<-l.done
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		l.closeErr = errors.Join(l.syncLocked(), l.f.Close())
	})
	return l.closeErr
}
