package audit

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Report is the result of Verify.
type Report struct {
	// Files counts the files read; Entries the entries that chain, in every segment up to
	// that segment's first break.
	Files   int
	Entries int
	// FirstSeq is the seq of the first entry: 1 unless older files were removed (see
	// RemovedBy and UnrecordedRemoval).
	FirstSeq uint64
	// LastSeq and Head are the seq and hash of the last intact entry of the last segment;
	// copy Head elsewhere to anchor the chain.
	LastSeq uint64
	Head    string
	// TornTail is set when the last file ends with an incomplete line (a write cut by a
	// crash); it is not counted, and the next Open drops and records it.
	TornTail bool
	// Broken is the first break, or nil when every segment is intact.
	Broken *ChainError
	// Segments are the runs of the chain, in order: the first starts the log, every later one
	// starts with an EventChainBroken entry that Open wrote after it found a break.
	Segments []Segment
	// RemovedBy is the EventRetention entry that records removing the file before the first
	// one kept, when older files are gone; the first line kept was checked against the
	// anchor it records.
	RemovedBy *Record
	// UnrecordedRemoval is set when older files are gone and no retention entry in the chain
	// records removing the file before the first one kept: they were removed by hand.
	UnrecordedRemoval bool
}

// Segment is one run of the chain: from its first file on, every line follows the one before.
type Segment struct {
	// File is the segment's first file. StartReason is empty for the first segment; for a
	// later one it is the Reason of the EventChainBroken entry that starts it: the break Open
	// found.
	File        string
	StartReason string
	// Files and Entries count what was checked, up to the segment's first break.
	Files   int
	Entries int
	// FirstSeq is the seq of its first entry; LastSeq and Head are the seq and hash of its
	// last intact entry (zero when none).
	FirstSeq uint64
	LastSeq  uint64
	Head     string
	// Broken is the segment's first break, nil when it is intact.
	Broken *ChainError
}

// Record locates one entry of the log.
type Record struct {
	// File is the file's base name; Line counts from 1 within it.
	File  string
	Line  int
	Entry Entry
}

