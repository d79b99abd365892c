package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// A sweep runs one scenario at several sizes, one after the other in this process, and puts
// what the steady state cost each node against the number of nodes: the cost curve of
// docs/scale.md. A flat curve is the goal: a node's work must not grow with the mesh.

// SteadyStep is the name of the step whose window measures the steady state: a sleep step
// named "steady" (`- sleep: {duration: 60s}` with `name: steady`), else the last sleep step.
const SteadyStep = "steady"

// MaxSweepSizes bounds how many sizes one sweep runs, and MaxSweepRepeats how many times it
// runs each (WithRepeats).
const (
	MaxSweepSizes   = 8
	MaxSweepRepeats = 9
)

// ScalePoint is what one size of a sweep measured, per running node.
type ScalePoint struct {
	Nodes  int  `json:"nodes"`
	Passed bool `json:"passed"`
	// CPUSecondsPerNodeMin and KiBPerNodeMin are the steady window's CPU seconds and bytes
	// written by the nodes' streams, per node and per minute.
	CPUSecondsPerNodeMin float64 `json:"cpu_s_per_node_min"`
	KiBPerNodeMin        float64 `json:"kib_per_node_min"`
	// ModelCPUPerNodeMin is what the CPU cost model charged each node per minute of the
	// steady window (virtual time with the model on; 0 otherwise): the CPU a node would spend
	// on a machine of its own.
	ModelCPUPerNodeMin float64 `json:"model_cpu_s_per_node_min,omitempty"`
	// WallS is how long the run took on the real clock (all of it, not the steady window).
	WallS float64 `json:"wall_s"`
	// RSSPerNodeMiB and HeapPerNodeMiB are the process's resident set and live heap over the
	// nodes, after the steady window.
	RSSPerNodeMiB     float64 `json:"rss_per_node_mib"`
	HeapPerNodeMiB    float64 `json:"heap_per_node_mib"`
	GoroutinesPerNode float64 `json:"goroutines_per_node"`
	// ConvergeMS is the first converge step's time since the join began (0: none).
	ConvergeMS float64 `json:"converge_ms,omitempty"`
	// Overloaded says the simulator's own process was the bottleneck in the steady window:
	// its timers fired late (lag_p99_ms) because the nodes wanted more CPU than the machine
	// has. The point then measures the machine, not the protocol.
	Overloaded    bool    `json:"overloaded"`
	LagP99MS      float64 `json:"lag_p99_ms"`
	CPUSaturation float64 `json:"cpu_saturation"`
	// Repeats is how many runs measured this size (WithRepeats). With more than one, every
	// figure above is the median of the runs that reached their steady window (converge_ms of
	// those that converged), Passed holds if every run passed, Overloaded if any run was, and
	// the Low and High fields are the lowest and highest run's cost: the spread that one run
	// cannot show.
	Repeats int     `json:"repeats"`
	CPULow  float64 `json:"cpu_s_per_node_min_low"`
	CPUHigh float64 `json:"cpu_s_per_node_min_high"`
	KiBLow  float64 `json:"kib_per_node_min_low"`
	KiBHigh float64 `json:"kib_per_node_min_high"`
	// Error is why a run at this size did not complete ("run 2: ..." when there were several).
	Error string `json:"error,omitempty"`
}

// ScaleReport is a sweep: one point per size, and each size's full report.
type ScaleReport struct {
	Scenario string `json:"scenario"`
	// Clock is the clock the runs ran on (Report.Clock).
	Clock  string       `json:"clock"`
	Points []ScalePoint `json:"points"`
	// Repeats is how many times each size ran (WithRepeats), in rounds of every size.
	Repeats int `json:"repeats"`
	// CPUGrowth and KiBGrowth are the largest size's cost per node over the smallest's (1.0
	// is flat), medians over medians; 0 when not measured. The Low and High growths pair the
	// runs' extremes (the largest size's lowest over the smallest's highest, and its highest
	// over the smallest's lowest): the growth lies between them, whichever runs were typical.
	CPUGrowth     float64 `json:"cpu_growth"`
	KiBGrowth     float64 `json:"kib_growth"`
	CPUGrowthLow  float64 `json:"cpu_growth_low"`
	CPUGrowthHigh float64 `json:"cpu_growth_high"`
	KiBGrowthLow  float64 `json:"kib_growth_low"`
	KiBGrowthHigh float64 `json:"kib_growth_high"`
	Passed        bool    `json:"passed"`
	// Runs are the runs' full reports, in the order they ran.
	Runs []*Report `json:"runs"`
}

