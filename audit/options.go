package audit

import (
	"fmt"
	"log/slog"
	"os"
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
	// DefaultMaxTotalBytes bounds the disk the log's files take together: 1 GiB, 16 files of
	// the default size. Over it, retention removes the oldest whole files (never the current
	// one), so a peer that makes the node log a lot cannot fill the disk.
	DefaultMaxTotalBytes = 1 << 30
	// DefaultMaxAge is how long a rotated file is kept after its newest entry: 90 days, a
	// quarter, long enough for a monthly review with room to spare.
	DefaultMaxAge = 90 * 24 * time.Hour
	// MaxRefusalReasonBytes bounds Reason in an entry built by Refusal: 512 bytes, enough for
	// any error text of ours, too little to smuggle a document into the log.
	MaxRefusalReasonBytes = 512

	// minMaxAge is the smallest MaxAge other than 0: 1 h, so that a unit mistake
	// (WithMaxAge(90), 90 ns) is refused rather than emptying the log.
	minMaxAge = time.Hour
	// retentionEvery is how often the background goroutine checks retention: at most once a
	// minute by the injected clock. Rotation and Open check as well.
	retentionEvery = time.Minute
	// maxRemovePerPass bounds the files one retention entry lists: 1000, about 250 KB of
	// JSON; more (after MaxTotalBytes or MaxFileBytes was lowered) go in the next passes.
	maxRemovePerPass = 1000
	// maxScratch is the largest line buffer the log keeps for its next entry: 256 KiB. An
	// entry with a larger payload (a 16 MiB message) gets a buffer of its own, which goes
	// with it, rather than one the log would hold for good.
	maxScratch = 256 << 10
)

// Option configures Open.
type Option func(*config) error

type config struct {
	maxFileBytes  int64
	maxTotalBytes int64
	maxAge        time.Duration
	syncInterval  time.Duration
	omitPayloads  bool
	now           func() time.Time
	log           *slog.Logger
	remove        func(path string) error // how retention removes a file; tests observe it
}

func defaults() config {
	return config{
		maxFileBytes:  DefaultMaxFileBytes,
		maxTotalBytes: DefaultMaxTotalBytes,
		maxAge:        DefaultMaxAge,
		syncInterval:  DefaultSyncInterval,
		now:           time.Now,
		log:           slog.New(slog.DiscardHandler),
		remove:        os.Remove,
	}
}

func (c *config) validate() error {
	switch {
	case c.maxFileBytes < 4096:
		return fmt.Errorf("audit: MaxFileBytes is %d; it must be at least 4096", c.maxFileBytes)
	case c.maxTotalBytes < 2*c.maxFileBytes:
		return fmt.Errorf("audit: MaxTotalBytes is %d; it must be at least 2×MaxFileBytes (%d): raise MaxTotalBytes or lower MaxFileBytes",
			c.maxTotalBytes, 2*c.maxFileBytes)
	case c.maxAge < 0 || (c.maxAge > 0 && c.maxAge < minMaxAge):
		return fmt.Errorf("audit: MaxAge is %s; it must be 0 (keep files forever) or at least %s", c.maxAge, minMaxAge)
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

// WithMaxTotalBytes bounds the total size of the log's files (default DefaultMaxTotalBytes;
// at least 2×MaxFileBytes). Over it, retention removes the oldest rotated files, recording
// them first in an EventRetention entry.
func WithMaxTotalBytes(n int64) Option {
	return func(c *config) error { c.maxTotalBytes = n; return nil }
}

// WithMaxAge sets how long a rotated file is kept after its newest entry (default
// DefaultMaxAge; 0 keeps files forever; otherwise at least 1 h). Older files are removed by
// retention, recorded first in an EventRetention entry.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) error { c.maxAge = d; return nil }
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

// WithClock sets the clock that stamps entries whose Time is zero and that retention
// measures MaxAge and its schedule with (default time.Now).
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

// withRemove replaces how retention removes a file (default os.Remove); for tests, which
// check what the log holds at that moment or simulate a crash.
func withRemove(remove func(path string) error) Option {
	return func(c *config) error { c.remove = remove; return nil }
}
