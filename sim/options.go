package sim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Option changes how Run runs a scenario. Run refuses the run, before starting anything, on
// the first option that returns an error.
type Option func(*runConfig) error

type runConfig struct {
	progress io.Writer
	log      *slog.Logger
	nodes    int
	seed     uint64

	heapProfile io.Writer
	cpuStep     string    // the step whose CPU profile goes to cpuProfile
	cpuProfile  io.Writer //

	repeats int // Sweep only: runs at each size (WithRepeats)

	stallTrace io.Writer     // WithStallTrace
	stallAt    time.Duration //
	stallStep  string        //

	bubble    Bubble           // WithVirtualTime
	wallLimit time.Duration    // WithWallLimit
	stuck     func(msg string) //
	costOff   bool             // WithoutCostModel
	outside   *outside         // runs what must not start in the bubble; nil in real time
	ownCaches bool             // each node its own verification cache (BenchmarkCostModel)
}

// WithProgress writes one line per step to w as the run goes. Default: nowhere.
func WithProgress(w io.Writer) Option {
	return func(c *runConfig) error {
		if w == nil {
			return errors.New("sim.WithProgress: nil writer (leave the option out to discard the progress)")
		}
		c.progress = w
		return nil
	}
}

// WithHeapProfile writes a heap profile (pprof format) to w after the last step, while the
// nodes still run: what the mesh holds, not what is left after it is closed. Default: none.
func WithHeapProfile(w io.Writer) Option {
	return func(c *runConfig) error {
		if w == nil {
			return errors.New("sim.WithHeapProfile: nil writer")
		}
		c.heapProfile = w
		return nil
	}
}

// WithStepCPUProfile writes a CPU profile (pprof format) of the first step named step to w,
// and of nothing else: the steady state of a scenario, say, without its join. Run fails at
// once when the scenario has no such step. The process must not be profiling already.
// Default: none.
func WithStepCPUProfile(step string, w io.Writer) Option {
	return func(c *runConfig) error {
		if step == "" || w == nil {
			return errors.New("sim.WithStepCPUProfile: give a step name and a writer")
		}
		c.cpuStep, c.cpuProfile = step, w
		return nil
	}
}

// WithLogger receives the nodes' logs, each tagged with its node index. Default: discarded.
func WithLogger(l *slog.Logger) Option {
	return func(c *runConfig) error {
		if l == nil {
			return errors.New("sim.WithLogger: nil logger (leave the option out to discard the logs)")
		}
		c.log = l
		return nil
	}
}

// WithNodes overrides the scenario's node count; 0 keeps it (the default). The count is
// checked with the rest of the scenario (2 to MaxNodes).
func WithNodes(n int) Option {
	return func(c *runConfig) error {
		if n < 0 {
			return fmt.Errorf("sim.WithNodes: %d nodes (0 keeps the scenario's count)", n)
		}
		c.nodes = n
		return nil
	}
}

// WithSeed overrides the scenario's seed; 0 keeps it (the default).
func WithSeed(s uint64) Option { return func(c *runConfig) error { c.seed = s; return nil } }

// WithRepeats makes a Sweep run the scenario r times at each size (1 to MaxSweepRepeats;
// default 1), in rounds of every size, and report each size's median with the lowest and
// highest of its runs. Run ignores it.
func WithRepeats(r int) Option {
	return func(c *runConfig) error {
		if r < 1 || r > MaxSweepRepeats {
			return fmt.Errorf("sim.WithRepeats: %d runs a size; give 1 to %d", r, MaxSweepRepeats)
		}
		c.repeats = r
		return nil
	}
}
