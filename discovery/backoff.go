package discovery

import (
	"math/rand/v2"
	"time"
)

// backoff returns the wait before bootstrap round attempt+1 after attempt failed rounds
// (attempt >= 1): exponential from base, capped at max, with "equal jitter": half the step is
// fixed and half is drawn from r, so waits never collapse to zero and nodes that failed
// together do not retry together.
func backoff(attempt int, base, max time.Duration, r *rand.Rand) time.Duration {
	step := base
	for i := 1; i < attempt && step < max; i++ {
		step *= 2
	}
	if step > max {
		step = max
	}
	half := step / 2
	if half <= 0 {
		return step
	}
	return half + time.Duration(r.Int64N(int64(step-half)+1))
}
