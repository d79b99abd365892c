package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// maxLineBytes bounds one line when reading: a 16 MiB message payload plus room to spare.
const maxLineBytes = 64 << 20

const (
	filePrefix = "audit-"
	fileSuffix = ".jsonl"
)

// fileName returns the name of log file number n (from 1).
func fileName(n int) string { return fmt.Sprintf("%s%06d%s", filePrefix, n, fileSuffix) }

// listFiles returns the numbers of the log files in dir, ascending. A missing dir is not an
// error: it holds no files.
func listFiles(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var nums []int
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, filePrefix) || !strings.HasSuffix(name, fileSuffix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, filePrefix), fileSuffix))
		if err != nil || n <= 0 {
			continue
		}
		nums = append(nums, n)
	}
	sort.Ints(nums)
	return nums, nil
}

// ErrBroken is matched by every *ChainError.
var ErrBroken = errors.New("audit: chain broken")

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: log closed")

// ChainError names the first line where the chain does not hold.
type ChainError struct {
	// File is the file's base name; Line counts from 1 within it.
	File   string
	Line   int
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit: chain broken at %s line %d: %s", e.File, e.Line, e.Reason)
}

// Is matches ErrBroken.
func (e *ChainError) Is(target error) bool { return target == ErrBroken }

// errLineTooLong is returned by lineReader.next for a line over maxLineBytes.
var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLineBytes)

// lineReader reads newline-terminated lines of at most maxLineBytes.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next line without its newline and whether it was complete (ended with a
// newline). At the end it returns io.EOF, with any incomplete tail as line.
func (l *lineReader) next() (line []byte, complete bool, err error) {
	var buf []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLineBytes {
			return nil, false, errLineTooLong
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(buf) == 0 {
				return nil, false, io.EOF
			}
			return buf, false, io.EOF
		default:
			return nil, false, err
		}
	}
}

// fileLine is one complete line of a file and its position.
type fileLine struct {
	no   int
	data []byte
	end  int64 // offset just past the newline
}

// readLines returns the complete lines of path and the incomplete tail, if any. A line over
// maxLineBytes ends the reading: readLines returns the lines before it and a *ChainError.
func readLines(path string) (lines []fileLine, tail []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	lr := newLineReader(f)
	var off int64
	for no := 1; ; no++ {
		line, complete, err := lr.next()
		if errors.Is(err, io.EOF) {
			return lines, line, nil
		}
		if errors.Is(err, errLineTooLong) {
			return lines, nil, &ChainError{File: filepath.Base(path), Line: no, Reason: err.Error()}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s line %d: %w", filepath.Base(path), no, err)
		}
		if !complete {
			return lines, line, nil
		}
		off += int64(len(line)) + 1
		lines = append(lines, fileLine{no: no, data: bytes.Clone(line), end: off})
	}
}
