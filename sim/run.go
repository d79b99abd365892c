package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// run is the state of one Run: the cluster and the report being filled. It belongs to the
// goroutine that called Run.
type run struct {
	c        *cluster
	rep      *Report
	requests samples
	lookups  samples
	lag      *lagMonitor  // nil in virtual time
	stalls   *stallTracer // WithStallTrace; nil without
	wall0    time.Time    // when the run began, on the real clock
	progress io.Writer    // WithProgress's

	cpuStep    string    // the step to profile (WithStepCPUProfile), "" once profiled
	cpuProfile io.Writer //
	outside    *outside  // runConfig's
}

// stepNames lists the steps' names for an error message.
func stepNames(steps []Step) string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.Name
	}
	return strings.Join(names, ", ")
}

// profileStep starts the CPU profile WithStepCPUProfile asked for when st is its step, and
// returns what stops it (nothing to stop otherwise).
func (r *run) profileStep(st *Step) (stop func() error) {
	if r.cpuStep == "" || st.Name != r.cpuStep {
		return func() error { return nil }
	}
	r.cpuStep = ""
	var err error
	r.outside.do(func() { err = pprof.StartCPUProfile(r.cpuProfile) })
	if err != nil {
		return func() error { return fmt.Errorf("CPU profile of step %s: %w", st.Name, err) }
	}
	return func() error { r.outside.do(pprof.StopCPUProfile); return nil }
}

// verifyCacheSize bounds the verification cache during a run: 65,536 signatures, about 5 MiB
// at the bound. A signature is useful while its document spreads through the mesh (seconds),
// so the bound only needs to cover the documents of a few seconds of the busiest step.
const verifyCacheSize = 1 << 16

// Run starts the scenario's nodes, runs its steps in order and returns the report. A step
// that cannot run (a node that fails to start, a partition on loopback) stops the run: the
// report holds the steps so far and Run returns the error too. Failed expectations do not
// stop the run; they make Report.Passed false. Every node is closed before Run returns.
func Run(ctx context.Context, scenario *Scenario, opts ...Option) (rep *Report, err error) {
	sc, cfg, err := prepareRun(scenario, opts)
	if err != nil {
		return nil, err
	}
	if cfg.bubble != nil {
		sc.Virtual = true
	}
	if !sc.Virtual {
		return runIn(ctx, &sc, &cfg)
	}
	if cfg.bubble == nil {
		return nil, fmt.Errorf("scenario %s runs in virtual time (virtual: true), which needs a synctest bubble: run it with iacp-node sim, or give sim.WithVirtualTime", sc.Name)
	}
	if err := sc.virtualize(cfg.stallTrace != nil); err != nil {
		return nil, err
	}
	if cfg.costOff {
		sc.Cost.Enabled = new(false)
	}
	return runVirtual(ctx, &sc, &cfg)
}

// prepareRun applies the options, and the scenario's overrides among them (--nodes, --seed),
// to a copy of the scenario, and checks it and the steps the profilers follow.
func prepareRun(scenario *Scenario, opts []Option) (Scenario, runConfig, error) {
	cfg := runConfig{progress: io.Discard, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return Scenario{}, cfg, err
		}
	}
	sc := *scenario
	if cfg.nodes > 0 {
		sc.Nodes = cfg.nodes
	}
	if cfg.seed > 0 {
		sc.Seed = cfg.seed
	}
	if err := sc.Validate(); err != nil {
		return sc, cfg, err
	}
	if cfg.cpuStep != "" && !slices.ContainsFunc(sc.Steps, func(st Step) bool { return st.Name == cfg.cpuStep }) {
		return sc, cfg, fmt.Errorf("scenario %s has no step named %q to profile (its steps: %s)", sc.Name, cfg.cpuStep, stepNames(sc.Steps))
	}
	if cfg.stallStep != "" && !slices.ContainsFunc(sc.Steps, func(st Step) bool { return st.Name == cfg.stallStep }) {
		return sc, cfg, fmt.Errorf("scenario %s has no step named %q to trace (its steps: %s)", sc.Name, cfg.stallStep, stepNames(sc.Steps))
	}
	return sc, cfg, nil
}

