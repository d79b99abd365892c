package coord

import (
	"fmt"
	"time"
)

// Defaults of a Coordinator (Config), each overridable by an Option.
const (
	// DefaultAttemptTimeout bounds one request to one agent: its TTL and how long the
	// coordinator waits for the answer before it counts a TIMEOUT (and fails over).
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultFailureThreshold is how many consecutive failures open an agent's circuit.
	DefaultFailureThreshold = 5
	// DefaultOpenFor is how long an open circuit fails calls at once before it lets a probe
	// through (half-open).
	DefaultOpenFor = 30 * time.Second
	// DefaultProbes is how many calls a half-open circuit lets through at once; the first of
	// them to succeed closes it, any failure opens it again.
	DefaultProbes = 1
	// DefaultMaxBreakers bounds the breakers kept: one per agent called recently. When full,
	// an idle breaker (untouched for DefaultBreakerIdle) goes first, else the least recently
	// used one.
	DefaultMaxBreakers = 1024
	// DefaultBreakerIdle is when a breaker counts as idle and may be evicted.
	DefaultBreakerIdle = 10 * time.Minute
	// DefaultMaxFanout bounds a scatter's targets (and the candidates any-of and fallback
	// try): one goroutine and one in-flight request per target.
	DefaultMaxFanout = 64
	// MaxFanoutLimit is the largest MaxFanout an Option may set.
	MaxFanoutLimit = 1024
	// DefaultMaxSteps bounds a pipeline's steps.
	DefaultMaxSteps = 32
	// DefaultTransitionLog is how many breaker transitions the coordinator remembers for
	// Transitions (the event stream reads them from there).
	DefaultTransitionLog = 256
)

// Config is a Coordinator's configuration; Option values change it from the defaults above.
type Config struct {
	AttemptTimeout   time.Duration
	FailureThreshold int
	OpenFor          time.Duration
	Probes           int
	MaxBreakers      int
	BreakerIdle      time.Duration
	MaxFanout        int
	MaxSteps         int
	// Candidates, when set, replaces discovery as the source of an any-of's or a
	// capability target's candidates (a static directory, a test); nil asks the node's DHT
	// (node.FindByCapability).
	Candidates CandidateSource
	// Now is the clock of the breakers (time.Now when nil).
	Now func() time.Time
	// Rand draws a float in [0,1) for any-of's weighted choice and in [0, n) for jitter
	// (math/rand/v2 when nil).
	Rand Rand
}

// Rand is the randomness of a coordinator: any-of's weighted choice and retry jitter.
type Rand interface {
	Float64() float64
	Int64N(n int64) int64
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		AttemptTimeout:   DefaultAttemptTimeout,
		FailureThreshold: DefaultFailureThreshold,
		OpenFor:          DefaultOpenFor,
		Probes:           DefaultProbes,
		MaxBreakers:      DefaultMaxBreakers,
		BreakerIdle:      DefaultBreakerIdle,
		MaxFanout:        DefaultMaxFanout,
		MaxSteps:         DefaultMaxSteps,
	}
}

// Validate checks every bound and names the field and its range.
func (c Config) Validate() error {
	switch {
	case c.AttemptTimeout < time.Second:
		return fmt.Errorf("coord: AttemptTimeout %s: want at least 1s (a TTL is whole seconds)", c.AttemptTimeout)
	case c.FailureThreshold < 1 || c.FailureThreshold > 1000:
		return fmt.Errorf("coord: FailureThreshold %d: want 1..1000", c.FailureThreshold)
	case c.OpenFor <= 0 || c.OpenFor > 24*time.Hour:
		return fmt.Errorf("coord: OpenFor %s: want more than 0 and at most 24h", c.OpenFor)
	case c.Probes < 1 || c.Probes > 100:
		return fmt.Errorf("coord: Probes %d: want 1..100", c.Probes)
	case c.MaxBreakers < 1 || c.MaxBreakers > 1<<20:
		return fmt.Errorf("coord: MaxBreakers %d: want 1..%d", c.MaxBreakers, 1<<20)
	case c.BreakerIdle <= 0:
		return fmt.Errorf("coord: BreakerIdle %s: want more than 0", c.BreakerIdle)
	case c.MaxFanout < 1 || c.MaxFanout > MaxFanoutLimit:
		return fmt.Errorf("coord: MaxFanout %d: want 1..%d", c.MaxFanout, MaxFanoutLimit)
	case c.MaxSteps < 1 || c.MaxSteps > 1000:
		return fmt.Errorf("coord: MaxSteps %d: want 1..1000", c.MaxSteps)
	}
	return nil
}

// Option changes a Coordinator's Config.
type Option func(*Config)

// WithAttemptTimeout sets how long one request to one agent may take (default 10s, at least 1s).
func WithAttemptTimeout(d time.Duration) Option { return func(c *Config) { c.AttemptTimeout = d } }

// WithBreaker sets the circuit breakers' thresholds: consecutive failures that open a circuit
// (default 5), how long it stays open (default 30s) and how many probes a half-open circuit
// lets through (default 1). A zero value keeps the default.
func WithBreaker(failures int, openFor time.Duration, probes int) Option {
	return func(c *Config) {
		if failures != 0 {
			c.FailureThreshold = failures
		}
		if openFor != 0 {
			c.OpenFor = openFor
		}
		if probes != 0 {
			c.Probes = probes
		}
	}
}

// WithMaxBreakers bounds the breakers kept (default 1024) and sets when one is idle (default
// 10m); a zero value keeps the default.
func WithMaxBreakers(n int, idle time.Duration) Option {
	return func(c *Config) {
		if n != 0 {
			c.MaxBreakers = n
		}
		if idle != 0 {
			c.BreakerIdle = idle
		}
	}
}

// WithMaxFanout bounds a scatter's targets and the candidates tried (default 64, at most 1024).
func WithMaxFanout(n int) Option { return func(c *Config) { c.MaxFanout = n } }

// WithMaxSteps bounds a pipeline's steps (default 32).
func WithMaxSteps(n int) Option { return func(c *Config) { c.MaxSteps = n } }

// WithCandidates replaces discovery as the source of candidates for a capability (default:
// the node's DHT).
func WithCandidates(src CandidateSource) Option { return func(c *Config) { c.Candidates = src } }

// WithClock sets the breakers' clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(c *Config) { c.Now = now } }

// WithRand sets the randomness of any-of's choice and of retry jitter (default math/rand/v2).
func WithRand(r Rand) Option { return func(c *Config) { c.Rand = r } }
