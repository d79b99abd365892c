package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Tail polling bounds: after new data it polls again after tailPollMin, doubling while idle
// up to tailPollMax, so a follower notices a new entry within half a second at worst.
const (
	tailPollMin = 20 * time.Millisecond
	tailPollMax = 500 * time.Millisecond
)

// Tail calls fn for every entry with seq >= from (from 0 or 1: all), in order, reading the
// files in dir. Without follow it returns nil after the last complete line. With follow it
// keeps polling for new lines and new files (rotation) until ctx ends, and then returns
// ctx.Err(). An error from fn stops Tail and is returned.
//
// Tail does not verify the chain (Verify does) and reads on across a break: a line that is
// not an entry, or longer than any entry, and an incomplete last line of a file the log has
// moved on from (a damaged file before a new segment) are skipped. Seqs rise across segments
// (a new segment starts one past the highest seq of the damaged file), so from selects as
// it does in an intact log. A file removed by retention while Tail waits for it is skipped.
func Tail(ctx context.Context, dir string, from uint64, follow bool, fn func(Entry) error) error {
	num, err := startFile(dir, from)
	if err != nil {
		return err
	}
	t := &tailer{dir: dir, from: from, fn: fn}
	defer t.close()
	wait := tailPollMin
	for {
		if t.f == nil && num > 0 {
			err := t.open(num)
			if errors.Is(err, os.ErrNotExist) {
				if later, lerr := firstAfter(dir, num); lerr != nil {
					return lerr
				} else if later > 0 { // removed by retention: go on with the oldest kept
					num = later
					continue
				}
			} else if err != nil {
				return err
			}
		}
		progressed, err := t.drain()
		if err != nil {
			return err
		}
		// Move to the next file once it exists: the writer finished this one before creating
		// it, so read this one to its end first.
		if next := num + 1; t.f != nil && exists(filepath.Join(dir, fileName(next))) {
			if _, err := t.drain(); err != nil {
				return err
			}
			// An incomplete last line here is damage the writer left behind (Verify reports
			// it); the writer finished this file before it created the next.
			t.close()
			num = next
			wait = tailPollMin
			continue
		}
		if num == 0 { // no file yet
			if nums, err := listFiles(dir); err != nil {
				return err
			} else if len(nums) > 0 {
				num = nums[0]
				continue
			}
		}
		if !follow {
			return nil
		}
		if progressed {
			wait = tailPollMin
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, tailPollMax)
	}
}

// startFile returns the number of the file to start reading from: the last whose first
// entry has seq <= from, or the first file; 0 when there is none yet.
func startFile(dir string, from uint64) (int, error) {
	nums, err := listFiles(dir)
	if err != nil {
		return 0, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	if len(nums) == 0 {
		return 0, nil
	}
	start := nums[0]
	for _, n := range nums[1:] {
		e, ok, err := firstEntry(filepath.Join(dir, fileName(n)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if !ok || e.Seq > from {
			break
		}
		start = n
	}
	return start, nil
}

// firstAfter returns the number of the first file in dir after n, 0 when there is none.
func firstAfter(dir string, n int) (int, error) {
	nums, err := listFiles(dir)
	if err != nil {
		return 0, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	for _, m := range nums {
		if m > n {
			return m, nil
		}
	}
	return 0, nil
}

func firstEntry(path string) (Entry, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, false, err
	}
	defer f.Close()
	line, complete, err := newLineReader(f).next()
	if errors.Is(err, io.EOF) || !complete {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	e, reason := parseLine(line)
	return e, reason == "", nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// tailer reads complete lines from one file, keeping an incomplete tail for later.
type tailer struct {
	dir     string
	from    uint64
	fn      func(Entry) error
	f       *os.File
	name    string
	lineNo  int
	partial []byte
	skip    bool // the current line is over maxLineBytes: drop it up to its newline
	buf     []byte
}

func (t *tailer) open(n int) error {
	f, err := os.Open(filepath.Join(t.dir, fileName(n)))
	if err != nil {
		return err
	}
	t.f, t.name, t.lineNo, t.partial, t.skip = f, fileName(n), 0, nil, false
	return nil
}

func (t *tailer) close() {
	if t.f != nil {
		_ = t.f.Close()
		t.f = nil
	}
}

// drain reads what the file holds now and hands each complete line's entry to fn.
func (t *tailer) drain() (progressed bool, err error) {
	if t.f == nil {
		return false, nil
	}
	if t.buf == nil {
		t.buf = make([]byte, 64<<10)
	}
	for {
		n, err := t.f.Read(t.buf)
		if n > 0 {
			progressed = true
			if err := t.consume(t.buf[:n]); err != nil {
				return progressed, err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return progressed, nil
		}
		if err != nil {
			return progressed, fmt.Errorf("audit: read %s: %w", t.name, err)
		}
	}
}

// consume hands each complete line's entry to fn, skipping lines that are not entries.
func (t *tailer) consume(data []byte) error {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if t.skip || len(t.partial)+len(data) > maxLineBytes {
				t.partial, t.skip = nil, true
				return nil
			}
			t.partial = append(t.partial, data...)
			return nil
		}
		line := data[:i]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = nil
		}
		data = data[i+1:]
		t.lineNo++
		if t.skip {
			t.skip = false
			continue
		}
		e, reason := parseLine(line)
		if reason != "" {
			continue
		}
		if e.Seq >= t.from {
			if err := t.fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}