// runIn runs the scenario on the clock it finds: the real one, or a bubble's (runVirtual).
func runIn(ctx context.Context, sc *Scenario, cfg *runConfig) (rep *Report, err error) {
	c, err := newCluster(sc, cfg.log)
	if err != nil {
		return nil, err
	}
	c.ownCaches = cfg.ownCaches
	r := &run{c: c, cpuStep: cfg.cpuStep, cpuProfile: cfg.cpuProfile, outside: cfg.outside, wall0: wallNow(), progress: cfg.progress, rep: &Report{Scenario: sc.Name, Description: sc.Description, Nodes: sc.Nodes, Seed: sc.Seed,
		Transport: sc.Network.Transport, Trust: sc.Trust, Clock: clockOf(sc), Network: sc.Network, MemoryLimit: memoryLimitOf(sc), Started: c.start, Passed: true}}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the nodes: %w", cerr)
		}
	}()
	if !sc.Virtual {
		stop, err := r.watchRealClock(cfg)
		if err != nil {
			return nil, err
		}
		defer func() {
			if serr := stop(); serr != nil && err == nil {
				err = serr
			}
		}()
	}
	fmt.Fprintln(cfg.progress, runLine(sc))
	for i := range sc.Steps {
		st := &sc.Steps[i]
		res := r.step(ctx, i, st)
		r.rep.Steps = append(r.rep.Steps, res)
		fmt.Fprintln(cfg.progress, progressLine(len(sc.Steps), &res))
		if !res.Passed {
			r.rep.Passed = false
		}
		if res.Error != "" {
			err = fmt.Errorf("step %d (%s): %s", i+1, st.Name, res.Error)
			if ctx.Err() != nil { // stopped: say so in a way errors.Is sees
				err = fmt.Errorf("step %d (%s): %w", i+1, st.Name, ctx.Err())
			}
			break
		}
	}
	if cfg.heapProfile != nil { // while the nodes still run
		runtime.GC()
		if perr := pprof.Lookup("heap").WriteTo(cfg.heapProfile, 0); perr != nil && err == nil {
			err = fmt.Errorf("heap profile: %w", perr)
		}
	}
	r.finish()
	return r.rep, err
}

// watchRealClock starts what measures the simulator's own load on the real clock: the lag
// monitor, and the stall tracer when WithStallTrace asked for it. Neither means anything in
// virtual time, where timers fire when due whatever the load. stop stops both.
func (r *run) watchRealClock(cfg *runConfig) (stop func() error, err error) {
	stopStalls, err := r.traceStalls(cfg)
	if err != nil {
		return nil, err
	}
	var observe func(time.Duration)
	if r.stalls != nil {
		observe = r.stalls.observe
	}
	r.lag = startLagMonitor(observe)
	return func() error {
		r.lag.stop()
		return stopStalls()
	}, nil
}

// runLine is the progress line that opens a run.
func runLine(sc *Scenario) string {
	line := fmt.Sprintf("sim %s: %d nodes on %s, trust %s, seed %d", sc.Name, sc.Nodes, sc.Network.Transport, sc.Trust, sc.Seed)
	if !sc.Virtual {
		return line
	}
	line += fmt.Sprintf(", virtual time (latency %s", sc.Network.Latency)
	if sc.Network.Jitter > 0 {
		line += fmt.Sprintf("±%s", sc.Network.Jitter)
	}
	if sc.Network.Tick > 0 {
		line += fmt.Sprintf(" on a %s tick", sc.Network.Tick)
	}
	if m := sc.Cost.model(); m != nil {
		return line + ", " + m.String() + ")"
	}
	return line + ", CPU costs no virtual time)"
}

