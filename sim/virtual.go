package sim

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
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

	grace, frozenAfter time.Duration // wallGrace and frozenAfter (shorter in tests)
}

func newWatchdog() *watchdog {
	return &watchdog{finished: make(chan struct{}), grace: wallGrace, frozenAfter: frozenAfter}
}

// runVirtual runs the scenario inside cfg.bubble and watches it from the real clock.
func runVirtual(ctx context.Context, sc *Scenario, cfg *runConfig) (rep *Report, err error) {
	if lim := memoryLimitOf(sc); lim > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(lim)))
	}
	w := newWatchdog()
	cfg.outside = &outside{}
	var watching sync.WaitGroup
	watching.Go(func() { w.watch(ctx, cfg) })
	watching.Go(func() { cfg.outside.serve(w.finished) })
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

// frozenAfter is how long, on the real clock, a virtual run's clock may stand still while the
// process is idle before the watchdog calls the bubble frozen: no goroutine can run, yet
// time cannot move, because one waits on a mutex (which synctest does not count as waiting)
// held by another that waits for a timer. frozenCPU is the share of a core below which the
// process counts as idle.
const (
	frozenAfter = time.Minute
	frozenCPU   = 0.03
)

// watch runs outside the bubble, on the real clock: it sets the stop flag when ctx ends or
// the wall-clock limit passes, calls the run stuck when it has not ended wallGrace later, and
// calls it frozen when its clock stood still for frozenAfter while the process idled.
func (w *watchdog) watch(ctx context.Context, cfg *runConfig) {
	var limit <-chan time.Time
	if cfg.wallLimit > 0 {
		t := time.NewTimer(cfg.wallLimit)
		defer t.Stop()
		limit = t.C
	}
	check := time.NewTicker(w.frozenAfter / 6)
	defer check.Stop()
	var grace <-chan time.Time
	lastV, lastAt, lastCPU := w.virtual.Load(), time.Now(), cpuTime()
	for {
		select {
		case <-w.finished:
			return
		case <-ctx.Done():
			ctx = context.Background() // seen: stop, and wait out the grace
			grace = w.halt(grace)
		case <-limit:
			w.overran.Store(true)
			grace = w.halt(grace)
		case <-grace:
			w.stuck(cfg, fmt.Sprintf("the virtual run did not end %s (real time) after it was stopped", w.grace))
			return
		case now := <-check.C:
			if v := w.virtual.Load(); v != lastV {
				lastV, lastAt, lastCPU = v, now, cpuTime()
				continue
			}
			if idle := now.Sub(lastAt); idle >= w.frozenAfter && float64(cpuTime()-lastCPU) < frozenCPU*float64(idle) {
				w.stuck(cfg, fmt.Sprintf("the virtual run froze: for %s of real time its clock stood still while the process idled "+
					"(a goroutine waits on a mutex held by one that waits for a timer)", idle.Round(time.Second)))
				return
			}
		}
	}
}

// halt sets the stop flag and returns the grace period's timer (the one running, if any).
func (w *watchdog) halt(grace <-chan time.Time) <-chan time.Time {
	w.stop.Store(true)
	if grace != nil {
		return grace
	}
	return time.After(w.grace)
}

// stuck hands what is known of a run that will not end to cfg.stuck (by default, a panic):
// why, where its virtual clock stands, and a file with its goroutines grouped by stack.
func (w *watchdog) stuck(cfg *runConfig, why string) {
	msg := fmt.Sprintf("sim: %s; its virtual clock stands at %s", why, time.Duration(w.virtual.Load()).Round(time.Millisecond))
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

// memoryLimitOf is the soft memory limit a run sets: its memory_limit in virtual time, unless
// GOMEMLIMIT is set (which Go applied already); 0 otherwise.
func memoryLimitOf(sc *Scenario) Bytes {
	if !sc.Virtual || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return sc.MemoryLimit
}

// outside runs functions outside the bubble for the run inside it: what starts a goroutine
// that must not belong to the bubble (the CPU profile's writer, which waits on the runtime in a
// way synctest does not count as blocked, and would stop virtual time). One call at a time.
type outside struct {
	req atomic.Pointer[outsideCall]
}

type outsideCall struct {
	f    func()
	done atomic.Bool
}

// do runs f outside the bubble and returns once it has run; nil runs f here (real time).
// Meanwhile the caller spins, so that virtual time stands still.
func (o *outside) do(f func()) {
	if o == nil {
		f()
		return
	}
	c := &outsideCall{f: f}
	o.req.Store(c)
	for !c.done.Load() {
		runtime.Gosched()
	}
}

// serve runs the calls do posts until finished is closed.
func (o *outside) serve(finished <-chan struct{}) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-finished:
			return
		case <-t.C:
			if c := o.req.Swap(nil); c != nil {
				c.f()
				c.done.Store(true)
			}
		}
	}
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

// virtualize readies a scenario for a run in virtual time: mocknet only, no stall trace (a
// stall is the real clock's), links with DefaultVirtualLatency and DefaultVirtualJitter
// when the scenario says neither latency nor jitter, and DefaultVirtualTick when it says no
// tick.
func (sc *Scenario) virtualize(stallTrace bool) error {
	sc.Virtual = true
	if err := sc.Validate(); err != nil {
		return err
	}
	if stallTrace {
		return fmt.Errorf("a stall trace follows the real clock: a run in virtual time has no stall (its timers fire when due)")
	}
	if !sc.Network.delayGiven && sc.Network.Latency == 0 && sc.Network.Jitter == 0 {
		sc.Network.Latency, sc.Network.Jitter = Duration(DefaultVirtualLatency), Duration(DefaultVirtualJitter)
	}
	if !sc.Network.tickGiven {
		sc.Network.Tick = Duration(DefaultVirtualTick)
	}
	return nil
}

// clockOf names the clock a scenario runs on.
func clockOf(sc *Scenario) string {
	if sc.Virtual {
		return ClockVirtual
	}
	return ClockReal
}

// The clocks a run can be on (Report.Clock).
const (
	ClockReal    = "real"
	ClockVirtual = "virtual"
)
