package audit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTailFollowsAppendsAndRotation(t *testing.T) {
	dir := t.TempDir() // no log yet: Tail waits for the first file
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Entry, 200)
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, dir, 0, true, func(e Entry) error { got <- e; return nil })
	}()
	l := openLog(t, dir, WithMaxFileBytes(4096))
	const n = 120
	deadline := time.After(30 * time.Second)
	for i := 1; i <= n; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
		if i%40 == 0 { // let the follower catch up mid-file, then keep writing
			waitFor(t, got, uint64(i-39), uint64(i), deadline)
		}
	}
	if nums, _ := listFiles(dir); len(nums) < 3 {
		t.Fatalf("only %d files: the test did not rotate", len(nums))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("tail returned %v, want context.Canceled", err)
	}
}

func waitFor(t *testing.T, got <-chan Entry, from, to uint64, deadline <-chan time.Time) {
	t.Helper()
	for want := from; want <= to; want++ {
		select {
		case e := <-got:
			if e.Seq != want {
				t.Fatalf("tail gave seq %d, want %d", e.Seq, want)
			}
		case <-deadline:
			t.Fatalf("tail did not deliver seq %d in time", want)
		}
	}
}

func TestTailFromWithoutFollow(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, 100, WithMaxFileBytes(4096))
	var seqs []uint64
	if err := Tail(context.Background(), dir, 70, false, func(e Entry) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 31 || seqs[0] != 70 || seqs[30] != 100 {
		t.Fatalf("tail from 70: %d entries, %v..", len(seqs), seqs[:min(3, len(seqs))])
	}
	stop := errors.New("stop")
	n := 0
	err := Tail(context.Background(), dir, 0, false, func(Entry) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Fatalf("fn error: %v after %d", err, n)
	}
	if err := Tail(context.Background(), t.TempDir(), 0, false, func(Entry) error { return nil }); err != nil {
		t.Fatalf("tail of an empty dir: %v", err)
	}
}