// step runs one step and measures it.
func (r *run) step(ctx context.Context, i int, st *Step) StepResult {
	res := StepResult{Index: i + 1, Name: st.Name, Action: st.Action, Metrics: map[string]float64{}, Errors: map[string]int{}}
	a := actions[st.Action]
	p, err := a.parse(st, r.c.sc)
	r.lag.take() // the lag of this step only
	t0, w0, cpu0, susp0, sent0, beats0 := time.Now(), wallNow(), cpuTime(), r.c.rec.falseSuspicions(), r.c.counts(), r.meshBeats()
	charged0 := r.c.cpu.charged()
	res.StartMS = ms(t0.Sub(r.c.start))
	if err == nil {
		stop, disarm := r.profileStep(st), r.stalls.during(st)
		err = errors.Join(a.run(ctx, r, p, &res), stop())
		disarm()
	}
	wall := time.Since(t0)
	res.DurationMS = ms(wall)
	res.WallMS = ms(wallNow().Sub(w0))
	cpu := cpuTime() - cpu0
	res.Metrics["cpu_ms"] = ms(cpu)
	res.Metrics["false_suspicions"] = float64(r.c.rec.falseSuspicions() - susp0)
	if r.lag != nil { // the real clock: the simulator's own load
		res.Metrics["cpu_cores"] = round3(float64(cpu) / float64(max(wall, time.Millisecond)))
		lagP99, lagMax := r.lag.take()
		measureOverload(&res, lagP99, lagMax)
	}
	if r.c.cpu != nil {
		res.Metrics["model_cpu_ms"] = ms(r.c.cpu.charged() - charged0)
	}
	r.measureNodes(&res, beats0)
	r.memory(&res)
	r.measureCost(&res, wall, cpu, sent0)
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
	res.Checks = evaluate(st.Expect, res.Metrics)
	excuse(&res)
	res.Passed = err == nil
	for _, ch := range res.Checks {
		res.Passed = res.Passed && ch.OK
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

// memory measures the live heap, stacks and goroutines per running node. The heap is what the
// collector's last cycle found alive (runtime/metrics' /gc/heap/live:bytes): forcing a cycle
// here, with a thousand nodes running, took seconds of both cores at the end of every step.
// (Not connections: mocknet answers that under a lock the whole mesh contends for, and
// counting them took seconds at 200 nodes.)
func (r *run) memory(res *StepResult) {
	live, stacks := readMemory()
	up := r.c.up()
	n := float64(max(1, len(up)))
	const mib = 1 << 20
	res.Metrics["nodes_up"] = float64(len(up))
	res.Metrics["heap_per_node_mib"] = round3(float64(live) / mib / n)
	res.Metrics["stack_per_node_mib"] = round3(float64(stacks) / mib / n)
	res.Metrics["goroutines_per_node"] = round3(float64(runtime.NumGoroutine()) / n)
	if rss, ok := residentBytes(); ok {
		res.Metrics["rss_per_node_mib"] = round3(float64(rss) / mib / n)
	}
	r.rep.PeakHeapPerNodeMiB = max(r.rep.PeakHeapPerNodeMiB, res.Metrics["heap_per_node_mib"])
}

// readMemory returns the heap the collector's last cycle marked live and the bytes of
// goroutine stacks in use. Before the process's first cycle it runs one, so that the live
// heap is never the zero of a cycle that has not happened.
func readMemory() (live, stacks uint64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	if s[0].Value.Uint64() == 0 {
		runtime.GC()
		metrics.Read(s)
	}
	return s[1].Value.Uint64(), s[2].Value.Uint64()
}

// measureCost adds what the step cost each running node, per minute of the step:
// cpu_s_per_node_min (the process's CPU seconds over the nodes), verified_per_node_min (the
// signatures each checked) and, on mocknet, kib_per_node_min and msgs_per_node_min (what the
// nodes' streams wrote: bytes, writes). With the same scenario at several sizes (--sizes),
// these are the points of the cost curve (docs/scale.md). sent0 is what had been counted at
// the start of the step.
func (r *run) measureCost(res *StepResult, wall, cpu time.Duration, sent0 counts) {
	n := max(1, res.Metrics["nodes_up"])
	minutes := max(wall, time.Millisecond).Minutes()
	now := r.c.counts()
	res.Metrics["cpu_s_per_node_min"] = round3(cpu.Seconds() / n / minutes)
	res.Metrics["verified_per_node_min"] = round3(float64(now.verified-sent0.verified) / n / minutes)
	if charged, ok := res.Metrics["model_cpu_ms"]; ok {
		res.Metrics["model_cpu_s_per_node_min"] = round3(charged / 1000 / n / minutes)
	}
	if r.c.net != nil {
		res.Metrics["kib_per_node_min"] = round3(float64(now.bytes-sent0.bytes) / 1024 / n / minutes)
		res.Metrics["msgs_per_node_min"] = round3(float64(now.writes-sent0.writes) / n / minutes)
	}
}

// finish fills the report's plots.
func (r *run) finish() {
	r.rep.DurationMS = ms(time.Since(r.c.start))
	r.rep.WallMS = ms(wallNow().Sub(r.wall0))
	if m := r.c.sc.Cost.model(); m != nil && r.c.sc.Virtual {
		r.rep.CostModel = m
	}
	r.rep.RequestCDF = r.requests.cdf(200)
	r.rep.LookupCDF = r.lookups.cdf(200)
	r.rep.Liveness = r.c.rec.transitions()
	r.c.rec.mu.Lock()
	r.rep.DroppedItems = r.c.rec.dropped
	r.c.rec.mu.Unlock()
}

// residentBytes is the process's resident set size, from /proc (Linux); ok is false elsewhere.
func residentBytes() (uint64, bool) {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	var size, resident uint64
	if _, err := fmt.Sscan(string(raw), &size, &resident); err != nil {
		return 0, false
	}
	return resident * uint64(os.Getpagesize()), true
}

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// progressLine is the one line printed per step.
func progressLine(total int, res *StepResult) string {
	verdict := "ok"
	if !res.Passed {
		verdict = "FAILED"
	}
	line := fmt.Sprintf("[%d/%d] %-10s %8.0f ms  %s", res.Index, total, res.Name, res.DurationMS, verdict)
	if s := headline(res); s != "" {
		line += "  " + s
	}
	for _, ch := range res.Checks {
		if !ch.OK {
			if ch.Missing {
				line += fmt.Sprintf("  [%s not measured by this step]", ch.Metric)
			} else {
				line += fmt.Sprintf("  [%s = %g, want %s]", ch.Metric, ch.Got, ch.Want)
			}
		}
	}
	if res.Error != "" {
		line += "  error: " + res.Error
	}
	return line
}
