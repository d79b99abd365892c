package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// retain runs a retention pass now (after a rotation, at Open).
func (l *Log) retain() error {
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	return l.retainLocked(l.cfg.now())
}

// retainIfDue runs a retention pass when the last one was at least retentionEvery ago by the
// injected clock (or the clock went back).
func (l *Log) retainIfDue() error {
	l.retainMu.Lock()
	defer l.retainMu.Unlock()
	now := l.cfg.now()
	if !l.lastRetain.IsZero() && !now.Before(l.lastRetain) && now.Sub(l.lastRetain) < retentionEvery {
		return nil
	}
	return l.retainLocked(now)
}

// retainLocked removes the oldest rotated files while the files together, the current one
// counted at its full MaxFileBytes, exceed MaxTotalBytes, or while a file's newest entry is
// older than MaxAge; never the current file, never one after a file it keeps. So whenever
// Append returns, the log takes at most MaxTotalBytes on disk, unless one entry is larger
// than MaxFileBytes or a removal failed.
// Before it removes anything it appends and fsyncs an EventRetention entry describing the
// files; then it removes them, oldest first, and fsyncs the directory. A crash in between
// leaves the entry and the files: Verify accepts that, and the next pass (at the latest at
// Open) selects the files again, records them again and removes them. Rotated files are
// never written again, so they are read without holding mu. l.retainMu is held.
func (l *Log) retainLocked(now time.Time) error {
	l.lastRetain = now
	// The retention entry can start a new file itself; a second pass makes room for it.
	for range 2 {
		rotated, err := l.retainPass(now)
		if err != nil || !rotated {
			return err
		}
	}
	return nil
}

