package coord

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
)

// Defaults of a RetryPolicy whose fields are zero.
const (
	// DefaultRetryMin is the first backoff step.
	DefaultRetryMin = 200 * time.Millisecond
	// DefaultRetryMax caps every backoff step (and a RetryAfter honoured).
	DefaultRetryMax = 5 * time.Second
	// MaxAttempts bounds RetryPolicy.Attempts.
	MaxAttempts = 20
)

// RetryPolicy is a per-call retry policy (ACP v2 "Retry with Backoff"). The zero policy is
// one attempt, no retry.
type RetryPolicy struct {
	// Attempts is how many times one agent is asked in all (0 or 1: once).
	Attempts int `json:"attempts,omitempty"`
	// Min and Max bound the exponential backoff between attempts (defaults 200ms and 5s): the
	// n-th retry waits Min doubled n-1 times, capped at Max, drawn from the upper half of
	// that step (internal/retry's equal jitter) unless NoJitter.
	Min time.Duration `json:"min,omitempty"`
	Max time.Duration `json:"max,omitempty"`
	// NoJitter waits the whole step, with no random part.
	NoJitter bool `json:"no_jitter,omitempty"`
	// Codes lists the error codes that are retried; empty means the registry's advice
	// (protocol.Code.Retryable: RATE_LIMITED, TIMEOUT, INTERNAL_ERROR, AGENT_NOT_FOUND).
	Codes []protocol.Code `json:"codes,omitempty"`
}

// Validate checks the policy's bounds.
func (p RetryPolicy) Validate() error {
	switch {
	case p.Attempts < 0 || p.Attempts > MaxAttempts:
		return protocol.Errorf(protocol.CodePayloadInvalid, "retry attempts %d: want 0..%d", p.Attempts, MaxAttempts)
	case p.Min < 0 || p.Max < 0:
		return protocol.Errorf(protocol.CodePayloadInvalid, "retry backoff min %s, max %s: want positive durations (or 0 for the defaults)", p.Min, p.Max)
	case p.Min > 0 && p.Max > 0 && p.Min > p.Max:
		return protocol.Errorf(protocol.CodePayloadInvalid, "retry backoff min %s exceeds max %s", p.Min, p.Max)
	}
	for _, c := range p.Codes {
		if _, ok := protocol.Lookup(c); !ok {
			return protocol.Errorf(protocol.CodePayloadInvalid, "retry code %q is not in the error registry (see docs/protocol.md)", c)
		}
	}
	return nil
}

func (p RetryPolicy) attempts() int { return max(p.Attempts, 1) }

func (p RetryPolicy) backoff() retry.Backoff {
	b := retry.Backoff{Min: p.Min, Max: p.Max}
	if b.Min <= 0 {
		b.Min = DefaultRetryMin
	}
	if b.Max <= 0 {
		b.Max = max(DefaultRetryMax, b.Min)
	}
	return b
}

// retries reports whether err is worth another attempt under the policy.
func (p RetryPolicy) retries(err error) bool {
	c := protocol.CodeOf(err)
	if errors.Is(err, ErrCircuitOpen) {
		return false // the breaker decides when this agent is asked again
	}
	if len(p.Codes) > 0 {
		return slices.Contains(p.Codes, c)
	}
	return c.Retryable()
}

// delay is the wait before attempt+1, after the attempt-th failure with err: the backoff,
// or the RetryAfter the agent asked for if longer (capped at Max).
func (p RetryPolicy) delay(attempt int, err error, r Rand) time.Duration {
	b := p.backoff()
	draw := r.Int64N
	if p.NoJitter {
		draw = func(n int64) int64 { return n - 1 }
	}
	d := b.Delay(attempt, draw)
	var e *protocol.Error
	if errors.As(err, &e) && e.RetryAfter > d {
		d = min(e.RetryAfter, b.Max)
	}
	return d
}

// String describes the policy with its defaults filled in.
func (p RetryPolicy) String() string {
	return fmt.Sprintf("%d attempts, backoff %s..%s", p.attempts(), p.backoff().Min, p.backoff().Max)
}
