// Package retry holds the one retry schedule of the node: exponential backoff with jitter.
// The node's redials of needed peers and its durable deliveries, discovery's bootstrap rounds
// and record publishes, the API's webhook posts and workflow steps all wait by it, each with
// its own bounds.
// It imports nothing of this module, so that any package can use it.
package retry

import "time"

// Backoff is an exponential backoff with "equal jitter". After the n-th consecutive failure
// the step is Min doubled n-1 times, capped at Max; the wait is drawn uniformly from the
// upper half of the step, [step/2, step]. Half of every wait is fixed, so waits never collapse
// to zero, and half is random, so that peers that failed together do not retry together.
//
// Callers keep 0 < Min <= Max (every caller validates its configuration); a step that is
// not positive is no wait at all.
type Backoff struct {
	// Min is the first step; Max caps every step.
	Min, Max time.Duration
	// AtLeastMin raises the low end of the draw to Min, so that no wait is shorter than Min
	// (without it the first wait lies in [Min/2, Min]).
	AtLeastMin bool
}

// Delay returns the wait after the attempt-th consecutive failure (an attempt below 1 counts
// as 1). draw returns a uniform value in [0, n) for n >= 1: math/rand/v2's Int64N, a seeded
// *rand.Rand's Int64N, or a fixed draw in tests. Delay calls it exactly once, with the width
// of the range plus one. Large attempt numbers do not overflow: the step stays at Max.
func (b Backoff) Delay(attempt int, draw func(n int64) int64) time.Duration {
	step := b.Max
	// Min<<shift <= Max exactly when Min <= Max>>shift, which cannot overflow.
	if shift := max(attempt-1, 0); shift < 63 && b.Min <= b.Max>>shift {
		step = b.Min << shift
	}
	if step <= 0 {
		return 0
	}
	lo := step / 2
	if b.AtLeastMin {
		lo = min(max(lo, b.Min), step)
	}
	return lo + time.Duration(draw(int64(step-lo)+1))
}
