package retry

import (
	"slices"
	"testing"
)

// A seeded Jitter repeats its draws; another seed or another stream draws others; seed 0 (and
// a nil Jitter) draws from the global source.
func TestJitter_SeededDrawsRepeat(t *testing.T) {
	draws := func(j *Jitter) []int64 {
		out := make([]int64, 8)
		for i := range out {
			out[i] = j.Int64N(1 << 40)
		}
		order := []int64{0, 1, 2, 3, 4, 5, 6, 7}
		j.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		return append(out, order...)
	}
	a, b := draws(NewJitter(7, 1)), draws(NewJitter(7, 1))
	if !slices.Equal(a, b) {
		t.Fatalf("one seed and stream drew %v, then %v", a, b)
	}
	if slices.Equal(a, draws(NewJitter(8, 1))) || slices.Equal(a, draws(NewJitter(7, 2))) {
		t.Fatal("another seed or stream drew the same")
	}
	if slices.Equal(draws(NewJitter(0, 1)), draws(NewJitter(0, 1))) || slices.Equal(draws(nil), draws(nil)) {
		t.Fatal("seed 0 and nil must draw from the global source, not repeat")
	}
}