// ParseSizes reads a comma-separated list of node counts ("100,300,1000"): each 2 to MaxNodes,
// increasing, at most MaxSweepSizes of them.
func ParseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 2 || n > MaxNodes {
			return nil, fmt.Errorf("sizes %q: %q is not a node count from 2 to %d", s, f, MaxNodes)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("sizes %q: list them in increasing order", s)
		}
		out = append(out, n)
	}
	if len(out) < 2 || len(out) > MaxSweepSizes {
		return nil, fmt.Errorf("sizes %q: give 2 to %d node counts, like 100,300,1000", s, MaxSweepSizes)
	}
	return out, nil
}

// Sweep runs the scenario at each size (WithNodes is overridden) and returns the cost curve;
// with WithRepeats(r), r rounds of every size, smallest first, so that a drift of the machine
// falls on every size alike. The scenario must have a sleep step to measure the steady state
// (see SteadyStep). A size that cannot run is a point with its error; the sweep goes on
// unless ctx ends.
func Sweep(ctx context.Context, scenario *Scenario, sizes []int, opts ...Option) (*ScaleReport, error) {
	if steadyIndex(scenario) < 0 {
		return nil, fmt.Errorf("scenario %s has no sleep step to measure the steady state: add `- sleep: {duration: 60s}` named %q after it converges", scenario.Name, SteadyStep)
	}
	cfg := runConfig{repeats: 1}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.stallTrace != nil {
		return nil, errors.New("sim.WithStallTrace follows one run (one flight recorder, one trace): give it to Run, not Sweep")
	}
	sr := &ScaleReport{Scenario: scenario.Name, Repeats: cfg.repeats, Passed: true}
	measured := make([][]ScalePoint, len(sizes))
sweep:
	for range cfg.repeats {
		for i, n := range sizes {
			// Give the last run's memory back to the system first: in rounds a small mesh
			// follows a large one, and its RSS per node would count what the process kept.
			debug.FreeOSMemory()
			rep, err := Run(ctx, scenario, append(slices.Clone(opts), WithNodes(n))...)
			p := ScalePoint{Nodes: n}
			if rep != nil {
				sr.Runs = append(sr.Runs, rep)
				p = pointOf(rep)
				sr.Clock = rep.Clock
			}
			if err != nil {
				p.Error = err.Error()
				p.Passed = false
			}
			measured[i] = append(measured[i], p)
			if ctx.Err() != nil {
				break sweep
			}
		}
	}
	for _, ps := range measured {
		if len(ps) > 0 {
			p := combine(ps)
			sr.Passed = sr.Passed && p.Passed
			sr.Points = append(sr.Points, p)
		}
	}
	if ctx.Err() != nil {
		return sr, ctx.Err()
	}
	first, last := sr.Points[0], sr.Points[len(sr.Points)-1]
	sr.CPUGrowth = ratioOf(last.CPUSecondsPerNodeMin, first.CPUSecondsPerNodeMin)
	sr.KiBGrowth = ratioOf(last.KiBPerNodeMin, first.KiBPerNodeMin)
	sr.CPUGrowthLow, sr.CPUGrowthHigh = ratioOf(last.CPULow, first.CPUHigh), ratioOf(last.CPUHigh, first.CPULow)
	sr.KiBGrowthLow, sr.KiBGrowthHigh = ratioOf(last.KiBLow, first.KiBHigh), ratioOf(last.KiBHigh, first.KiBLow)
	return sr, nil
}