// retainPass plans, records and removes once; it reports whether its entry started a file.
func (l *Log) retainPass(now time.Time) (rotated bool, err error) {
	l.mu.Lock()
	cur, stopped := l.fileNum, l.closed || l.failed != nil
	l.mu.Unlock()
	if stopped {
		return false, nil
	}
	plan, err := l.plan(cur, now)
	if err != nil || len(plan) == 0 {
		return false, err
	}
	// After a failed removal the same files are planned again: record only those that are
	// not on record yet.
	fresh := plan
	if n := len(l.recorded); n <= len(plan) && slices.Equal(plan[:n], l.recorded) {
		fresh = plan[n:]
	}
	if len(fresh) > 0 {
		last := fresh[len(fresh)-1]
		info := &RetentionInfo{FirstSeq: fresh[0].FirstSeq, LastSeq: last.LastSeq, Anchor: last.LastHash, Files: fresh}
		e := Entry{Event: EventRetention, Time: now.UTC(), Reason: l.retentionReason(fresh), Retention: info}
		l.mu.Lock()
		rotated, err = l.appendLocked(e)
		if err == nil {
			err = l.syncLocked()
		}
		l.mu.Unlock()
		if err != nil {
			return false, fmt.Errorf("audit: record retention (nothing removed): %w", err)
		}
		l.recorded = plan
	}
	for _, f := range plan {
		// Oldest first, and stop at the first failure: a kept file never follows a gap.
		if err := l.cfg.remove(filepath.Join(l.dir, f.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, errors.Join(fmt.Errorf("audit: retention: %w (the next pass retries)", err), syncDir(l.dir))
		}
	}
	l.recorded = nil
	l.log.Info("audit: retention removed old files", "files", len(plan), "first", plan[0].Name, "last", plan[len(plan)-1].Name)
	return rotated, syncDir(l.dir)
}

// plan returns the files to remove, oldest first, each described.
func (l *Log) plan(cur int, now time.Time) ([]RemovedFile, error) {
	nums, err := listFiles(l.dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list %s: %w", l.dir, err)
	}
	sizes := make(map[int]int64, len(nums))
	var total int64
	for _, n := range nums {
		fi, err := os.Stat(filepath.Join(l.dir, fileName(n)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit: retention: %w", err)
		}
		sizes[n] = fi.Size()
		total += fi.Size()
	}
	total += max(0, l.cfg.maxFileBytes-sizes[cur]) // room for the current file to fill
	var plan []RemovedFile
	for _, n := range nums {
		size, ok := sizes[n]
		if n >= cur || !ok {
			break
		}
		path := filepath.Join(l.dir, fileName(n))
		why := ""
		if total > l.cfg.maxTotalBytes {
			why = RetainedForBytes
		} else if l.cfg.maxAge > 0 {
			newest, err := newestTime(path)
			if err != nil {
				return nil, err
			}
			if now.Sub(newest) > l.cfg.maxAge {
				why = RetainedForAge
			}
		}
		if why == "" || len(plan) == maxRemovePerPass {
			break
		}
		f, err := describeFile(path)
		if err != nil {
			return nil, err
		}
		if f.LastHash == "" && len(plan) > 0 { // no complete line: the chain passes through
			f.LastSeq, f.LastHash = plan[len(plan)-1].LastSeq, plan[len(plan)-1].LastHash
		}
		f.Why = why
		plan = append(plan, f)
		total -= size
	}
	return plan, nil
}

func (l *Log) retentionReason(plan []RemovedFile) string {
	var bytesN, ageN int
	var size int64
	for _, f := range plan {
		size += f.Size
		if f.Why == RetainedForAge {
			ageN++
		} else {
			bytesN++
		}
	}
	var why []string
	if bytesN > 0 {
		why = append(why, fmt.Sprintf("%d to bring the log under MaxTotalBytes %d", bytesN, l.cfg.maxTotalBytes))
	}
	if ageN > 0 {
		why = append(why, fmt.Sprintf("%d whose newest entry is older than MaxAge %s", ageN, l.cfg.maxAge))
	}
	return fmt.Sprintf("removing %d files (%s..%s, seq %d..%d, %d bytes): %s",
		len(plan), plan[0].Name, plan[len(plan)-1].Name, plan[0].FirstSeq, plan[len(plan)-1].LastSeq, size, strings.Join(why, "; "))
}

// describeFile reads a file once: its size, its SHA-256, the seq of its first line, and the
// seq and hash of its last complete line (zero when it has none).
func describeFile(path string) (RemovedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return RemovedFile{}, fmt.Errorf("audit: retention: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: h}
	lr := newLineReader(io.TeeReader(f, cw))
	var first, last []byte
	for {
		line, complete, err := lr.next()
		if err != nil || !complete {
			if errors.Is(err, errLineTooLong) { // hash the rest too
				_, err = io.Copy(io.Discard, lr.r)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return RemovedFile{}, fmt.Errorf("audit: retention: read %s: %w", path, err)
			}
			break
		}
		if first == nil {
			first = line
		}
		last = line
	}
	rf := RemovedFile{Name: filepath.Base(path), Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if first != nil {
		e, _ := parseLine(first)
		rf.FirstSeq = e.Seq
		e, _ = parseLine(last)
		rf.LastSeq, rf.LastHash = e.Seq, hashLine(last)
	}
	return rf, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// newestTime returns the time of the last entry of the file at path, or its modification
// time when that cannot be read. It reads the start of the last line only: a line can hold a
// 16 MiB payload, and the time comes second, after the seq.
func newestTime(path string) (time.Time, error) {
	head, err := lastLineHead(path, 512)
	if err != nil {
		return time.Time{}, err
	}
	if t, ok := entryTime(head); ok {
		return t, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit: retention: %w", err)
	}
	return fi.ModTime(), nil
}

// lastLineHead returns the first n bytes (or fewer) of the last complete line of path, found
// by reading backwards from the end in pieces of 64 KiB; nil when there is none within
// maxLineBytes of the end.
func lastLineHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("audit: retention: %w", err)
	}
	buf := make([]byte, 64<<10)
	end := int64(-1) // where the last complete line's newline is
	for at := fi.Size(); at > 0 && fi.Size()-at <= 2*maxLineBytes; {
		from := max(0, at-int64(len(buf)))
		piece := buf[:at-from]
		if _, err := f.ReadAt(piece, from); err != nil {
			return nil, fmt.Errorf("audit: retention: read %s: %w", path, err)
		}
		for i := len(piece) - 1; i >= 0; i-- {
			if piece[i] != '\n' {
				continue
			}
			if end < 0 {
				end = from + int64(i)
				continue
			}
			return readHead(f, from+int64(i)+1, end, n)
		}
		at = from
	}
	if end >= 0 && fi.Size()-end <= 2*maxLineBytes { // the first line of the file
		return readHead(f, 0, end, n)
	}
	return nil, nil
}

// readHead reads at most n bytes of f from start, and not past end.
func readHead(f *os.File, start, end int64, n int) ([]byte, error) {
	head := make([]byte, min(int64(n), end-start))
	if _, err := f.ReadAt(head, start); err != nil {
		return nil, fmt.Errorf("audit: retention: read %s: %w", f.Name(), err)
	}
	return head, nil
}

// entryTime reads the time of the entry a line starts with: the "time" member that follows
// its seq (appendEntry and json.Marshal both write them first).
func entryTime(head []byte) (time.Time, bool) {
	_, rest, ok := bytes.Cut(head, []byte(`,"time":"`))
	if !ok {
		return time.Time{}, false
	}
	v, _, ok := bytes.Cut(rest, []byte(`"`))
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	return t, err == nil && !t.IsZero()
}
