// Package quietlog bounds the log lines that other peers can make a node write: one line per
// key (a peer) per interval, carrying how many were held back since, and a bound across all
// keys, so that a flood of refused input costs the log a few lines, not one per refusal.
package quietlog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// Defaults for New's zero arguments.
const (
	// DefaultEvery is how often one key may write a line.
	DefaultEvery = 10 * time.Second
	// DefaultPerSecond bounds the lines of all keys together (a burst of the same size).
	DefaultPerSecond = 20
	// DefaultKeys bounds the keys remembered; the least recently seen is forgotten first.
	DefaultKeys = 4096
)

// Limiter decides which lines are written. Its state is guarded by mu.
type Limiter struct {
	every time.Duration
	all   *rate.Limiter

	mu   sync.Mutex
	keys *lru.Cache[string, *entry]
}

type entry struct {
	last time.Time // when a line about the key was last written
	held int       // lines held back since
}

// New returns a Limiter that lets one line per key through every `every`, and perSecond lines
// a second in all, remembering keys keys; zero values take the defaults.
func New(every time.Duration, perSecond float64, keys int) *Limiter {
	if every <= 0 {
		every = DefaultEvery
	}
	if perSecond <= 0 {
		perSecond = DefaultPerSecond
	}
	if keys <= 0 {
		keys = DefaultKeys
	}
	c, _ := lru.New[string, *entry](keys) // keys > 0: never an error
	return &Limiter{every: every, all: rate.NewLimiter(rate.Limit(perSecond), int(perSecond)), keys: c}
}

// Allow reports whether a line about key may be written at now, and, when it may, how many
// lines about key were held back since the last one written (to say so in the line).
func (l *Limiter) Allow(key string, now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, seen := l.keys.Get(key)
	if !seen {
		e = &entry{}
		l.keys.Add(key, e)
	}
	if (seen && now.Sub(e.last) < l.every) || !l.all.AllowN(now, 1) {
		e.held++
		return false, 0
	}
	held, e.held, e.last = e.held, 0, now
	return true, held
}

// Logger writes through Log the lines its Limiter lets through, keyed by the peer (or other
// party) the line is about, adding "held_back" when lines about it were held back since.
type Logger struct {
	lim *Limiter
	log *slog.Logger
	now func() time.Time
}

// NewLogger returns a Logger writing to log, limited by lim, at the times now gives (time.Now
// when nil).
func NewLogger(log *slog.Logger, lim *Limiter, now func() time.Time) *Logger {
	if now == nil {
		now = time.Now
	}
	return &Logger{lim: lim, log: log, now: now}
}

// Info writes msg at info level, unless a line about key was written within the interval.
func (q *Logger) Info(key, msg string, args ...any) { q.write(slog.LevelInfo, key, msg, args) }

// Warn writes msg at warn level, unless a line about key was written within the interval.
func (q *Logger) Warn(key, msg string, args ...any) { q.write(slog.LevelWarn, key, msg, args) }

func (q *Logger) write(level slog.Level, key, msg string, args []any) {
	if !q.log.Enabled(context.Background(), level) {
		return
	}
	ok, held := q.lim.Allow(key, q.now())
	if !ok {
		return
	}
	if held > 0 {
		args = append(args, "held_back", held)
	}
	q.log.Log(context.Background(), level, msg, args...)
}