// combine makes one size's point of its runs' points (see ScalePoint.Repeats).
func combine(ps []ScalePoint) ScalePoint {
	out := ScalePoint{Nodes: ps[0].Nodes, Passed: true, Repeats: len(ps)}
	var cpu, kib, rss, heap, gor, conv, model, wall []float64
	var errs []string
	for k, p := range ps {
		out.Passed = out.Passed && p.Passed
		out.Overloaded = out.Overloaded || p.Overloaded
		out.LagP99MS, out.CPUSaturation = max(out.LagP99MS, p.LagP99MS), max(out.CPUSaturation, p.CPUSaturation)
		switch {
		case p.Error != "" && len(ps) > 1:
			errs = append(errs, fmt.Sprintf("run %d: %s", k+1, p.Error))
		case p.Error != "":
			errs = append(errs, p.Error)
		}
		if p.CPUSecondsPerNodeMin > 0 { // the run reached its steady window
			cpu, kib, rss = append(cpu, p.CPUSecondsPerNodeMin), append(kib, p.KiBPerNodeMin), append(rss, p.RSSPerNodeMiB)
			heap, gor = append(heap, p.HeapPerNodeMiB), append(gor, p.GoroutinesPerNode)
			model, wall = append(model, p.ModelCPUPerNodeMin), append(wall, p.WallS)
		}
		if p.ConvergeMS > 0 {
			conv = append(conv, p.ConvergeMS)
		}
	}
	out.Error = strings.Join(errs, "; ")
	out.CPUSecondsPerNodeMin, out.KiBPerNodeMin = median(cpu), median(kib)
	out.RSSPerNodeMiB, out.HeapPerNodeMiB, out.GoroutinesPerNode = median(rss), median(heap), median(gor)
	out.ConvergeMS = median(conv)
	out.ModelCPUPerNodeMin, out.WallS = median(model), median(wall)
	if len(cpu) > 0 {
		out.CPULow, out.CPUHigh = slices.Min(cpu), slices.Max(cpu)
		out.KiBLow, out.KiBHigh = slices.Min(kib), slices.Max(kib)
	}
	return out
}

// median is the middle of xs (the mean of the two middle ones for an even count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

func ratioOf(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return round3(a / b)
}

// steadyIndex is the index of the step that measures the steady state, or -1.
func steadyIndex(sc *Scenario) int {
	last := -1
	for i, st := range sc.Steps {
		if st.Action != "sleep" {
			continue
		}
		if st.Name == SteadyStep {
			return i
		}
		last = i
	}
	return last
}

// pointOf takes a run's steady window and convergence.
func pointOf(rep *Report) ScalePoint {
	p := ScalePoint{Nodes: rep.Nodes, Passed: rep.Passed, WallS: round3(rep.WallMS / 1000)}
	var steady *StepResult
	for i := range rep.Steps {
		st := &rep.Steps[i]
		if st.Action == "converge" && p.ConvergeMS == 0 {
			p.ConvergeMS = st.Metrics["converge_ms"]
		}
		if st.Action == "sleep" && (steady == nil || steady.Name != SteadyStep) {
			steady = st
		}
	}
	if steady == nil {
		p.Error = "the run ended before its steady window"
		p.Passed = false
		return p
	}
	m := steady.Metrics
	p.CPUSecondsPerNodeMin, p.KiBPerNodeMin = m["cpu_s_per_node_min"], m["kib_per_node_min"]
	p.RSSPerNodeMiB, p.HeapPerNodeMiB, p.GoroutinesPerNode = m["rss_per_node_mib"], m["heap_per_node_mib"], m["goroutines_per_node"]
	p.Overloaded, p.LagP99MS, p.CPUSaturation = m["overloaded"] == 1, m["lag_p99_ms"], m["cpu_saturation"]
	p.ModelCPUPerNodeMin = m["model_cpu_s_per_node_min"]
	return p
}

// WriteJSON writes the sweep as indented JSON, each size's full report included.
func (sr *ScaleReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(sr)
}

