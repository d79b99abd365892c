package audit

import (
	"fmt"
	"path/filepath"
)

// Report is the result of Verify.
type Report struct {
	// Files and Entries count what was checked, up to the first break.
	Files   int
	Entries int
	// FirstSeq is the seq of the first entry: 1 unless older files were removed.
	FirstSeq uint64
	// LastSeq and Head are the seq and hash of the last intact entry; copy Head elsewhere to
	// anchor the chain.
	LastSeq uint64
	Head    string
	// TornTail is set when the last file ends with an incomplete line (a write cut by a
	// crash); it is not counted, and the next Open drops and records it.
	TornTail bool
	// Broken is the first break, or nil when the chain is intact.
	Broken *ChainError
}

// Verify checks the whole chain in dir: every line parses, seqs follow without gaps, and
// every prev is the hash of the line before, across files. It returns the report and, when
// the chain is broken, the *ChainError naming the first broken file and line (also in
// Report.Broken). Other errors are I/O failures. A directory without log files verifies as
// empty.
func Verify(dir string) (Report, error) {
	rep := Report{Head: GenesisHash}
	nums, err := listFiles(dir)
	if err != nil {
		return rep, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	c := chain{genesis: len(nums) > 0 && nums[0] == 1}
	for i, n := range nums {
		name := fileName(n)
		if i > 0 && n != nums[i-1]+1 {
			rep.Broken = &ChainError{File: name, Line: 1, Reason: fmt.Sprintf("file %s is missing", fileName(nums[i-1]+1))}
			return rep, rep.Broken
		}
		lines, tail, err := readLines(filepath.Join(dir, name))
		if err != nil {
			return rep, fmt.Errorf("audit: %w", err)
		}
		rep.Files++
		prevNo := 0
		for _, ln := range lines {
			if _, reason := c.check(ln.data, prevNo); reason != "" {
				rep.Broken = &ChainError{File: name, Line: ln.no, Reason: reason}
				return rep, rep.Broken
			}
			prevNo = ln.no
			rep.Entries++
		}
		if len(tail) > 0 {
			if i < len(nums)-1 {
				rep.Broken = &ChainError{File: name, Line: len(lines) + 1, Reason: "incomplete line in a rotated file"}
				return rep, rep.Broken
			}
			rep.TornTail = true
		}
	}
	if c.anchored {
		rep.FirstSeq, rep.LastSeq, rep.Head = c.firstSeq, c.seq, c.hash
	}
	return rep, nil
}
