package sim

import (
	"fmt"
	"io"
	"runtime/trace"
	"sync"
	"time"
)

// A stall is a moment when the whole simulator stops: its timers, which every node's timers
// share, fire a second or more late while the cores are not saturated on average (docs/sim.md,
// "When the simulator is the bottleneck"). A CPU profile cannot show one, since nothing runs.
// WithStallTrace keeps Go's flight recorder (runtime/trace) running through the run, the last
// seconds of the execution trace in memory, and writes them out at the first stall: what every
// processor and goroutine did before and during it (`go tool trace FILE`).

// DefaultStallThreshold is the lateness of the simulator's timer that WithStallTrace takes for
// a stall: five times the overload threshold, a tenth of a 5 s heartbeat.
const DefaultStallThreshold = 500 * time.Millisecond

// stallWindow is how much of the past the flight recorder keeps, and stallMaxBytes a bound on
// its memory: a 300-node mesh produces tens of MiB of trace a second.
const (
	stallWindow   = 5 * time.Second
	stallMaxBytes = 256 << 20
)

// WithStallTrace writes the execution trace of the seconds before the first stall (a timer
// of the simulator's own firing threshold or more late; DefaultStallThreshold when 0) to w,
// once; with a step name, the first stall during that step (a large join stalls the process
// too, and would be the first). Only one flight recorder may run in a process, so it is for
// Run, not Sweep.
func WithStallTrace(w io.Writer, threshold time.Duration, step string) Option {
	return func(c *runConfig) error {
		if w == nil || threshold < 0 {
			return fmt.Errorf("sim.WithStallTrace: give a writer and a threshold of 0 (the default, %s) or more", DefaultStallThreshold)
		}
		if threshold == 0 {
			threshold = DefaultStallThreshold
		}
		c.stallTrace, c.stallAt, c.stallStep = w, threshold, step
		return nil
	}
}

// stallTracer owns the flight recorder of one run. The recorder runs only while stalls count
// (the whole run, or the step asked for) and until one is written: tracing every goroutine of
// a few hundred nodes is not free.
type stallTracer struct {
	w         io.Writer
	threshold time.Duration
	step      string // the step whose stalls count ("": every step)

	mu      sync.Mutex
	fr      *trace.FlightRecorder // running while stalls count; nil otherwise
	written bool
	late    time.Duration // the stall written, 0 before
	at      time.Time     // when it was written
	err     error
}

func startStallTracer(w io.Writer, threshold time.Duration, step string) (*stallTracer, error) {
	s := &stallTracer{w: w, threshold: threshold, step: step}
	if step == "" {
		if err := s.arm(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// arm starts a flight recorder, unless one runs or a stall was written: stalls count from now.
func (s *stallTracer) arm() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fr != nil || s.written {
		return nil
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: stallWindow, MaxBytes: stallMaxBytes})
	if err := fr.Start(); err != nil {
		return fmt.Errorf("stall trace: %w (is another trace or flight recorder running in this process?)", err)
	}
	s.fr = fr
	return nil
}

// disarm stops the flight recorder, if one runs.
func (s *stallTracer) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fr != nil {
		s.fr.Stop()
		s.fr = nil
	}
}

// during arms the tracer for the step st when it is the one asked for, and returns what
// disarms it (nothing to do otherwise).
func (s *stallTracer) during(st *Step) (end func()) {
	if s == nil || s.step == "" || st.Name != s.step {
		return func() {}
	}
	if err := s.arm(); err != nil {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		return func() {}
	}
	return s.disarm
}

// observe takes one lateness of the lag monitor's timer; the first at or past the threshold
// while the recorder runs has the window written out, and the recorder stopped. It runs on
// the lag monitor's goroutine: a stall is over by the time its lateness is known, so the
// window holds it.
func (s *stallTracer) observe(late time.Duration) {
	if late < s.threshold {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fr == nil || s.written {
		return
	}
	s.written, s.late, s.at = true, late, time.Now()
	if _, err := s.fr.WriteTo(s.w); err != nil {
		s.err = fmt.Errorf("stall trace: %w", err)
	}
	s.fr.Stop()
	s.fr = nil
}

// stop stops the recorder and reports the stall written (late 0: none came), or why the
// trace could not be written.
func (s *stallTracer) stop() (late time.Duration, at time.Time, err error) {
	s.disarm()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.late, s.at, s.err
}

// traceStalls starts the flight recorder WithStallTrace asked for (none without it), and
// returns what stops it and says on the progress writer whether a stall was written.
func (r *run) traceStalls(cfg *runConfig) (stop func() error, err error) {
	if cfg.stallTrace == nil {
		return func() error { return nil }, nil
	}
	if r.stalls, err = startStallTracer(cfg.stallTrace, cfg.stallAt, cfg.stallStep); err != nil {
		return nil, err
	}
	return func() error {
		late, at, err := r.stalls.stop()
		switch {
		case err != nil:
			return err
		case late > 0:
			r.rep.StallTraceMS = ms(late)
			fmt.Fprintf(cfg.progress, "stall: the simulator's timer fired %s late at %s; the trace of the seconds before it is written (go tool trace)\n",
				late.Round(time.Millisecond), at.Format("15:04:05.000"))
		default:
			fmt.Fprintf(cfg.progress, "stall trace: no timer of the simulator fired %s late; nothing written\n", cfg.stallAt)
		}
		return nil
	}, nil
}
