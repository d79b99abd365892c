package audit

import (
	"encoding/json"
	"fmt"
)

// chain checks lines one after another. The zero value expects the first entry of a log.
type chain struct {
	seq  uint64 // seq of the last entry checked, 0 before the first
	hash string // hash of the last line checked
	// anchored is set once the first entry was checked.
	anchored bool
	firstSeq uint64
	// genesis is set when the first line checked is the first line of audit-000001.jsonl,
	// which must be seq 1 chained from GenesisHash. Otherwise earlier files were removed
	// (retention) and the first entry is taken as the anchor.
	genesis bool
}

// check verifies one line against the chain and advances it. It returns the entry, or a
// reason why the line breaks the chain.
func (c *chain) check(line []byte, prevLineNo int) (Entry, string) {
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
	switch {
	case !c.anchored && c.genesis && e.Seq != 1:
		return e, fmt.Sprintf("the first entry of the log has seq %d, not 1: entries were removed from the start", e.Seq)
	case !c.anchored && e.Seq == 1 && e.Prev != GenesisHash:
		return e, "the first entry does not chain from the genesis hash"
	case !c.anchored:
		// The first entry kept: seq 1 from genesis, or a later one when older files were
		// removed; Report.FirstSeq shows which.
		c.firstSeq = e.Seq
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