// WriteText writes the cost curve as a table, and says where the simulator was the
// bottleneck. With several runs a size, the figures are medians and the table adds the
// lowest and highest run's CPU and the growth between the extremes.
func (sr *ScaleReport) WriteText(w io.Writer) error {
	var b strings.Builder
	many := sr.Repeats > 1
	fmt.Fprintf(&b, "sweep %s: steady-state cost per node against the number of nodes", sr.Scenario)
	if many {
		fmt.Fprintf(&b, " (medians of %d runs a size)", sr.Repeats)
	}
	fmt.Fprintf(&b, "\n\n%6s  %6s  %14s  %12s  %8s  %8s  %10s  %10s", "nodes", "result", "cpu-s/node/min", "KiB/node/min", "RSS MiB", "heap MiB", "goroutines", "converge s")
	if many {
		fmt.Fprintf(&b, "  %4s  %13s", "runs", "cpu-s low-high")
	}
	b.WriteString("\n")
	for _, p := range sr.Points {
		res := "ok"
		if !p.Passed {
			res = "FAIL"
		}
		if p.Overloaded {
			res += "*"
		}
		fmt.Fprintf(&b, "%6d  %6s  %14.3f  %12.1f  %8.2f  %8.2f  %10.0f  %10.1f", p.Nodes, res, p.CPUSecondsPerNodeMin, p.KiBPerNodeMin,
			p.RSSPerNodeMiB, p.HeapPerNodeMiB, p.GoroutinesPerNode, p.ConvergeMS/1000)
		if many {
			fmt.Fprintf(&b, "  %4d  %6.3f-%.3f", p.Repeats, p.CPULow, p.CPUHigh)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nfrom %d to %d nodes: CPU per node x%.2f, bytes per node x%.2f (1.00 is flat)\n",
		sr.Points[0].Nodes, sr.Points[len(sr.Points)-1].Nodes, sr.CPUGrowth, sr.KiBGrowth)
	if many {
		fmt.Fprintf(&b, "between the runs' extremes: CPU x%.2f to x%.2f, bytes x%.2f to x%.2f\n",
			sr.CPUGrowthLow, sr.CPUGrowthHigh, sr.KiBGrowthLow, sr.KiBGrowthHigh)
	}
	for _, p := range sr.Points {
		if p.Overloaded {
			fmt.Fprintf(&b, "* %d nodes: the simulator itself was the bottleneck in the steady window (timers %.0f ms late at p99, CPU %.0f%% of the cores): this point measures the machine\n",
				p.Nodes, p.LagP99MS, 100*p.CPUSaturation)
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "! %d nodes: %s\n", p.Nodes, p.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteHTML writes the cost curve as a self-contained page: CPU, bytes and memory per node
// against the number of nodes, then the table.
func (sr *ScaleReport) WriteHTML(w io.Writer) error {
	curve := func(label string, y func(ScalePoint) float64) []Series {
		s := Series{Label: label}
		for _, p := range sr.Points {
			if p.Error == "" || y(p) > 0 {
				s.Points = append(s.Points, Point{X: float64(p.Nodes), Y: y(p)})
			}
		}
		return []Series{s}
	}
	var text strings.Builder
	if err := sr.WriteText(&text); err != nil {
		return err
	}
	cpu := curve("the simulator's CPU", func(p ScalePoint) float64 { return p.CPUSecondsPerNodeMin })
	if sr.Repeats > 1 {
		cpu[0].Label = "median of " + strconv.Itoa(sr.Repeats) + " runs"
		cpu = append(cpu, curve("lowest run", func(p ScalePoint) float64 { return p.CPULow })...)
		cpu = append(cpu, curve("highest run", func(p ScalePoint) float64 { return p.CPUHigh })...)
	}
	if sr.Clock == ClockVirtual {
		cpu = append(cpu, curve("charged by the cost model", func(p ScalePoint) float64 { return p.ModelCPUPerNodeMin })...)
	}
	data := struct {
		S             *ScaleReport
		Headline      []Figure
		CPU, KiB, RSS template.HTML
		Table         string
	}{S: sr, Headline: sr.Headline(), Table: text.String(),
		CPU: plot("CPU per node in the steady state (flat is the goal)", "nodes", "CPU seconds per node per minute", cpu, false),
		KiB: plot("Bytes sent per node in the steady state", "nodes", "KiB per node per minute",
			curve("KiB/node/min", func(p ScalePoint) float64 { return p.KiBPerNodeMin }), false),
		RSS: plot("Memory per node", "nodes", "MiB per node",
			append(curve("RSS", func(p ScalePoint) float64 { return p.RSSPerNodeMiB }),
				curve("live heap", func(p ScalePoint) float64 { return p.HeapPerNodeMiB })...), false),
	}
	return scalePage.Execute(w, data)
}

var scalePage = template.Must(template.New("scale").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>iacp-node sim sweep: {{.S.Scenario}}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:900px;color:#222} pre{background:#f6f6f6;padding:1em;overflow:auto}
.figures{display:flex;flex-wrap:wrap;gap:10px;margin:1em 0}
.figure{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:130px}
.figure .label{font-size:12px;color:#666}.figure .value{font-size:22px;font-weight:bold}.figure .note{font-size:11px;color:#777}
.figure.bad{border-color:#b00}.figure.bad .value{color:#b00}</style></head>
<body><h1>Sweep of {{.S.Scenario}}: cost per node against the number of nodes</h1>
<div class="figures" id="headline">{{range .Headline}}<div class="figure{{if .Bad}} bad{{end}}"><div class="label">{{.Label}}</div><div class="value">{{.Value}}</div><div class="note">{{.Note}}</div></div>
{{end}}</div>
<p>CPU per node per minute grew x{{printf "%.2f" .S.CPUGrowth}} and bytes per node x{{printf "%.2f" .S.KiBGrowth}} from the smallest to the largest mesh (1.00 is flat){{if gt .S.Repeats 1}}, medians of {{.S.Repeats}} runs a size; between the runs' extremes CPU grew x{{printf "%.2f" .S.CPUGrowthLow}} to x{{printf "%.2f" .S.CPUGrowthHigh}}{{end}}. Points marked * in the table were measured while the simulator's own process was the bottleneck.</p>
{{.CPU}}
{{.KiB}}
{{.RSS}}
<pre>{{.Table}}</pre>
</body></html>
`))

// Headline returns the sweep's headline figures: the sizes and their clock, the outcome, how
// the steady cost per node grew from the smallest mesh to the largest (1.00 is flat; the goal
// is 1.5 at most), and what the largest mesh cost.
func (sr *ScaleReport) Headline() []Figure {
	first, last := sr.Points[0], sr.Points[len(sr.Points)-1]
	sizes := make([]string, len(sr.Points))
	wall := 0.0
	for i, p := range sr.Points {
		sizes[i] = strconv.Itoa(p.Nodes)
		wall += p.WallS * float64(max(p.Repeats, 1))
	}
	figs := []Figure{
		{Label: "sizes", Value: strings.Join(sizes, ", "), Note: fmt.Sprintf("%d run(s) a size, %s clock", max(sr.Repeats, 1), sr.Clock)},
		{Label: "result", Value: map[bool]string{true: "passed", false: "FAILED"}[sr.Passed], Note: "every run of every size", Bad: !sr.Passed},
		{Label: "CPU per node grew", Value: fmt.Sprintf("×%.2f", sr.CPUGrowth), Note: fmt.Sprintf("steady window, %d to %d nodes", first.Nodes, last.Nodes), Bad: sr.CPUGrowth > 1.5},
		{Label: "bytes per node grew", Value: fmt.Sprintf("×%.2f", sr.KiBGrowth), Note: "steady window"},
	}
	if first.ModelCPUPerNodeMin > 0 {
		g := ratioOf(last.ModelCPUPerNodeMin, first.ModelCPUPerNodeMin)
		figs = append(figs, Figure{Label: "charged CPU per node grew", Value: fmt.Sprintf("×%.2f", g), Note: "the cost model's, steady window", Bad: g > 1.5})
	}
	figs = append(figs,
		Figure{Label: fmt.Sprintf("memory per node at %d", last.Nodes), Value: fmt.Sprintf("%.1f MiB", last.RSSPerNodeMiB), Note: fmt.Sprintf("resident; heap %.1f MiB", last.HeapPerNodeMiB)},
		Figure{Label: fmt.Sprintf("converged at %d", last.Nodes), Value: seconds(last.ConvergeMS), Note: "from the start of the join"},
		Figure{Label: "wall time", Value: seconds(1000 * wall), Note: "every run"})
	return figs
}
