package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// top draws the top of the range (the longest wait), bottom its bottom (the shortest).
func top(n int64) int64  { return n - 1 }
func bottom(int64) int64 { return 0 }

func TestDelay_DoublesFromMinToMax(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 30 * time.Second}
	for attempt, want := range map[int]time.Duration{
		-3: time.Second, 0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		5: 16 * time.Second, 6: 30 * time.Second, 7: 30 * time.Second, 100: 30 * time.Second,
	} {
		if got := b.Delay(attempt, top); got != want {
			t.Errorf("attempt %d: longest wait %s, want the step %s", attempt, got, want)
		}
		if got := b.Delay(attempt, bottom); got != want/2 {
			t.Errorf("attempt %d: shortest wait %s, want half the step %s", attempt, got, want/2)
		}
	}
}

func TestDelay_JitterCoversTheUpperHalfOfTheStep(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 1; attempt <= 12; attempt++ {
		step := min(b.Min<<(attempt-1), b.Max)
		lowest, highest := time.Duration(math.MaxInt64), time.Duration(0)
		for range 2000 {
			var asked int64
			d := b.Delay(attempt, func(n int64) int64 { asked = n; return r.Int64N(n) })
			if want := int64(step-step/2) + 1; asked != want {
				t.Fatalf("attempt %d: drew from [0, %d), want [0, %d)", attempt, asked, want)
			}
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: %s outside [%s, %s]", attempt, d, step/2, step)
			}
			lowest, highest = min(lowest, d), max(highest, d)
		}
		// 2000 uniform draws reach both ends of the range to within a tenth of its width.
		if width := step - step/2; lowest > step/2+width/10 || highest < step-width/10 {
			t.Fatalf("attempt %d: draws span [%s, %s] of [%s, %s]", attempt, lowest, highest, step/2, step)
		}
	}
}

func TestDelay_AtLeastMin(t *testing.T) {
	b := Backoff{Min: time.Second, Max: time.Minute, AtLeastMin: true}
	if d := b.Delay(1, bottom); d != time.Second {
		t.Fatalf("first wait %s, want exactly Min", d)
	}
	for _, draw := range []func(int64) int64{bottom, top} {
		for attempt := 1; attempt < 200; attempt++ {
			if d := b.Delay(attempt, draw); d < b.Min || d > b.Max {
				t.Fatalf("attempt %d: %s outside [%s, %s]", attempt, d, b.Min, b.Max)
			}
		}
	}
	// A cap below twice Min: the draw starts at Min, not at half the cap.
	b = Backoff{Min: time.Second, Max: 1500 * time.Millisecond, AtLeastMin: true}
	if d := b.Delay(5, bottom); d != time.Second {
		t.Fatalf("capped step: shortest wait %s, want Min", d)
	}
	if d := (Backoff{Min: 2 * time.Second, Max: time.Second, AtLeastMin: true}).Delay(1, top); d != time.Second {
		t.Fatalf("Min above Max: %s, want Max", d)
	}
}

// No attempt number, however large, overflows the step: it grows, never shrinks, and stays
// at Max once it gets there, even with a Max near the largest Duration.
func TestDelay_LargeAttemptsDoNotOverflow(t *testing.T) {
	for _, b := range []Backoff{
		{Min: time.Second, Max: 24 * time.Hour},
		{Min: time.Nanosecond, Max: math.MaxInt64},
		{Min: math.MaxInt64 / 3, Max: math.MaxInt64, AtLeastMin: true},
	} {
		attempts := []int{}
		for a := 1; a <= 200; a++ {
			attempts = append(attempts, a)
		}
		attempts = append(attempts, 1<<20, math.MaxInt32, math.MaxInt)
		prev := time.Duration(0)
		for _, a := range attempts {
			step := b.Delay(a, top)
			if step < prev || step > b.Max {
				t.Fatalf("%+v attempt %d: step %s after %s, cap %s", b, a, step, prev, b.Max)
			}
			if a >= 64 && step != b.Max {
				t.Fatalf("%+v attempt %d: step %s, want the cap %s", b, a, step, b.Max)
			}
			if d := b.Delay(a, bottom); d < step/2 || d > step {
				t.Fatalf("%+v attempt %d: shortest wait %s outside [%s, %s]", b, a, d, step/2, step)
			}
			prev = step
		}
	}
	if d := (Backoff{Min: time.Second, Max: 24 * time.Hour}).Delay(1<<20, top); d != 24*time.Hour {
		t.Fatalf("a very late attempt waits the cap; got %s", d)
	}
}

func TestDelay_NoPositiveStepIsNoWait(t *testing.T) {
	for _, b := range []Backoff{{}, {Min: -time.Second, Max: time.Second}, {Min: time.Second, Max: -time.Second}} {
		if d := b.Delay(3, func(int64) int64 { t.Fatal("drew for an empty range"); return 0 }); d != 0 {
			t.Fatalf("%+v: %s, want 0", b, d)
		}
	}
}

// The jitter comes only from the draw: the same seed gives the same waits.
func TestDelay_DeterminedByTheDraw(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 30 * time.Second}
	r1, r2 := rand.New(rand.NewPCG(7, 7)), rand.New(rand.NewPCG(7, 7))
	for attempt := 1; attempt < 10; attempt++ {
		if b.Delay(attempt, r1.Int64N) != b.Delay(attempt, r2.Int64N) {
			t.Fatal("the wait is not determined by the draw")
		}
	}
}
