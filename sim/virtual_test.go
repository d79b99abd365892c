package sim

import (
	"bytes"
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// inBubble is the Bubble of a test: synctest's.
func inBubble(t *testing.T) Bubble {
	return func(f func(*testing.T)) { synctest.Test(t, f) }
}

// virtualRun runs the scenario text in virtual time with opts and returns its report and error.
func virtualRun(t *testing.T, ctx context.Context, text string, opts ...Option) (*Report, error) {
	t.Helper()
	sc, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return Run(ctx, sc, append([]Option{WithLogger(testLogger(t)), WithVirtualTime(inBubble(t)), WithWallLimit(testWallLimit, nil)}, opts...)...)
}

// endless is a mesh that would run for a thousand hours of virtual time, beating every second:
// hours of real time.
const endless = `
nodes: 3
steps:
  - join: {}
  - sleep: {duration: 1000h}
`

// A virtual run's context is its own, made inside the bubble; the caller's context reaches it
// as a flag polled in virtual time, and the run stops cleanly, every node closed.
func TestVirtual_StopsWhenTheCallersContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	start := time.Now()
	rep, err := virtualRun(t, ctx, endless)
	if !errors.Is(err, context.Canceled) || rep == nil || len(rep.Steps) != 2 {
		t.Fatalf("Run = %v, %v; want the report of both steps and context.Canceled", rep, err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the run took %s to stop", took)
	}
}

// A wall-clock limit, watched outside the bubble, stops a run that would go on for hours, and
// the error says so.
func TestVirtual_AWallClockLimitStopsTheRun(t *testing.T) {
	rep, err := virtualRun(t, context.Background(), endless, WithWallLimit(2*time.Second, nil))
	if err == nil || !strings.Contains(err.Error(), "wall-clock limit of 2s") || !errors.Is(err, context.DeadlineExceeded) || rep == nil {
		t.Fatalf("Run = %v; want the wall-clock limit named", err)
	}
}

// A run whose virtual clock stands still while the process idles is frozen (a goroutine waits
// on a mutex held by one that waits for a timer: virtual time cannot move), and one that does
// not end once stopped is stuck: the watchdog says which, with the virtual time and a file of
// the goroutines.
func TestWatchdog_NamesAFrozenOrStuckRun(t *testing.T) {
	for _, c := range []struct {
		name, want string
		stop       bool
	}{{"frozen", "froze", false}, {"stuck", "did not end", true}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWatchdog()
			w.grace, w.frozenAfter = 300*time.Millisecond, 600*time.Millisecond
			if c.stop {
				w.frozenAfter = time.Hour
			}
			w.virtual.Store(int64(7 * time.Second))
			got := make(chan string, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.stop {
				cancel()
			}
			go w.watch(ctx, &runConfig{stuck: func(msg string) { got <- msg }})
			select {
			case msg := <-got:
				close(w.finished)
				if !strings.Contains(msg, c.want) || !strings.Contains(msg, "7s") || !strings.Contains(msg, "iacp-sim-stuck-") {
					t.Fatalf("%q: want %q, the virtual clock and the goroutines' file", msg, c.want)
				}
				if c.stop != w.stop.Load() {
					t.Fatalf("stop flag %v", w.stop.Load())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watchdog said nothing")
			}
		})
	}
}

// A virtual run's memory_limit is Go's soft memory limit while it lasts (and the report says
// so); the process's limit is back to what it was once the run ends.
func TestVirtual_MemoryLimitHoldsWhileTheRunLasts(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	rep, err := virtualRun(t, context.Background(), "memory_limit: 3GiB\nnodes: 2\nsteps: [{join: {}}]")
	if err != nil || rep.MemoryLimit != 3<<30 || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("%v; report's limit %v; limit after the run %d, before %d", err, rep.MemoryLimit, debug.SetMemoryLimit(-1), before)
	}
	for in, want := range map[string]Bytes{"7GiB": 7 << 30, "512MiB": 512 << 20, "1.5 GiB": 3 << 29, "4096": 4096} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes took lots")
	}
}

