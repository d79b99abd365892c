package audit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// editLine changes line i (from 0) of a file so that the next line no longer chains from it.
func editLine(t *testing.T, path string, i int) {
	t.Helper()
	ls := readFile(t, path)
	ls[i] = bytes.Replace(ls[i], []byte(`"a:h:bob"`), []byte(`"a:h:eve"`), 1)
	writeFile(t, path, ls)
}

func TestOpenOnAnEditedLineStartsAnAnchoredSegment(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 5)
	damaged := filepath.Join(dir, fileName(1))
	editLine(t, damaged, 1) // line 2; line 3 no longer chains
	before, _ := os.ReadFile(damaged)
	var logged bytes.Buffer
	l := openLog(t, dir, WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))

	ce := l.Broken()
	if ce == nil || ce.File != fileName(1) || ce.Line != 3 {
		t.Fatalf("Broken() = %v, want the break at %s line 3", ce, fileName(1))
	}
	if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), "AUDIT CHAIN IS BROKEN") {
		t.Fatalf("no loud log line: %s", logged.String())
	}
	if after, _ := os.ReadFile(damaged); !bytes.Equal(after, before) {
		t.Fatal("Open wrote to the damaged file")
	}
	for i := 6; i <= 8; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	seq, head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The new file starts with the chain_broken entry: one past the damaged file's highest
	// seq, chained from its last line, the break as reason; appends continue after it.
	ls := readFile(t, damaged)
	e, reason := parseLine(bytes.TrimSuffix(readFile(t, filepath.Join(dir, fileName(2)))[0], []byte("\n")))
	if reason != "" || e.Event != EventChainBroken || e.Seq != 6 || e.Prev != hashLine(bytes.TrimSuffix(ls[4], []byte("\n"))) ||
		e.Reason != ce.Error() {
		t.Fatalf("first entry of the new segment: %+v %s", e, reason)
	}
	if seq != 9 {
		t.Fatalf("head seq %d, want 9 (chain_broken 6, then 7..9)", seq)
	}

	// Verify reports the break, and that the new segment is intact.
	rep, err := Verify(dir)
	var vce *ChainError
	if !errors.As(err, &vce) || vce.File != fileName(1) || vce.Line != 3 || rep.Broken != vce {
		t.Fatalf("verify: %v, want the break at %s line 3", err, fileName(1))
	}
	if len(rep.Segments) != 2 {
		t.Fatalf("segments: %+v", rep.Segments)
	}
	s0, s1 := rep.Segments[0], rep.Segments[1]
	if s0.Broken != vce || s0.Entries != 2 || s0.FirstSeq != 1 || s0.LastSeq != 2 {
		t.Fatalf("damaged segment: %+v", s0)
	}
	if s1.Broken != nil || s1.File != fileName(2) || s1.FirstSeq != 6 || s1.LastSeq != 9 || s1.Entries != 4 || s1.Head != head ||
		s1.StartReason != ce.Error() {
		t.Fatalf("new segment: %+v (head %s)", s1, head)
	}
	if rep.LastSeq != 9 || rep.Head != head || rep.Entries != 6 {
		t.Fatalf("report: %+v", rep)
	}

	// A second Open resumes the new segment: no new break, no new file.
	l = openLog(t, dir)
	if l.Broken() != nil {
		t.Fatalf("reopen: Broken() = %v", l.Broken())
	}
	if err := l.Append(entry(10)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if nums, _ := listFiles(dir); len(nums) != 2 {
		t.Fatalf("files after reopening: %v", nums)
	}

	// Tail reads across the segments, and from selects by seq.
	var seqs []uint64
	if err := Tail(context.Background(), dir, 7, false, func(e Entry) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 4 || seqs[0] != 7 || seqs[3] != 10 {
		t.Fatalf("tail from 7: %v", seqs)
	}
	if all := entriesOf(t, dir, ""); len(all) != 10 || all[5].Event != EventChainBroken {
		t.Fatalf("tail of everything: %d entries", len(all))
	}
}

func TestOpenStartsASegmentForEachKindOfBreak(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, nums []int) // nums: the files written
		inErr  string
	}{
		{"a changed prev", func(t *testing.T, dir string, nums []int) {
			p := filepath.Join(dir, fileName(nums[len(nums)-1]))
			ls := readFile(t, p)
			ls[1] = bytes.Replace(ls[1], []byte(`"prev":"`), []byte(`"prev":"0`), 1)
			writeFile(t, p, ls)
		}, "prev does not match"},
		{"a missing file before the last", func(t *testing.T, dir string, nums []int) {
			if err := os.Remove(filepath.Join(dir, fileName(nums[len(nums)-2]))); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
		{"a garbage line, then a torn one", func(t *testing.T, dir string, nums []int) {
			p := filepath.Join(dir, fileName(nums[len(nums)-1]))
			writeFile(t, p, append(readFile(t, p), []byte("garbage\n"), []byte(`{"seq":`)))
		}, "not a JSON entry"},
		{"the file before ends with a torn line", func(t *testing.T, dir string, nums []int) {
			p := filepath.Join(dir, fileName(nums[len(nums)-2]))
			writeFile(t, p, append(readFile(t, p), []byte(`{"seq":`)))
		}, "must end with a complete line"},
		{"the last line of the file before changed", func(t *testing.T, dir string, nums []int) {
			p := filepath.Join(dir, fileName(nums[len(nums)-2]))
			ls := readFile(t, p)
			editLine(t, p, len(ls)-2)
		}, "prev does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, 60, WithMaxFileBytes(4096))
			nums, _ := listFiles(dir)
			tc.damage(t, dir, nums)
			l := openLog(t, dir, WithMaxFileBytes(4096))
			if l.Broken() == nil || !strings.Contains(l.Broken().Reason, tc.inErr) {
				t.Fatalf("Broken() = %v, want a break mentioning %q", l.Broken(), tc.inErr)
			}
			if err := l.Append(entry(99)); err != nil {
				t.Fatal(err)
			}
			seq, head := l.Head()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(dir)
			last := rep.Segments[len(rep.Segments)-1]
			if !errors.Is(err, ErrBroken) || last.Broken != nil || last.File != fileName(nums[len(nums)-1]+1) ||
				last.LastSeq != seq || last.Head != head || last.FirstSeq < 60 {
				t.Fatalf("verify: %v; last segment %+v, want intact from %s to seq %d", err, last, fileName(nums[len(nums)-1]+1), seq)
			}
		})
	}
}

