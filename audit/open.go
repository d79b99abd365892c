package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// resume finds the last file and checks it, and its link to the file before. When they
// hold, it truncates an incomplete last line (returned) and opens the file for appending.
// When they do not, it leaves the damaged file as it is, sets l.broken and opens the next
// file with the chain state of the new segment; Open then writes the EventChainBroken entry.
func (l *Log) resume() (torn []byte, err error) {
	nums, err := listFiles(l.dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list %s: %w", l.dir, err)
	}
	if len(nums) == 0 {
		return nil, l.openFile(1, true)
	}
	last := nums[len(nums)-1]
	name := fileName(last)
	path := filepath.Join(l.dir, name)
	lines, tail, err := readLines(path)
	var tooLong *ChainError
	if err != nil && !errors.As(err, &tooLong) {
		return nil, fmt.Errorf("audit: read %s: %w", path, err)
	}
	c, ce, err := l.chainInto(nums, lines)
	if err != nil {
		return nil, err
	}
	prevNo := 0
	var end int64
	for _, ln := range lines {
		if ce != nil {
			break
		}
		if _, reason := c.check(ln.data, prevNo); reason != "" {
			ce = &ChainError{File: name, Line: ln.no, Reason: reason}
			break
		}
		prevNo, end = ln.no, ln.end
	}
	if ce == nil && tooLong != nil {
		ce = tooLong
	}
	if ce != nil {
		return nil, l.newSegment(last, lines, c, ce)
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

// chainInto returns the chain that the last file's lines (of the files nums) must follow: a
// new segment when its first line is an EventChainBroken entry, the continuation of the file
// before, or the start of the log. A break in the link to the file before is returned as a
// *ChainError, with the chain state as far as it is known.
func (l *Log) chainInto(nums []int, lines []fileLine) (chain, *ChainError, error) {
	last := nums[len(nums)-1]
	havePrev := len(nums) > 1 && nums[len(nums)-2] == last-1
	if last > 1 && len(lines) > 0 && isSegmentStart(lines[0].data) {
		if !havePrev {
			return segmentChain("", nil), nil, nil
		}
		prevLines, _, err := readLines(filepath.Join(l.dir, fileName(last-1)))
		var tooLong *ChainError
		if err != nil && !errors.As(err, &tooLong) {
			return chain{}, nil, fmt.Errorf("audit: read %s: %w", fileName(last-1), err)
		}
		var prev *fileLine
		if len(prevLines) > 0 {
			prev = &prevLines[len(prevLines)-1]
		}
		return segmentChain(fileName(last-1), prev), nil, nil
	}
	if len(nums) == 1 {
		return chain{genesis: last == 1}, nil, nil
	}
	c, err := anchorAt(l.dir, nums[len(nums)-2])
	var ce *ChainError
	if err != nil && !errors.As(err, &ce) {
		return chain{}, nil, err
	}
	if !havePrev {
		ce = &ChainError{File: fileName(last), Line: 1, Reason: fmt.Sprintf("file %s is missing", fileName(last-1))}
	}
	return c, ce, nil
}

// anchorAt returns a chain that continues after the last line of file n. When that line is
// not a complete entry it returns a *ChainError, and a chain anchored as far as it can.
func anchorAt(dir string, n int) (chain, error) {
	path := filepath.Join(dir, fileName(n))
	lines, tail, err := readLines(path)
	var tooLong *ChainError
	if err != nil && !errors.As(err, &tooLong) {
		return chain{}, fmt.Errorf("audit: read %s: %w", path, err)
	}
	if tooLong != nil || len(tail) > 0 || len(lines) == 0 {
		return chain{seq: maxSeq(lines)}, &ChainError{File: fileName(n), Line: len(lines) + 1, Reason: "a rotated file must end with a complete line"}
	}
	lastLine := lines[len(lines)-1]
	e, reason := parseLine(lastLine.data)
	if reason != "" {
		return chain{seq: maxSeq(lines)}, &ChainError{File: fileName(n), Line: lastLine.no, Reason: reason}
	}
	return chain{anchored: true, seq: e.Seq, hash: hashLine(lastLine.data)}, nil
}

// newSegment opens the file after damaged for the segment that follows a break: the next seq
// is one past the highest seq seen (in the damaged file's lines, or the chain before them),
// and prev is the hash of the damaged file's last complete line (GenesisHash if none).
func (l *Log) newSegment(damaged int, lines []fileLine, c chain, ce *ChainError) error {
	seq := max(c.seq, maxSeq(lines))
	prev := GenesisHash
	if len(lines) > 0 {
		prev = hashLine(lines[len(lines)-1].data)
	}
	if err := l.openFile(damaged+1, true); err != nil {
		return err
	}
	l.seq, l.prev, l.broken = seq, prev, ce
	return nil
}

// maxSeq is the highest seq among the lines that carry one.
func maxSeq(lines []fileLine) uint64 {
	var m uint64
	for _, ln := range lines {
		var s struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(ln.data, &s) == nil {
			m = max(m, s.Seq)
		}
	}
	return m
}
