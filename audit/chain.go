package audit

import (
	"encoding/json"
	"fmt"
)

// chain checks lines one after another. The zero value accepts any first entry (older files
// were removed) and then checks that every line follows the one before.
type chain struct {
	seq  uint64 // seq of the last entry checked, 0 before the first
	hash string // hash of the last line checked
	// anchored is set once the first entry was checked (or by anchorAt).
	anchored  bool
	firstSeq  uint64 // seq and prev of the first entry checked
	firstPrev string
	// genesis is set when the first line checked is the first line of audit-000001.jsonl,
	// which must be seq 1 chained from GenesisHash.
	genesis bool
	// segment is set when the first line checked is an EventChainBroken entry that starts a
	// new segment: its seq is free, and its prev must be want, the hash of wantWhat (the
	// last complete line of the file before), when that file exists.
	segment  bool
	want     string
	wantWhat string
}

// check verifies one line against the chain and advances it. It returns the entry, or a
// reason why the line breaks the chain.
func (c *chain) check(line []byte, prevLineNo int) (Entry, string) {
	e, reason := parseLine(line)
	if reason != "" {
		return e, reason
	}
	switch {
	case !c.anchored:
		if reason := c.start(e); reason != "" {
			return e, reason
		}
		c.firstSeq, c.firstPrev = e.Seq, e.Prev
	case e.Seq != c.seq+1:
		if e.Seq > c.seq+1 {
			return e, fmt.Sprintf("seq %d follows %d: %d entries are missing before this line", e.Seq, c.seq, e.Seq-c.seq-1)
		}
		return e, fmt.Sprintf("seq %d follows %d: lines were reordered or repeated", e.Seq, c.seq)
	case e.Prev != c.hash:
		where := "the line before"
		if prevLineNo > 0 {
			where = fmt.Sprintf("line %d", prevLineNo)
		}
		return e, fmt.Sprintf("prev does not match the hash of %s: that line was changed, or lines were removed or inserted here", where)
	}
	c.anchored = true
	c.seq = e.Seq
	c.hash = hashLine(line)
	return e, ""
}

// start checks the first entry of a chain or segment.
func (c *chain) start(e Entry) string {
	switch {
	case c.genesis && e.Seq != 1:
		return fmt.Sprintf("the first entry of the log has seq %d, not 1: entries were removed from the start", e.Seq)
	case c.segment && c.want != "" && e.Prev != c.want:
		return fmt.Sprintf("this %s entry's prev is not the hash of %s: that line changed after the break was recorded", EventChainBroken, c.wantWhat)
	case !c.segment && e.Seq == 1 && e.Prev != GenesisHash:
		return "the first entry does not chain from the genesis hash"
	}
	return ""
}

// parseLine decodes one line, or says why it is not an entry.
func parseLine(line []byte) (Entry, string) {
	var e Entry
	if len(line) == 0 {
		return e, "empty line"
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return e, "not a JSON entry: " + err.Error()
	}
	if e.Seq == 0 {
		return e, "no seq"
	}
	return e, ""
}

// isSegmentStart reports whether line (the first of a file) is an EventChainBroken entry.
func isSegmentStart(line []byte) bool {
	e, reason := parseLine(line)
	return reason == "" && e.Event == EventChainBroken
}

// segmentChain returns the chain that checks a file starting with an EventChainBroken entry:
// its prev must be the hash of the last complete line of prev (GenesisHash if it has none),
// the file before it; prev is nil when that file is gone, and then any prev is accepted.
func segmentChain(prevName string, prev *fileLine) chain {
	c := chain{segment: true}
	switch {
	case prevName == "":
	case prev == nil:
		c.want, c.wantWhat = GenesisHash, "an empty "+prevName+" (the genesis hash)"
	default:
		c.want, c.wantWhat = hashLine(prev.data), fmt.Sprintf("%s line %d", prevName, prev.no)
	}
	return c
}
