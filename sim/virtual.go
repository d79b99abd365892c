package sim

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/google/uuid"
)

// Virtual time (docs/sim.md, "Virtual time"). A run in virtual time runs inside a
// testing/synctest bubble: its clock moves only when every goroutine of the bubble waits, so
// a timer fires when it is due however long the process took to get there, and what the mesh
// does no longer depends on how busy the machine is. Only mocknet: a real socket's read is a
// system call, during which the bubble's clock cannot move.
//
// What the bubble asks of the run, each handled here: its context is made inside (one made
// outside and cancelled from outside kills the process), so an interrupt or the wall-clock
// limit reaches it as a flag polled in virtual time; a goroutine the run leaves waiting when it
// returns fails the bubble, so every helper ends on the run's context; and a stuck run no
// longer times out by itself, so a watchdog on the real clock, outside the bubble, stops it.

// Bubble runs f inside a testing/synctest bubble, with the bubble's *testing.T, and returns
// once f and every goroutine it started have ended. A test passes
// func(f func(*testing.T)) { synctest.Test(t, f) }; iacp-node sim hosts a test of its own
// (testing.Main) to have one.
type Bubble func(f func(t *testing.T))

// stopPoll is how often, in virtual time, a virtual run looks at its stop flag (set by the
// caller's context or the wall-clock limit, from outside the bubble).
const stopPoll = 100 * time.Millisecond

// wallGrace is how long, on the real clock, a stopped virtual run has to close its nodes
// before the watchdog calls it stuck.
const wallGrace = 5 * time.Minute

// WithVirtualTime runs the scenario in virtual time inside b, whatever its virtual field says.
// The scenario must run on mocknet. Default: the scenario's choice (virtual: true needs this
// option, or iacp-node sim, which gives it).
func WithVirtualTime(b Bubble) Option {
	return func(c *runConfig) error {
		if b == nil {
			return errors.New("sim.WithVirtualTime: nil bubble")
		}
		c.bubble = b
		return nil
	}
}

// WithWallLimit bounds a virtual run on the real clock (a watchdog outside the bubble): once
// limit has passed it is stopped as if its context had ended, and its report says so. When a
// stopped run (by the limit or by its context) has still not returned 5 minutes later, stuck
// is called with what is known (by default it panics; iacp-node sim prints it and exits). A
// real-time run ignores it. Default: no limit.
func WithWallLimit(limit time.Duration, stuck func(msg string)) Option {
	return func(c *runConfig) error {
		if limit < 0 {
			return fmt.Errorf("sim.WithWallLimit: %s is negative (0: no limit)", limit)
		}
		c.wallLimit, c.stuck = limit, stuck
		return nil
	}
}

// watchdog is what the real clock, outside the bubble, knows of a virtual run.
type watchdog struct {
	stop     atomic.Bool  // set from outside: the run should end
	overran  atomic.Bool  // the wall-clock limit stopped it
	virtual  atomic.Int64 // the bubble's clock, in ns since the run began, as last published
	finished chan struct{}
}

// runVirtual runs the scenario inside cfg.bubble and watches it from the real clock.
func runVirtual(ctx context.Context, sc *Scenario, cfg *runConfig) (rep *Report, err error) {
	w := &watchdog{finished: make(chan struct{})}
	var watching sync.WaitGroup
	watching.Go(func() { w.watch(ctx, cfg) })
	defer watching.Wait()
	defer close(w.finished)
	cfg.bubble(func(t *testing.T) {
		restore := seedCrypto(t, sc.Seed)
		defer restore()
		ictx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var polling sync.WaitGroup
		polling.Go(func() { w.poll(ictx, cancel) })
		rep, err = runIn(ictx, sc, cfg)
		cancel()
		polling.Wait()
	})
	if w.overran.Load() {
		err = fmt.Errorf("the run reached its wall-clock limit of %s at %s of virtual time and was stopped (%w)",
			cfg.wallLimit, time.Duration(w.virtual.Load()).Round(time.Millisecond), errors.Join(err, context.DeadlineExceeded))
	}
	return rep, err
}

// poll runs in the bubble: it publishes the virtual clock and cancels the run once the stop
// flag is set. It ends with ctx.
func (w *watchdog) poll(ctx context.Context, cancel context.CancelFunc) {
	start := time.Now()
	t := time.NewTicker(stopPoll)
	defer t.Stop()
	for {
		w.virtual.Store(int64(time.Since(start)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if w.stop.Load() {
				cancel()
				return
			}
		}
	}
}

// watch runs outside the bubble, on the real clock: it sets the stop flag when ctx ends or
// the wall-clock limit passes, and calls the run stuck when it has not ended wallGrace later.
func (w *watchdog) watch(ctx context.Context, cfg *runConfig) {
	var limit <-chan time.Time
	if cfg.wallLimit > 0 {
		t := time.NewTimer(cfg.wallLimit)
		defer t.Stop()
		limit = t.C
	}
	select {
	case <-w.finished:
		return
	case <-ctx.Done():
	case <-limit:
		w.overran.Store(true)
	}
	w.stop.Store(true)
	grace := time.NewTimer(wallGrace)
	defer grace.Stop()
	select {
	case <-w.finished:
		return
	case <-grace.C:
	}
	msg := fmt.Sprintf("sim: the virtual run did not end %s (real time) after it was stopped; its virtual clock stands at %s",
		wallGrace, time.Duration(w.virtual.Load()).Round(time.Millisecond))
	if f, err := os.CreateTemp("", "iacp-sim-stuck-*.txt"); err == nil {
		_ = pprof.Lookup("goroutine").WriteTo(f, 1)
		_ = f.Close()
		msg += "; the goroutines, grouped by stack, are in " + f.Name()
	}
	stuck := cfg.stuck
	if stuck == nil {
		stuck = func(msg string) { panic(msg) }
	}
	stuck(msg)
}

// seedCrypto makes the bubble's cryptographic randomness (invitation secrets, message ids,
// nonces) a stream drawn from seed, and returns what undoes it. In a test binary it is
// testing/cryptotest's SetGlobalRandom, which reaches every source of randomness of the
// crypto packages. Outside one (iacp-node sim) cryptotest refuses to run, so crypto/rand's
// Reader and uuid's source are replaced instead: what reads crypto/rand.Read or uuid draws
// from the seed, and the few crypto functions that take no reader (none of them on the
// simulated path: mocknet has no handshakes) keep the system's.
func seedCrypto(t *testing.T, seed uint64) (restore func()) {
	if testing.Testing() {
		cryptotest.SetGlobalRandom(t, seed)
		return func() {}
	}
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	r := &lockedChaCha{c: rand.NewChaCha8(key)}
	prev := cryptorand.Reader
	cryptorand.Reader = r
	uuid.SetRand(r)
	return func() {
		cryptorand.Reader = prev
		uuid.SetRand(nil)
	}
}

// lockedChaCha is a ChaCha8 stream safe for concurrent readers.
type lockedChaCha struct {
	mu sync.Mutex
	c  *rand.ChaCha8
}

func (l *lockedChaCha) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.Read(p)
}

// wallNow is the real clock, which time.Now is not inside a bubble (it is the bubble's).
func wallNow() time.Time {
	var tv syscall.Timeval
	if err := syscall.Gettimeofday(&tv); err != nil {
		return time.Now()
	}
	return time.Unix(tv.Unix())
}
