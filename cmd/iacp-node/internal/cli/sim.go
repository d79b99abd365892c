package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iacp-node/iacp-node/sim"
)

func init() { register(newSimCmd) }

// simFlags are sim's flags.
type simFlags struct {
	scenario, jsonOut, htmlOut, logLevel string
	cpuProfile, memProfile, sizes        string
	compare, memoryLimit                 string
	profileStep, stallTrace              string
	stallAt, wallLimit                   time.Duration
	nodes, repeat                        int
	seed                                 uint64
	list, virtual, costModel             bool
}

func newSimCmd() *cobra.Command {
	var sf simFlags
	cmd := &cobra.Command{
		Use:   "sim [--scenario FILE|NAME] [--nodes N | --sizes N,N,... [--repeat R]] [--seed S] [--json FILE] [--html FILE] [--list]",
		Short: "Run many real nodes in this process through a scenario and measure them",
		Long: `sim starts N real iacp-node nodes in this process, on an in-memory network (go-libp2p's
mocknet, with configurable latency, jitter and bandwidth) or on loopback sockets, and runs a
scenario: a YAML script of steps (join, converge, discover, load, broadcast, group, kill,
restart, partition, heal, churn, offline, sleep) with expectations on what each step measures.

With no --scenario it runs the default scenario ("smoke") at the given size. --scenario takes
a file, or the name of a scenario built into the binary (--list shows them). It prints one
line per step on stderr, then a summary table on stdout; --json and --html write the full
report (the HTML is self-contained: inline SVG plots of latency, propagation and liveness).
The scenario language and the metrics are described in docs/sim.md.

--sizes 100,300,1000 runs the scenario at each size, one after the other, and reports what its
steady state (its sleep step named "steady", else its last sleep step) cost each node against
the number of nodes: CPU seconds and KiB sent per node per minute, memory per node, and where
the simulator itself was the bottleneck. --json and --html then write that sweep (the HTML
draws the curves; flat is the goal). The scale scenario is made for it (docs/scale.md), and
scale-1000 is its point at 1000 nodes, which needs a longer settle.
One run's steady minute moves by a fifth from run to run on a shared machine: --repeat 3 runs
every size three times, in rounds, and reports each size's median with its lowest and highest
run, and the growth between those extremes.

--virtual runs the scenario in virtual time (a scenario can ask for it with virtual: true;
--virtual=false runs it on the real clock): the nodes' clock moves only when every goroutine
waits, so what the mesh does no longer depends on how busy the machine is, and a mesh larger
than the machine's cores runs at its own pace. Mocknet only. Latencies are then the links'
(20 ms ± 10 ms unless the scenario sets them) and the timers', plus what the CPU cost model
charges each node for its signatures and messages (--cost-model=false switches it off).
--wall-limit stops a virtual run after that much real time.

Exit status: 0 when every expectation held, 3 when one failed, 1 when the run could not
complete.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.list {
				return listScenarios(cmd)
			}
			return runSim(cmd, &sf)
		},
	}
	f := cmd.Flags()
	f.StringVar(&sf.scenario, "scenario", "", "scenario file, or the name of a built-in scenario (default \"smoke\")")
	f.IntVar(&sf.nodes, "nodes", 0, "number of nodes (default: the scenario's)")
	f.StringVar(&sf.sizes, "sizes", "", "run the scenario at each of these sizes (like 100,300,1000) and report the cost per node against the size")
	f.IntVar(&sf.repeat, "repeat", 1, "with --sizes, run every size this many times (1 to 9), in rounds, and report medians with the lowest and highest run")
	f.Uint64Var(&sf.seed, "seed", 0, "seed of every random choice (default: the scenario's)")
	f.StringVar(&sf.jsonOut, "json", "", "write the full report as JSON to FILE")
	f.StringVar(&sf.htmlOut, "html", "", "write a self-contained HTML report to FILE")
	f.BoolVar(&sf.list, "list", false, "list the built-in scenarios and exit")
	f.StringVar(&sf.logLevel, "log-level", "", "show the nodes' logs on stderr at this level (debug, info, warn, error); default: none")
	f.StringVar(&sf.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE (read it with go tool pprof)")
	f.StringVar(&sf.profileStep, "profile-step", "", "with --cpuprofile, profile only the step of this name (like steady): what the mesh costs without its join; with --trace-stall, trace only a stall in it")
	f.StringVar(&sf.memProfile, "memprofile", "", "write a heap profile to FILE, taken after the last step while the nodes still run")
	f.StringVar(&sf.stallTrace, "trace-stall", "", "keep the last seconds of Go's execution trace in memory and write them to FILE at the first stall of the whole simulator (read it with go tool trace)")
	f.DurationVar(&sf.stallAt, "stall-threshold", sim.DefaultStallThreshold, "with --trace-stall, how late the simulator's own timer must fire to count as a stall")
	f.BoolVar(&sf.virtual, "virtual", false, "run in virtual time (default: as the scenario says; mocknet only)")
	f.BoolVar(&sf.costModel, "cost-model", true, "in virtual time, charge each node's CPU work (signatures, messages, bytes) in virtual time")
	f.DurationVar(&sf.wallLimit, "wall-limit", time.Hour, "in virtual time, stop the run after this much real time (0: no limit)")
	f.StringVar(&sf.memoryLimit, "memory-limit", "", "in virtual time, the process's soft memory limit while the run lasts (like 7GiB; default: the scenario's memory_limit)")
	f.StringVar(&sf.compare, "compare", "", "compare the run with an earlier one (its --json report): the same outcome and counts, and which numbers differed")
	return cmd
}

// runSim loads the scenario and runs it on its clock: in real time here, in virtual time in
// the bubble of a test this process hosts (virtualHost).
func runSim(cmd *cobra.Command, sf *simFlags) error {
	sc, opts, err := loadScenario(cmd, sf)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("virtual") {
		sc.Virtual = sf.virtual
	}
	if !sc.Virtual {
		if cmd.Flags().Changed("cost-model") || cmd.Flags().Changed("wall-limit") || sf.memoryLimit != "" {
			return errors.New("--cost-model, --wall-limit and --memory-limit go with a run in virtual time: add --virtual")
		}
		return runSimOn(cmd, sf, sc, opts)
	}
	if sf.wallLimit < 0 {
		return fmt.Errorf("--wall-limit %s: give a positive duration, or 0 for no limit", sf.wallLimit)
	}
	if sf.memoryLimit != "" {
		lim, err := sim.ParseBytes(sf.memoryLimit)
		if err != nil {
			return fmt.Errorf("--memory-limit: %w", err)
		}
		sc.MemoryLimit = lim
	}
	return virtualHost(cmd.ErrOrStderr(), func(b sim.Bubble) error {
		opts := append(opts, sim.WithVirtualTime(b), sim.WithWallLimit(sf.wallLimit, stuckHandler(cmd.ErrOrStderr())))
		if !sf.costModel {
			opts = append(opts, sim.WithoutCostModel())
		}
		return runSimOn(cmd, sf, sc, opts)
	})
}

// runSimOn runs the scenario (or the sweep) with the profiles asked for, and writes the
// reports.
func runSimOn(cmd *cobra.Command, sf *simFlags, sc *sim.Scenario, opts []sim.Option) error {
	var err error
	base := cmd.Context()
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	stopOnInterrupt(ctx, cancel, cmd.ErrOrStderr())
	if sf.sizes != "" {
		return runSweep(ctx, cmd, sc, sf, opts)
	}
	if sf.repeat != 1 {
		return errors.New("--repeat goes with --sizes: it runs every size of a sweep several times")
	}
	earlier, err := readReport(sf.compare)
	if err != nil {
		return err
	}
	opts, endStallTrace, err := withStallTrace(sf, cmd.Flags().Changed("stall-threshold"), opts)
	if err != nil {
		return err
	}
	defer endStallTrace(nil)
	var heap *os.File
	if sf.memProfile != "" {
		if heap, err = os.Create(sf.memProfile); err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		defer heap.Close() // on early returns; closed below otherwise
		opts = append(opts, sim.WithHeapProfile(heap))
	}
	profile := sf.cpuProfile
	if sf.profileStep != "" && sf.cpuProfile == "" && sf.stallTrace == "" {
		return errors.New("--profile-step says which step --cpuprofile or --trace-stall follows: give --cpuprofile FILE or --trace-stall FILE too")
	}
	if sf.profileStep != "" && sf.cpuProfile != "" {
		f, err := os.Create(sf.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		opts, profile = append(opts, sim.WithStepCPUProfile(sf.profileStep, f)), ""
	}
	stopProfile, err := startCPUProfile(profile)
	if err != nil {
		return err
	}
	rep, runErr := sim.Run(ctx, sc, opts...)
	profErr := errors.Join(stopProfile(), endStallTrace(rep))
	if heap != nil {
		if err := heap.Close(); err != nil {
			profErr = errors.Join(profErr, fmt.Errorf("--memprofile: %w", err))
		}
	}
	if rep == nil {
		return errors.Join(runErr, profErr)
	}
	if earlier != nil {
		rep.Reproduction = sim.Compare(earlier, rep, sf.compare)
	}
	return writeRun(cmd, sf, rep, runErr, profErr)
}

// writeRun prints a run's table, writes its JSON and HTML reports, and returns what the
// command exits with: the run's error, the profiles', or exit status 3 for a failed
// expectation.
func writeRun(cmd *cobra.Command, sf *simFlags, rep *sim.Report, runErr, profErr error) error {
	if err := rep.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if err := writeReport(sf.jsonOut, rep.WriteJSON); err != nil {
		return err
	}
	if err := writeReport(sf.htmlOut, rep.WriteHTML); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if profErr != nil {
		return profErr
	}
	if !rep.Passed {
		return &exitError{code: 3, err: errors.New("some expectations of the scenario failed (see the table)")}
	}
	return nil
}

// loadScenario loads --scenario (the default one when empty) and returns it with the options
// every run takes: progress on stderr, --nodes, --seed and --log-level.
func loadScenario(cmd *cobra.Command, sf *simFlags) (*sim.Scenario, []sim.Option, error) {
	name := sf.scenario
	if name == "" {
		name = sim.DefaultScenario
	}
	sc, err := sim.Load(name)
	if err != nil {
		return nil, nil, err
	}
	opts := []sim.Option{sim.WithProgress(cmd.ErrOrStderr()), sim.WithNodes(sf.nodes), sim.WithSeed(sf.seed)}
	if sf.logLevel != "" {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(sf.logLevel)); err != nil {
			return nil, nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", sf.logLevel)
		}
		opts = append(opts, sim.WithLogger(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))))
	}
	return sc, opts, nil
}

// withStallTrace adds --trace-stall's option to opts, and returns what closes its file once
// the run has ended (rep; nil on an early return), removing it when no stall was written.
// thresholdGiven says --stall-threshold was on the command line.
func withStallTrace(sf *simFlags, thresholdGiven bool, opts []sim.Option) ([]sim.Option, func(rep *sim.Report) error, error) {
	if sf.stallTrace == "" {
		if thresholdGiven {
			return nil, nil, errors.New("--stall-threshold goes with --trace-stall FILE")
		}
		return opts, func(*sim.Report) error { return nil }, nil
	}
	if sf.stallAt <= 0 {
		return nil, nil, fmt.Errorf("--stall-threshold %s: give a positive duration, like 500ms", sf.stallAt)
	}
	f, err := os.Create(sf.stallTrace)
	if err != nil {
		return nil, nil, fmt.Errorf("--trace-stall: %w", err)
	}
	var once sync.Once
	var cerr error
	end := func(rep *sim.Report) error {
		once.Do(func() {
			if cerr = f.Close(); cerr != nil {
				cerr = fmt.Errorf("--trace-stall: %w", cerr)
			}
			if rep == nil || rep.StallTraceMS == 0 {
				_ = os.Remove(sf.stallTrace) // nothing written: no file to mistake for a trace
			}
		})
		return cerr
	}
	return append(opts, sim.WithStallTrace(f, sf.stallAt, sf.profileStep)), end, nil
}

// runSweep runs the scenario at each of --sizes and writes the cost curve.
func runSweep(ctx context.Context, cmd *cobra.Command, sc *sim.Scenario, sf *simFlags, opts []sim.Option) error {
	if sf.nodes != 0 {
		return errors.New("--sizes and --nodes: give one; --sizes runs the scenario at each of its sizes")
	}
	if sf.memProfile != "" || sf.profileStep != "" || sf.stallTrace != "" || cmd.Flags().Changed("stall-threshold") {
		return errors.New("--memprofile, --profile-step, --trace-stall and --stall-threshold follow one run; with --sizes, look at one size with --nodes instead")
	}
	sizes, err := sim.ParseSizes(sf.sizes)
	if err != nil {
		return err
	}
	if sf.repeat < 1 || sf.repeat > sim.MaxSweepRepeats {
		return fmt.Errorf("--repeat %d: run every size 1 to %d times", sf.repeat, sim.MaxSweepRepeats)
	}
	stopProfile, err := startCPUProfile(sf.cpuProfile)
	if err != nil {
		return err
	}
	sr, runErr := sim.Sweep(ctx, sc, sizes, append(opts, sim.WithRepeats(sf.repeat))...)
	if err := stopProfile(); err != nil {
		return err
	}
	if sr == nil {
		return runErr
	}
	if err := sr.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if err := writeReport(sf.jsonOut, sr.WriteJSON); err != nil {
		return err
	}
	if err := writeReport(sf.htmlOut, sr.WriteHTML); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if !sr.Passed {
		return &exitError{code: 3, err: errors.New("some expectations failed at some size (see the table and the JSON report)")}
	}
	return nil
}

// stopOnInterrupt cancels the run at the first interrupt. Stopping the nodes of a large mesh
// takes a while, so the interrupt after it is left to the runtime, which ends the process at
// once. It stops listening when ctx is done.
func stopOnInterrupt(ctx context.Context, cancel context.CancelFunc, w io.Writer) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	go func() {
		defer signal.Stop(sig)
		select {
		case <-sig:
			signal.Stop(sig)
			fmt.Fprintln(w, "interrupted: stopping the nodes (interrupt again to quit at once)")
			cancel()
		case <-ctx.Done():
		}
	}()
}

// startCPUProfile starts a CPU profile into path, when path is set, and returns the function
// that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

func listScenarios(cmd *cobra.Command) error {
	infos, err := sim.List()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNODES\tDESCRIPTION")
	for _, in := range infos {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", in.Name, in.Nodes, in.Description)
	}
	return tw.Flush()
}

// readReport reads the JSON report of an earlier run (--compare), when path is set.
func readReport(path string) (*sim.Report, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--compare: %w", err)
	}
	var rep sim.Report
	if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Steps) == 0 {
		return nil, fmt.Errorf("--compare %s: not the JSON report of a run (iacp-node sim --json FILE writes one): %v", path, err)
	}
	return &rep, nil
}

// writeReport writes a report with write to path, when path is set.
func writeReport(path string, write func(w io.Writer) error) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report file: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
