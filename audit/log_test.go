package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/iacp-node/iacp-node/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func openLog(t *testing.T, dir string, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, append([]Option{WithClock(func() time.Time { return t0 })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func entry(i int) Entry {
	return Entry{Event: EventSent, MessageID: fmt.Sprintf("0190a000-0000-7000-8000-%012d", i),
		Type: "request", Intent: "task.create", From: "a:h:alice", To: "a:h:bob",
		Payload: []byte(fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("p", 100)))}
}

// write appends n entries to a fresh log in dir and closes it.
func write(t *testing.T, dir string, n int, opts ...Option) {
	t.Helper()
	l := openLog(t, dir, opts...)
	for i := 1; i <= n; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))
}

func writeFile(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestChainVerifies(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	for i := 1; i <= 10; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	seq, head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Entries != 10 || rep.Files != 1 || rep.FirstSeq != 1 || rep.LastSeq != 10 || rep.Head != head || seq != 10 {
		t.Fatalf("verify: %+v %v (head %d %s)", rep, err, seq, head)
	}
	lines := readFile(t, filepath.Join(dir, fileName(1)))
	if !bytes.Contains(lines[0], []byte(`"prev":"`+GenesisHash+`"`)) {
		t.Fatalf("first line does not chain from genesis: %s", lines[0])
	}
	if got := hashLine(bytes.TrimSuffix(lines[0], []byte("\n"))); !bytes.Contains(lines[1], []byte(got)) {
		t.Fatalf("second line's prev is not the hash of the first")
	}
}

func TestTamperIsDetectedAtTheLine(t *testing.T) {
	edit := func(ls [][]byte, i int) [][]byte {
		ls[i] = bytes.Replace(ls[i], []byte(`"a:h:bob"`), []byte(`"a:h:eve"`), 1)
		return ls
	}
	for _, tc := range []struct {
		name     string
		change   func([][]byte) [][]byte
		line     int
		inReason string
	}{
		{"edit line 5", func(ls [][]byte) [][]byte { return edit(ls, 4) }, 6, "line 5"},
		{"edit line 1", func(ls [][]byte) [][]byte { return edit(ls, 0) }, 2, "line 1"},
		{"edit prev of line 7", func(ls [][]byte) [][]byte {
			ls[6] = bytes.Replace(ls[6], []byte(`"prev":"`), []byte(`"prev":"0`), 1)
			return ls
		}, 7, "prev does not match"},
		{"delete line 5", func(ls [][]byte) [][]byte { return append(ls[:4:4], ls[5:]...) }, 5, "1 entries are missing"},
		{"delete line 1", func(ls [][]byte) [][]byte { return ls[1:] }, 1, "removed from the start"},
		{"swap lines 4 and 5", func(ls [][]byte) [][]byte { ls[3], ls[4] = ls[4], ls[3]; return ls }, 4, "missing"},
		{"repeat line 3", func(ls [][]byte) [][]byte {
			return append(append(ls[:3:3], ls[2]), ls[3:]...)
		}, 4, "reordered or repeated"},
		{"garbage line 8", func(ls [][]byte) [][]byte { ls[7] = []byte("hello\n"); return ls }, 8, "not a JSON entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, 10)
			path := filepath.Join(dir, fileName(1))
			writeFile(t, path, tc.change(readFile(t, path)))
			rep, err := Verify(dir)
			var ce *ChainError
			if !errors.As(err, &ce) || !errors.Is(err, ErrBroken) || rep.Broken != ce {
				t.Fatalf("verify after %s: %v", tc.name, err)
			}
			if ce.File != fileName(1) || ce.Line != tc.line || !strings.Contains(ce.Reason, tc.inReason) {
				t.Fatalf("broken at %s line %d (%s); want line %d mentioning %q", ce.File, ce.Line, ce.Reason, tc.line, tc.inReason)
			}
		})
	}
}

func TestRotationContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 100, WithMaxFileBytes(4096))
	nums, _ := listFiles(dir)
	if len(nums) < 3 {
		t.Fatalf("%d files, want rotation into at least 3", len(nums))
	}
	for _, n := range nums {
		if fi, _ := os.Stat(filepath.Join(dir, fileName(n))); fi.Size() > 4096 {
			t.Fatalf("%s is %d bytes, over the limit", fileName(n), fi.Size())
		}
	}
	rep, err := Verify(dir)
	if err != nil || rep.Entries != 100 || rep.Files != len(nums) {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	// The chain crosses files: changing the last line of file 1 breaks line 1 of file 2.
	p1 := filepath.Join(dir, fileName(1))
	ls := readFile(t, p1)
	last := len(ls) - 2 // SplitAfter leaves an empty element after the final newline
	ls[last] = bytes.Replace(ls[last], []byte(`"a:h:bob"`), []byte(`"a:h:bo0"`), 1)
	writeFile(t, p1, ls)
	_, err = Verify(dir)
	var ce *ChainError
	if !errors.As(err, &ce) || ce.File != fileName(2) || ce.Line != 1 {
		t.Fatalf("edit of file 1's last line: %v, want a break at %s line 1", err, fileName(2))
	}
	// Removing a whole middle file is named too.
	writeFile(t, p1, readFile(t, p1)) // no-op, keeps the edit
	dir2 := t.TempDir()
	write(t, dir2, 100, WithMaxFileBytes(4096))
	if err := os.Remove(filepath.Join(dir2, fileName(2))); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir2); !errors.As(err, &ce) || !strings.Contains(ce.Reason, fileName(2)+" is missing") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReopenResumesTheChain(t *testing.T) {
	dir := t.TempDir()
	for round := range 3 {
		l := openLog(t, dir, WithMaxFileBytes(4096))
		if seq, _ := l.Head(); seq != uint64(round*30) {
			t.Fatalf("round %d resumes at seq %d, want %d", round, seq, round*30)
		}
		for i := range 30 {
			if err := l.Append(entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Verify(dir)
	if err != nil || rep.Entries != 90 || rep.LastSeq != 90 || rep.Files < 2 {
		t.Fatalf("verify after 3 sessions: %+v %v", rep, err)
	}
}

func TestTornLastLineIsDroppedAndRecorded(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 5)
	path := filepath.Join(dir, fileName(1))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := []byte(`{"seq":6,"time":"2026-05-01T12:00:00Z","ev`)
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	rep, err := Verify(dir)
	if err != nil || !rep.TornTail || rep.Entries != 5 {
		t.Fatalf("verify with a torn tail: %+v %v", rep, err)
	}
	l := openLog(t, dir)
	if err := l.Append(entry(7)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir)
	if err != nil || rep.TornTail || rep.Entries != 7 {
		t.Fatalf("verify after recovery: %+v %v", rep, err)
	}
	var got []Entry
	if err := Tail(context.Background(), dir, 6, false, func(e Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(torn)
	if len(got) != 2 || got[0].Event != EventRecovered || !strings.Contains(got[0].Reason, hex.EncodeToString(sum[:])) {
		t.Fatalf("entries after recovery: %+v", got)
	}
}

func TestOmitPayloadsRecordsTheHash(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, WithOmitPayloads(true))
	e := entry(1)
	if err := l.Append(e); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, fileName(1)))
	sum := sha256.Sum256(e.Payload)
	if bytes.Contains(b, []byte(`"payload":`)) || !bytes.Contains(b, []byte(`"payload_sha256":"`+hex.EncodeToString(sum[:])+`"`)) {
		t.Fatalf("line with omitted payload: %s", b)
	}
	// And by default the payload is kept verbatim.
	dir2 := t.TempDir()
	write(t, dir2, 1)
	b, _ = os.ReadFile(filepath.Join(dir2, fileName(1)))
	if !bytes.Contains(b, []byte(`"payload":{"n":1,`)) {
		t.Fatalf("line with payload: %s", b)
	}
}

func TestFromMessage(t *testing.T) {
	m := &protocol.Message{
		Envelope: protocol.Envelope{MessageID: "id", CorrelationID: "corr",
			Sender: protocol.Sender{AgentID: "a:h:x"}, Recipient: protocol.Recipient{AgentID: "a:h:y"}},
		Message: protocol.Body{Type: "request", Intent: "task.create", Payload: []byte(`{}`)},
	}
	e := FromMessage(EventReceived, m)
	if e.Event != EventReceived || e.MessageID != "id" || e.CorrelationID != "corr" || e.From != "a:h:x" ||
		e.To != "a:h:y" || e.Type != "request" || e.Intent != "task.create" || string(e.Payload) != "{}" {
		t.Fatalf("FromMessage: %+v", e)
	}
}

func TestConcurrentAppendsAndSync(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, WithMaxFileBytes(8192), WithSyncInterval(5*time.Millisecond))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				if err := l.Append(entry(w*100 + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := l.Append(entry(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if rep, err := Verify(dir); err != nil || rep.Entries != 400 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want string // the field the error names
	}{
		{[]Option{WithMaxFileBytes(100)}, "MaxFileBytes"},
		{[]Option{WithMaxTotalBytes(DefaultMaxFileBytes)}, "MaxTotalBytes"},
		{[]Option{WithMaxFileBytes(4096), WithMaxTotalBytes(2*4096 - 1)}, "at least 2×MaxFileBytes (8192)"},
		{[]Option{WithMaxAge(-time.Hour)}, "MaxAge"},
		{[]Option{WithMaxAge(90)}, "0 (keep files forever) or at least 1h"},
		{[]Option{WithSyncInterval(-1)}, "SyncInterval"},
		{[]Option{WithSyncInterval(time.Hour)}, "SyncInterval"},
		{[]Option{WithClock(nil)}, "clock"},
		{[]Option{WithLogger(nil)}, "logger"},
	} {
		if _, err := Open(t.TempDir(), tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("options naming %s: %v", tc.want, err)
		}
	}
	// The smallest valid limits, and a log that keeps its files forever.
	l := openLog(t, t.TempDir(), WithMaxFileBytes(4096), WithMaxTotalBytes(8192), WithMaxAge(0), WithSyncInterval(0))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOldestFilesRemovedByHandVerifyWithANote(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 100, WithMaxFileBytes(4096))
	first, _, _ := firstEntry(filepath.Join(dir, fileName(3)))
	for _, n := range []int{1, 2} {
		if err := os.Remove(filepath.Join(dir, fileName(n))); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Verify(dir)
	if err != nil || rep.FirstSeq != first.Seq || rep.LastSeq != 100 {
		t.Fatalf("verify after removing the oldest files: %+v %v (want first seq %d)", rep, err, first.Seq)
	}
	if !rep.UnrecordedRemoval || rep.RemovedBy != nil {
		t.Fatalf("files removed by hand are reported as unrecorded: %+v", rep)
	}
}
