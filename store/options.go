package store

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults, in one place.
const (
	// DefaultMaxRecipientBytes bounds the raw bytes queued for one recipient: 64 MiB, four
	// maximum-size (16 MiB) direct messages, or 65,536 messages of 1 KiB.
	DefaultMaxRecipientBytes = 64 << 20
	// DefaultMaxTotalBytes bounds the raw bytes of the whole outbox: 1 GiB, so that a node
	// cut off from the mesh fills at most that much disk.
	DefaultMaxTotalBytes = 1 << 30
	// DefaultMaxInboxBytes bounds the raw bytes of accepted messages the local agent has not
	// yet taken: 256 MiB. Beyond it Accept refuses with RATE_LIMITED and the sender retries.
	DefaultMaxInboxBytes = 256 << 20
	// DefaultMaxSenderInboxBytes bounds the raw inbox bytes of one sending peer: 32 MiB, one
	// eighth of the default inbox and two maximum-size (16 MiB) messages, so that one peer
	// filling its share leaves seven eighths of the inbox to everyone else. When the inbox
	// bound is set below it and this one is not set, the share is the whole inbox.
	DefaultMaxSenderInboxBytes = 32 << 20
	// DefaultBatchDelay is the longest writes queued behind a commit of a busy store wait
	// for more company, counted from the arrival of the first: 2 ms, below one fsync on most
	// disks. A write that finds no commit in flight, or a store that is not busy, never
	// waits (see commit.go).
	DefaultBatchDelay = 2 * time.Millisecond
	// DefaultBatchSize is the most writes one commit carries: 1,000 (bbolt's default for
	// DB.Batch).
	DefaultBatchSize = 1000
	// DefaultLockTimeout is how long Open waits for another process to release the file:
	// 2 s, then it fails with a message naming the file.
	DefaultLockTimeout = 2 * time.Second
	// MaxPurgePerCall is the most seen and gossip ids one PurgeSeen call deletes: 10,000 keep
	// its commit to a few MiB of pages and tens of milliseconds, so a backlog (a node that was
	// down for a day) is worked off over several calls instead of stalling other writers.
	MaxPurgePerCall = 10_000
)

// Option configures Open.
type Option func(*config) error

type config struct {
	noSync            bool
	maxRecipientBytes int64
	maxTotalBytes     int64
	maxInboxBytes     int64
	batchDelay        time.Duration
	batchSize         int
	lazyDelay         time.Duration // how long a lazy write waits for company (commit.go)
	lockTimeout       time.Duration
	maxSenderBytes    int64
	senderSet         bool // WithMaxSenderInboxBytes was given
	now               func() time.Time
	log               *slog.Logger
}

func defaults() config {
	return config{
		maxRecipientBytes: DefaultMaxRecipientBytes,
		maxTotalBytes:     DefaultMaxTotalBytes,
		maxInboxBytes:     DefaultMaxInboxBytes,
		batchDelay:        DefaultBatchDelay,
		batchSize:         DefaultBatchSize,
		lazyDelay:         DefaultLazyDelay,
		lockTimeout:       DefaultLockTimeout,
		now:               time.Now,
		log:               slog.New(slog.DiscardHandler),
	}
}

// configure applies opts over the defaults and validates the result.
func configure(opts []Option) (config, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.validate()
}

// validate checks the bounds and resolves the defaults that depend on other settings.
func (c *config) validate() error {
	switch {
	case c.maxRecipientBytes <= 0:
		return fmt.Errorf("store: MaxRecipientBytes is %d; it must be positive", c.maxRecipientBytes)
	case c.maxTotalBytes < c.maxRecipientBytes:
		return fmt.Errorf("store: MaxTotalBytes (%d) must be at least MaxRecipientBytes (%d)", c.maxTotalBytes, c.maxRecipientBytes)
	case c.maxInboxBytes <= 0:
		return fmt.Errorf("store: MaxInboxBytes is %d; it must be positive", c.maxInboxBytes)
	case c.senderSet && (c.maxSenderBytes <= 0 || c.maxSenderBytes > c.maxInboxBytes):
		return fmt.Errorf("store: MaxSenderInboxBytes is %d; it must be in [1, MaxInboxBytes (%d)]", c.maxSenderBytes, c.maxInboxBytes)
	case c.batchDelay < 0 || c.batchDelay > time.Second:
		return fmt.Errorf("store: BatchDelay is %s; it must be in [0, 1s]", c.batchDelay)
	case c.batchSize < 1 || c.batchSize > 100_000:
		return fmt.Errorf("store: BatchSize is %d; it must be in [1, 100000]", c.batchSize)
	case c.lockTimeout < 0:
		return fmt.Errorf("store: LockTimeout is %s; it must not be negative (0 waits forever)", c.lockTimeout)
	}
	if !c.senderSet {
		c.maxSenderBytes = min(DefaultMaxSenderInboxBytes, c.maxInboxBytes)
	}
	return nil
}

// WithNoSync turns fsync off: commits reach the OS but not necessarily the disk, so a power
// loss can lose recent writes (a process crash cannot). For tests and for the benchmark's
// non-durable baseline; never for a production node.
func WithNoSync(noSync bool) Option {
	return func(c *config) error { c.noSync = noSync; return nil }
}

// WithMaxRecipientBytes bounds the raw bytes queued in the outbox for one recipient
// (default DefaultMaxRecipientBytes).
func WithMaxRecipientBytes(n int64) Option {
	return func(c *config) error { c.maxRecipientBytes = n; return nil }
}

// WithMaxTotalBytes bounds the raw bytes of the whole outbox (default DefaultMaxTotalBytes).
func WithMaxTotalBytes(n int64) Option {
	return func(c *config) error { c.maxTotalBytes = n; return nil }
}

// WithMaxInboxBytes bounds the raw bytes of the inbox (default DefaultMaxInboxBytes).
func WithMaxInboxBytes(n int64) Option {
	return func(c *config) error { c.maxInboxBytes = n; return nil }
}

// WithMaxSenderInboxBytes bounds the raw inbox bytes accepted from one sending peer and not
// yet taken by the agent (default DefaultMaxSenderInboxBytes, and never more than the inbox
// bound). The sender is the authenticated peer, envelope.sender.peer_id.
func WithMaxSenderInboxBytes(n int64) Option {
	return func(c *config) error { c.maxSenderBytes, c.senderSet = n, true; return nil }
}

// WithBatchDelay sets how long writes queued behind a commit of a busy store wait for more
// (default DefaultBatchDelay; 0: commit what is queued at once). A lone write never waits.
func WithBatchDelay(d time.Duration) Option {
	return func(c *config) error { c.batchDelay = d; return nil }
}

// WithBatchSize sets the most writes per commit (default DefaultBatchSize).
func WithBatchSize(n int) Option {
	return func(c *config) error { c.batchSize = n; return nil }
}

// WithLockTimeout sets how long Open waits for the file lock (default DefaultLockTimeout;
// 0 waits forever).
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) error { c.lockTimeout = d; return nil }
}

// WithClock sets the clock used to stamp enqueued-at and received-at times and to refuse
// already expired messages (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return fmt.Errorf("store: WithClock: the clock must not be nil")
		}
		c.now = now
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("store: WithLogger: the logger must not be nil")
		}
		c.log = l
		return nil
	}
}