// Verify checks the whole chain in dir: every line parses, seqs follow without gaps, and
// every prev is the hash of the line before, across files.
//
// A file whose first entry is an EventChainBroken entry (written by Open after a break)
// starts a new segment: its prev must be the hash of the last complete line of the file
// before (when that file is still there), and from it on the chain is checked again. So a
// break is reported, and so is whether the log after it is intact.
//
// When the oldest files are gone, the first line kept must chain from the anchor the
// EventRetention entry that removed them recorded; when no such entry is in the chain the
// log still verifies and the report says so (UnrecordedRemoval).
//
// Verify returns the report and, when a segment is broken, the first *ChainError (also in
// Report.Broken and the segment). Other errors are I/O failures. A directory without log
// files verifies as empty.
func Verify(dir string) (Report, error) {
	v := verifier{rep: Report{Head: GenesisHash}, removed: map[string]removal{}}
	nums, err := listFiles(dir)
	if err != nil {
		return v.rep, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	if len(nums) == 0 {
		return v.rep, nil
	}
	var prevLast *fileLine // the last complete line of the file before
	for i, n := range nums {
		name := fileName(n)
		lines, tail, err := readLines(filepath.Join(dir, name))
		var tooLong *ChainError
		if err != nil && !errors.As(err, &tooLong) {
			return v.rep, fmt.Errorf("audit: %w", err)
		}
		v.rep.Files++
		if i > 0 && n != nums[i-1]+1 {
			v.brk(&ChainError{File: name, Line: 1, Reason: fmt.Sprintf("file %s is missing", fileName(nums[i-1]+1))})
		}
		switch {
		case i == 0 && n > 1 && len(lines) > 0 && isSegmentStart(lines[0].data):
			// The log starts with a segment whose damaged files retention removed.
			e, _ := parseLine(lines[0].data)
			v.begin(name, e, segmentChain("", nil))
		case i == 0:
			v.begin(name, Entry{}, chain{genesis: n == 1})
		case len(lines) > 0 && isSegmentStart(lines[0].data):
			prevName := ""
			if nums[i-1] == n-1 {
				prevName = fileName(n - 1)
			}
			e, _ := parseLine(lines[0].data)
			v.begin(name, e, segmentChain(prevName, prevLast))
		}
		v.file(name, lines)
		if tooLong != nil {
			v.brk(tooLong)
		}
		if len(tail) > 0 {
			if i < len(nums)-1 {
				v.brk(&ChainError{File: name, Line: len(lines) + 1, Reason: "incomplete line in a rotated file"})
			} else {
				v.rep.TornTail = true
			}
		}
		prevLast = nil
		if len(lines) > 0 {
			prevLast = &lines[len(lines)-1]
		}
	}
	v.end()
	v.checkStart(nums[0])
	return v.report()
}

// verifier walks the files in order; seg is the segment being checked, c its chain.
type verifier struct {
	rep     Report
	seg     Segment
	c       chain
	started bool
	// removed maps each file an EventRetention entry in the intact chain removed to it.
	removed map[string]removal
	// the first entry of the first segment, for checkStart
	first     Record
	haveFirst bool
}

type removal struct {
	file RemovedFile
	at   Record
}

// begin starts a segment at file name; start is its EventChainBroken entry (zero for the
// start of the log).
func (v *verifier) begin(name string, start Entry, c chain) {
	if v.started {
		v.end()
	}
	v.started, v.c = true, c
	v.seg = Segment{File: name, StartReason: start.Reason, FirstSeq: start.Seq}
}

func (v *verifier) end() {
	if v.c.anchored {
		v.seg.FirstSeq, v.seg.LastSeq, v.seg.Head = v.c.firstSeq, v.c.seq, v.c.hash
	}
	v.rep.Segments = append(v.rep.Segments, v.seg)
}

func (v *verifier) brk(ce *ChainError) {
	if v.seg.Broken == nil {
		v.seg.Broken = ce
	}
}

// file checks the lines of one file against the segment's chain, up to its first break.
func (v *verifier) file(name string, lines []fileLine) {
	if v.seg.Broken != nil {
		return
	}
	v.seg.Files++
	prevNo := 0
	for _, ln := range lines {
		e, reason := v.c.check(ln.data, prevNo)
		if reason != "" {
			v.brk(&ChainError{File: name, Line: ln.no, Reason: reason})
			return
		}
		if len(v.rep.Segments) == 0 && !v.haveFirst {
			v.first, v.haveFirst = Record{File: name, Line: ln.no, Entry: e}, true
		}
		if e.Event == EventRetention && e.Retention != nil {
			for _, f := range e.Retention.Files {
				v.removed[f.Name] = removal{file: f, at: Record{File: name, Line: ln.no, Entry: e}}
			}
		}
		prevNo = ln.no
		v.seg.Entries++
	}
}

// checkStart checks the first line kept against the retention entry that removed the file
// before it, when older files are gone.
func (v *verifier) checkStart(firstNum int) {
	if firstNum == 1 {
		return
	}
	gone := fileName(firstNum - 1)
	r, ok := v.removed[gone]
	if !ok {
		v.rep.UnrecordedRemoval = true
		return
	}
	v.rep.RemovedBy = &r.at
	if !v.haveFirst || v.first.Line != 1 {
		return // the first line is itself broken, and reported
	}
	e := v.first.Entry
	where := fmt.Sprintf("the last line of %s as recorded by the retention entry at %s line %d (seq %d)", gone, r.at.File, r.at.Line, r.at.Entry.Seq)
	var reason string
	switch {
	case e.Prev != r.file.LastHash:
		reason = "prev does not match the hash of " + where + ": the first line kept was changed, or lines were removed from the start of its file"
	case e.Event != EventChainBroken && e.Seq != r.file.LastSeq+1:
		reason = fmt.Sprintf("seq %d does not follow seq %d, %s", e.Seq, r.file.LastSeq, where)
	default:
		return
	}
	s := &v.rep.Segments[0]
	*s = Segment{File: s.File, Files: 1, FirstSeq: e.Seq, Broken: &ChainError{File: v.first.File, Line: 1, Reason: reason}}
}

func (v *verifier) report() (Report, error) {
	rep := v.rep
	for _, s := range rep.Segments {
		rep.Entries += s.Entries
		if rep.Broken == nil && s.Broken != nil {
			rep.Broken = s.Broken
		}
	}
	rep.FirstSeq = rep.Segments[0].FirstSeq
	if last := rep.Segments[len(rep.Segments)-1]; last.LastSeq > 0 {
		rep.LastSeq, rep.Head = last.LastSeq, last.Head
	}
	if rep.Broken != nil {
		return rep, rep.Broken
	}
	return rep, nil
}
