package audit

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults and fixed limits, in one place.
const (
	// DefaultMaxFileBytes is the size at which the log rotates to a new file: 64 MiB, small
	// enough to open in an editor and to verify in well under a second.
	DefaultMaxFileBytes = 64 << 20
	// DefaultSyncInterval is how often buffered appends are fsynced: 1 s. Every Append is
	// written to the file (one write(2)) before it returns, so a process crash loses nothing;
	// a power loss can lose at most this much.
	DefaultSyncInterval = time.Second
	// MaxRefusalReasonBytes bounds Reason in an entry built by Refusal: 512 bytes, enough for
	// any error text of ours, too little to smuggle a document into the log.
	MaxRefusalReasonBytes = 512
)

// Option configures Open.
type Option func(*config) error

type config struct {
	maxFileBytes int64
	syncInterval time.Duration
	omitPayloads bool
	now          func() time.Time
	log          *slog.Logger
}

func defaults() config {
	return config{
		maxFileBytes: DefaultMaxFileBytes,
		syncInterval: DefaultSyncInterval,
		now:          time.Now,
		log:          slog.New(slog.DiscardHandler),
	}
}

func (c *config) validate() error {
	switch {
	case c.maxFileBytes < 4096:
		return fmt.Errorf("audit: MaxFileBytes is %d; it must be at least 4096", c.maxFileBytes)
	case c.syncInterval < 0 || c.syncInterval > time.Minute:
		return fmt.Errorf("audit: SyncInterval is %s; it must be in [0, 1m] (0 fsyncs every append)", c.syncInterval)
	}
	return nil
}

// WithMaxFileBytes sets the rotation size (default DefaultMaxFileBytes). A single entry
// larger than it gets a file of its own.
func WithMaxFileBytes(n int64) Option {
	return func(c *config) error { c.maxFileBytes = n; return nil }
}

// WithSyncInterval sets how often appends are fsynced (default DefaultSyncInterval); 0
// fsyncs inside every Append, so an entry is on disk when Append returns.
func WithSyncInterval(d time.Duration) Option {
	return func(c *config) error { c.syncInterval = d; return nil }
}

// WithOmitPayloads leaves payloads out of the log and records their SHA-256 instead
// (default false: payloads are logged verbatim).
func WithOmitPayloads(omit bool) Option {
	return func(c *config) error { c.omitPayloads = omit; return nil }
}

// WithClock sets the clock that stamps entries whose Time is zero (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("audit: WithClock: the clock must not be nil")
		}
		c.now = now
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("audit: WithLogger: the logger must not be nil")
		}
		c.log = l
		return nil
	}
}