// Virtual time needs mocknet: a socket's read is a system call, during which the bubble's
// clock cannot move.
func TestVirtual_NeedsMocknet(t *testing.T) {
	if _, err := Parse([]byte("virtual: true\nnetwork: {transport: loopback}\nsteps: [{join: {}}]")); err == nil || !strings.Contains(err.Error(), "needs transport mocknet") {
		t.Fatalf("Parse: %v", err)
	}
	_, err := virtualRun(t, context.Background(), "network: {transport: loopback}\nsteps: [{join: {}}]")
	if err == nil || !strings.Contains(err.Error(), "needs transport mocknet") {
		t.Fatalf("Run: %v", err)
	}
	sc, _ := Parse([]byte("virtual: true\nsteps: [{join: {}}]"))
	if _, err := Run(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "virtual") {
		t.Fatalf("a virtual scenario without a bubble: %v", err)
	}
}

// Links in virtual time have 20 ms ± 10 ms unless the scenario sets their latency or jitter
// (0 included): with free CPU and no latency a join would happen at one instant. A request's
// round trip is then at least two link latencies. Writes arrive on a 1 ms tick unless the
// scenario sets another (0 included).
func TestVirtual_LinksHaveALatencyByDefault(t *testing.T) {
	const steps = "\nnodes: 3\nsteps:\n  - join: {}\n  - converge: {timeout: 30s}\n  - load: {rate: 10, duration: 1s}\n    expect: {request_success: 1}\n"
	rep, err := virtualRun(t, context.Background(), steps)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Network.Latency.D() != DefaultVirtualLatency || rep.Network.Jitter.D() != DefaultVirtualJitter || rep.Network.Tick.D() != DefaultVirtualTick {
		t.Fatalf("network %+v; want %s ± %s on a %s tick", rep.Network, DefaultVirtualLatency, DefaultVirtualJitter, DefaultVirtualTick)
	}
	if p50 := rep.Steps[2].Metrics["request_p50_ms"]; p50 < 20 {
		t.Fatalf("request p50 %v ms over links of 10 to 30 ms each way", p50)
	}
	rep, err = virtualRun(t, context.Background(), "network: {latency: 0s, tick: 0s}"+steps)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Network.Latency != 0 || rep.Network.Jitter != 0 || rep.Network.Tick != 0 {
		t.Fatalf("a scenario's latency: 0s or tick: 0s was replaced: %+v", rep.Network)
	}
}

// A paced join starts its batches when due, in virtual time to the millisecond: seven nodes
// after the bootstrap node, two a second in batches of two, start at 0, 1, 2 and 3 s.
func TestJoin_IsPaced(t *testing.T) {
	rep, err := virtualRun(t, context.Background(), "nodes: 8\nsteps:\n  - join: {rate: 2, batch: 2}\n    expect: {nodes_up: 8, join_rate_per_s: 2}\n")
	if err != nil || !rep.Passed {
		t.Fatalf("%v, %+v", err, rep.Steps)
	}
	if ms := rep.Steps[0].Metrics["join_ms"]; ms < 3000 || ms > 3500 {
		t.Fatalf("the join took %v ms; want the last batch's 3 s and its start", ms)
	}
}

// The same scenario and seed run twice in virtual time: every step passes alike and every
// count is the same; Compare lists what differed.
func TestVirtual_OneSeedOneOutcome(t *testing.T) {
	const text = `
nodes: 8
seed: 9
steps:
  - join: {}
  - converge: {timeout: 30s}
    expect: {converged: 1}
  - discover: {lookups: 10}
  - load: {rate: 20, duration: 2s}
  - broadcast: {count: 2}
  - kill: {count: 1}
  - restart: {}
`
	first, err := virtualRun(t, context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	second, err := virtualRun(t, context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	rp := Compare(first, second, "the first run")
	var out bytes.Buffer
	_ = rp.WriteText(&out)
	t.Log(out.String())
	if !rp.SameSeed || !rp.SameOutcome || rp.Compared < 50 {
		t.Fatalf("one seed, two outcomes:\n%s", out.String())
	}
	third := *second
	third.Steps = append([]StepResult(nil), second.Steps...)
	third.Steps[2].Passed = !third.Steps[2].Passed
	third.Steps[2].Metrics = map[string]float64{"lookup_success": 0.5, "lookup_p50_ms": 99}
	if rp := Compare(first, &third, "x"); rp.SameOutcome || len(rp.Outcomes) != 1 || len(rp.Counts) != 1 || rp.Counts[0].Metric != "lookup_success" {
		t.Fatalf("a changed outcome and count not found: %+v", rp)
	}
}
