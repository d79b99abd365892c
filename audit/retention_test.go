package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// clock is a test clock that the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// entriesOf reads every entry in dir, in order, and those of one event.
func entriesOf(t *testing.T, dir string, ev Event) []Entry {
	t.Helper()
	var got []Entry
	if err := Tail(context.Background(), dir, 0, false, func(e Entry) error {
		if ev == "" || e.Event == ev {
			got = append(got, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func totalSize(t *testing.T, dir string) int64 {
	t.Helper()
	nums, err := listFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, num := range nums {
		fi, err := os.Stat(filepath.Join(dir, fileName(num)))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func TestRetentionByBytesKeepsTheLogUnderMaxTotalBytes(t *testing.T) {
	dir := t.TempDir()
	const fileMax, totalMax = 4096, 3 * 4096
	var removed []string
	// No background goroutine (SyncInterval 0, MaxAge 0): retention runs inside Append, on
	// this goroutine, so the hook may stop the test.
	l := openLog(t, dir, WithMaxFileBytes(fileMax), WithMaxTotalBytes(totalMax), WithSyncInterval(0), WithMaxAge(0), withRemove(func(path string) error {
		// The entry that names the file, with its size and hash, is in the log before the
		// file goes.
		name := filepath.Base(path)
		recs := entriesOf(t, dir, EventRetention)
		if len(recs) == 0 {
			t.Fatalf("%s removed before any retention entry was written", name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		var found bool
		for _, f := range recs[len(recs)-1].Retention.Files {
			if f.Name == name {
				found = f.Size == int64(len(b)) && f.SHA256 == hex.EncodeToString(sum[:]) && f.Why == RetainedForBytes
			}
		}
		if !found {
			t.Fatalf("%s removed, but the last retention entry does not record it with its size and hash: %+v", name, recs[len(recs)-1].Retention)
		}
		removed = append(removed, name)
		return os.Remove(path)
	}))
	for i := 1; i <= 200; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
		if n := totalSize(t, dir); n > totalMax {
			t.Fatalf("after entry %d the log takes %d bytes, over MaxTotalBytes %d", i, n, totalMax)
		}
	}
	seq, head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	nums, _ := listFiles(dir)
	if len(removed) == 0 || removed[0] != fileName(1) || removed[len(removed)-1] != fileName(nums[0]-1) {
		t.Fatalf("removed %v, kept %v: want the oldest files, in order", removed, nums)
	}
	recs := entriesOf(t, dir, EventRetention)
	lastRec := recs[len(recs)-1].Retention
	rep, err := Verify(dir)
	if err != nil || rep.UnrecordedRemoval || rep.RemovedBy == nil || rep.RemovedBy.Entry.Seq != recs[len(recs)-1].Seq ||
		rep.FirstSeq != lastRec.LastSeq+1 || rep.LastSeq != seq || rep.Head != head {
		t.Fatalf("verify after retention: %+v %v", rep, err)
	}
	if lastRec.Anchor != lastRec.Files[len(lastRec.Files)-1].LastHash || lastRec.FirstSeq != lastRec.Files[0].FirstSeq {
		t.Fatalf("retention record: %+v", lastRec)
	}
	first := readFile(t, filepath.Join(dir, fileName(nums[0])))[0]
	if !bytes.Contains(first, []byte(`"prev":"`+lastRec.Anchor+`"`)) {
		t.Fatalf("the first line kept does not chain from the recorded anchor %s: %s", lastRec.Anchor, first)
	}
}

func TestRetentionByAgeRemovesFilesWhoseNewestEntryIsOld(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	opts := []Option{WithClock(c.now), WithMaxFileBytes(4096), WithMaxAge(24 * time.Hour)}
	l := openLog(t, dir, opts...)
	for i := 1; i <= 80; i++ {
		if i == 41 {
			c.set(t0.Add(12 * time.Hour))
		}
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if recs := entriesOf(t, dir, EventRetention); len(recs) != 0 {
		t.Fatalf("retention removed files younger than MaxAge: %+v", recs)
	}
	// Which rotated files hold only entries of t0, the ones a day and an hour later is past.
	nums, _ := listFiles(dir)
	var old []string
	for _, n := range nums[:len(nums)-1] {
		if newest, _ := newestTime(filepath.Join(dir, fileName(n))); newest.Equal(t0) {
			old = append(old, fileName(n))
		}
	}
	if len(old) < 2 || len(old) == len(nums)-1 {
		t.Fatalf("test setup: %d of %d rotated files are old", len(old), len(nums)-1)
	}
	c.set(t0.Add(25 * time.Hour))
	l = openLog(t, dir, opts...) // Open applies retention
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs := entriesOf(t, dir, EventRetention)
	if len(recs) != 1 || len(recs[0].Retention.Files) != len(old) {
		t.Fatalf("retention entries %+v, want one removing %v", recs, old)
	}
	for i, f := range recs[0].Retention.Files {
		if f.Name != old[i] || f.Why != RetainedForAge || exists(filepath.Join(dir, f.Name)) {
			t.Fatalf("removed %+v, want %s for its age, and gone", f, old[i])
		}
	}
	if !strings.Contains(recs[0].Reason, "older than MaxAge 24h0m0s") || !recs[0].Time.Equal(t0.Add(25*time.Hour)) {
		t.Fatalf("retention reason and time: %q %s", recs[0].Reason, recs[0].Time)
	}
	if rep, err := Verify(dir); err != nil || rep.RemovedBy == nil || rep.UnrecordedRemoval {
		t.Fatalf("verify after retention by age: %+v %v", rep, err)
	}
	// Long after, every rotated file goes, and never the current one.
	c.set(t0.Add(1000 * time.Hour))
	l = openLog(t, dir, opts...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// (The retention entry may start a file of its own; then the one before ages too.)
	if after, _ := listFiles(dir); len(after) != 1 || after[0] < nums[len(nums)-1] {
		t.Fatalf("files after everything aged: %v, want only the current one", after)
	}
	if rep, err := Verify(dir); err != nil || rep.RemovedBy == nil {
		t.Fatalf("verify with only the current file: %+v %v", rep, err)
	}
}

// A crash after the retention entry and before the removal: the log verifies with the files
// still there, and the next Open removes them.
func TestRetentionCrashBetweenEntryAndRemovalIsHarmless(t *testing.T) {
	dir := t.TempDir()
	opts := []Option{WithMaxFileBytes(4096), WithMaxTotalBytes(4 * 4096), WithSyncInterval(0), WithMaxAge(0)}
	crashed := false
	l := openLog(t, dir, append(opts, withRemove(func(string) error { crashed = true; return errors.New("the process died") }))...)
	for i := 1; !crashed; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs := entriesOf(t, dir, EventRetention)
	if len(recs) != 1 || !exists(filepath.Join(dir, recs[0].Retention.Files[0].Name)) {
		t.Fatalf("after the crash: retention entries %+v", recs)
	}
	rep, err := Verify(dir)
	if err != nil || rep.FirstSeq != 1 || rep.RemovedBy != nil || rep.UnrecordedRemoval {
		t.Fatalf("verify with the recorded files still present: %+v %v", rep, err)
	}
	l = openLog(t, dir, opts...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range recs[0].Retention.Files {
		if exists(filepath.Join(dir, f.Name)) {
			t.Fatalf("%s is still there after the next Open", f.Name)
		}
	}
	rep, err = Verify(dir)
	if err != nil || rep.RemovedBy == nil || rep.FirstSeq <= 1 || totalSize(t, dir) > 4*4096 {
		t.Fatalf("verify after the next Open removed the files: %+v %v", rep, err)
	}
}

// A failed removal is retried without recording the same files again.
func TestRetentionRetriesAFailedRemovalWithoutANewEntry(t *testing.T) {
	dir := t.TempDir()
	failures := 0
	l := openLog(t, dir, WithMaxFileBytes(4096), WithMaxTotalBytes(3*4096), WithSyncInterval(0), WithMaxAge(0),
		withRemove(func(path string) error {
			if failures < 1 {
				failures++
				return os.ErrPermission
			}
			return os.Remove(path)
		}))
	var n int
	for n = 1; failures == 0; n++ {
		if err := l.Append(entry(n)); err != nil {
			t.Fatal(err)
		}
	}
	failedAt := len(entriesOf(t, dir, EventRetention))
	for nums, _ := listFiles(dir); ; n++ { // on to the next rotation, which retries
		if err := l.Append(entry(n)); err != nil {
			t.Fatal(err)
		}
		if now, _ := listFiles(dir); now[len(now)-1] > nums[len(nums)-1] {
			break
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]int{}
	for _, e := range entriesOf(t, dir, EventRetention) {
		for _, f := range e.Retention.Files {
			recorded[f.Name]++
		}
	}
	for name, n := range recorded {
		if n != 1 || exists(filepath.Join(dir, name)) {
			t.Fatalf("%s recorded %d times, present %v: want once, and removed", name, n, exists(filepath.Join(dir, name)))
		}
	}
	if failedAt != 1 || len(recorded) < 2 {
		t.Fatalf("retention entries when the removal failed: %d; files recorded: %v", failedAt, recorded)
	}
	if rep, err := Verify(dir); err != nil || rep.RemovedBy == nil {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func TestRetentionAnchorIsChecked(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 200, WithMaxFileBytes(4096), WithMaxTotalBytes(3*4096))
	nums, _ := listFiles(dir)
	firstKept := filepath.Join(dir, fileName(nums[0]))
	orig := readFile(t, firstKept)

	// Lines removed from the start of the first file kept: the rest chains, but not from the
	// anchor the retention entry recorded.
	writeFile(t, firstKept, orig[2:])
	rep, err := Verify(dir)
	var ce *ChainError
	if !errors.As(err, &ce) || ce.File != fileName(nums[0]) || ce.Line != 1 || !strings.Contains(ce.Reason, "as recorded by the retention entry") {
		t.Fatalf("first kept lines removed: %v", err)
	}
	if rep.Segments[0].Entries != 0 || rep.RemovedBy == nil {
		t.Fatalf("report with a wrong anchor: %+v", rep)
	}

	// The first file kept removed by hand as well: allowed, but reported as unrecorded.
	writeFile(t, firstKept, orig)
	if err := os.Remove(firstKept); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir)
	if err != nil || !rep.UnrecordedRemoval || rep.RemovedBy != nil {
		t.Fatalf("a file removed by hand after retention: %+v %v", rep, err)
	}
}

func TestRetentionCheckRunsAtMostOnceAMinute(t *testing.T) {
	c := newClock(t0)
	// No background goroutine: the test makes every check itself.
	l := openLog(t, t.TempDir(), WithClock(c.now), WithSyncInterval(0), WithMaxAge(0))
	for _, step := range []struct {
		at   time.Duration
		runs bool
	}{{30 * time.Second, false}, {61 * time.Second, true}, {90 * time.Second, false}, {2*time.Minute + time.Second, true}, {time.Minute, true}} {
		c.set(t0.Add(step.at))
		before := l.lastRetain
		if err := l.retainIfDue(); err != nil {
			t.Fatal(err)
		}
		if ran := !l.lastRetain.Equal(before); ran != step.runs {
			t.Fatalf("at +%s the check ran: %v, want %v (last check at %s)", step.at, ran, step.runs, before.Sub(t0))
		}
	}
}

// The background goroutine removes aged files with no append to trigger it.
func TestRetentionRunsOnASchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		l, err := Open(dir, WithMaxFileBytes(4096), WithMaxAge(time.Hour), WithSyncInterval(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // before the bubble ends, also when the test fails
		for i := 1; i <= 60; i++ {
			if err := l.Append(entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		nums, _ := listFiles(dir)
		time.Sleep(time.Hour + 2*time.Minute)
		synctest.Wait()
		// The retention entry may itself start a file; then the last one before it ages too.
		after, _ := listFiles(dir)
		if len(nums) < 3 || len(after) != 1 || after[0] < nums[len(nums)-1] {
			t.Fatalf("files before %v, after an hour and two minutes %v: want only the current one", nums, after)
		}
		if recs := entriesOf(t, dir, EventRetention); len(recs) == 0 || recs[0].Retention.Files[0].Why != RetainedForAge {
			t.Fatalf("retention entries: %+v", recs)
		}
	})
}