// A torn last line is not a break: it is dropped and recorded, and the log continues in the
// same file (TestTornLastLineIsDroppedAndRecorded); a damaged file is left as it is, torn
// tail included.
func TestABrokenFileKeepsItsTornTail(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 5)
	p := filepath.Join(dir, fileName(1))
	editLine(t, p, 1)
	writeFile(t, p, append(readFile(t, p), []byte(`{"seq":6,"ti`)))
	before, _ := os.ReadFile(p)
	l := openLog(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("the damaged file was truncated")
	}
	if got := entriesOf(t, dir, ""); len(got) != 6 || got[5].Event != EventChainBroken || got[5].Seq != 6 {
		t.Fatalf("entries: %+v", got)
	}
}

// The chain_broken entry chains from the damaged file's last line: changing that line later
// breaks the new segment too, and Open starts another one.
func TestASegmentStartIsAnchoredToTheDamagedFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 5)
	p := filepath.Join(dir, fileName(1))
	editLine(t, p, 1)
	l := openLog(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	editLine(t, p, 4) // the last line, after the break was recorded
	rep, err := Verify(dir)
	if !errors.Is(err, ErrBroken) || len(rep.Segments) != 2 || rep.Segments[1].Broken == nil || rep.Segments[1].FirstSeq != 6 ||
		!strings.Contains(rep.Segments[1].Broken.Reason, "changed after the break was recorded") {
		t.Fatalf("verify: %v %+v", err, rep.Segments)
	}
	l = openLog(t, dir)
	if l.Broken() == nil || l.Broken().File != fileName(2) {
		t.Fatalf("Broken() = %v, want the broken link of %s", l.Broken(), fileName(2))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, _ := Verify(dir); len(rep.Segments) != 3 || rep.Segments[2].Broken != nil {
		t.Fatalf("segments: %+v", rep.Segments)
	}
}

// Retention removes the damaged file like any old file; the log then verifies again, its
// first file the new segment, anchored by the retention entry, and it still says that the
// node found a break.
func TestRetentionRemovesADamagedFileAndTheLogVerifiesAgain(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	opts := []Option{WithClock(c.now), WithMaxAge(24 * time.Hour)}
	write(t, dir, 5, opts...)
	editLine(t, filepath.Join(dir, fileName(1)), 1)
	c.set(t0.Add(time.Hour))
	l := openLog(t, dir, opts...)
	if l.Broken() == nil {
		t.Fatal("no break found")
	}
	if err := l.Append(entry(6)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrBroken) {
		t.Fatalf("verify with the damaged file: %v", err)
	}
	c.set(t0.Add(25 * time.Hour)) // file 1's newest entry is now over a day old
	l = openLog(t, dir, opts...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(dir, fileName(1))) {
		t.Fatal("retention kept the damaged file")
	}
	rep, err := Verify(dir)
	if err != nil || rep.RemovedBy == nil || rep.UnrecordedRemoval || len(rep.Segments) != 1 ||
		!strings.Contains(rep.Segments[0].StartReason, "chain broken at "+fileName(1)+" line 3") {
		t.Fatalf("verify after the damaged file was removed: %+v %v", rep, err)
	}
}

// A damaged line put back: every segment is intact, and the report still shows the segment
// that the node started when it found the break.
func TestARepairedBreakVerifiesAndKeepsItsSegment(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 5)
	p := filepath.Join(dir, fileName(1))
	orig := readFile(t, p)
	editLine(t, p, 1)
	l := openLog(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, orig)
	rep, err := Verify(dir)
	if err != nil || len(rep.Segments) != 2 || rep.Segments[1].Broken != nil || rep.Segments[1].StartReason == "" || rep.Entries != 6 {
		t.Fatalf("verify after the repair: %+v %v", rep, err)
	}
}
