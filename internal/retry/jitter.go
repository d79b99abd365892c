package retry

import (
	"math/rand/v2"
	"sync"
)

// Jitter is the random source of a node's spreading draws (a backoff's jitter, the first
// stretched beat, the order of peers it hands out), safe for concurrent use. Seeded, its
// draws repeat from run to run (the simulator gives each node a seed of its scenario's); a nil
// Jitter, or one of seed 0, draws from math/rand/v2's global source.
type Jitter struct {
	mu sync.Mutex
	r  *rand.Rand // nil: the global source
}

// NewJitter returns the source of seed and stream (one node keeps a stream per part, so that
// its parts' draws do not interleave); seed 0 gives the global source.
func NewJitter(seed, stream uint64) *Jitter {
	if seed == 0 {
		return &Jitter{}
	}
	return &Jitter{r: rand.New(rand.NewPCG(seed, stream))}
}

// Int64N returns a uniform value in [0, n); n must be positive. It is Backoff.Delay's draw.
func (j *Jitter) Int64N(n int64) int64 {
	if j == nil || j.r == nil {
		return rand.Int64N(n)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.r.Int64N(n)
}

// Shuffle shuffles n elements with swap, as math/rand/v2's Shuffle.
func (j *Jitter) Shuffle(n int, swap func(i, k int)) {
	if j == nil || j.r == nil {
		rand.Shuffle(n, swap)
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.r.Shuffle(n, swap)
}
