package protocol

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The replay window's heaps push and pop without container/heap (which boxes every item):
// over random pushes and pops they hand items back in the order of their expiries.
func TestExpiryHeap_PopsInExpiryOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 11))
	var h expiryHeap
	var want []int64
	for range 5000 {
		if len(want) == 0 || r.IntN(3) > 0 {
			exp := r.Int64N(1000)
			h.push(expiryItem{exp: exp})
			want = append(want, exp)
			continue
		}
		slices.Sort(want)
		if got := h.pop().exp; got != want[0] {
			t.Fatalf("popped expiry %d, want the earliest, %d", got, want[0])
		}
		want = want[1:]
	}
	if len(h) != len(want) {
		t.Fatalf("%d items left, want %d", len(h), len(want))
	}
}
