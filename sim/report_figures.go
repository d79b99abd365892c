package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a person reads first in a report: a handful of figures about the whole run, then each
// step's few key metrics. Both are computed from the steps' metrics.

// Figure is one headline figure of a report: a label, its value as shown, and what it is.
type Figure struct {
	Label string
	Value string
	Note  string
	Bad   bool // the figure is why the run failed, or a warning
}

// Headline returns the report's headline figures, in reading order: the mesh and its clock,
// the outcome, when it converged, what was delivered, what was falsely suspected, the 99th
// percentiles of latency, and what a node cost.
func (r *Report) Headline() []Figure {
	figs := []Figure{{Label: "nodes", Value: strconv.Itoa(r.Nodes), Note: fmt.Sprintf("%s, trust %s, seed %d", r.Transport, r.Trust, r.Seed)}}
	figs = append(figs, r.clockFigure())
	failed := 0
	for _, s := range r.Steps {
		if !s.Passed {
			failed++
		}
	}
	res := Figure{Label: "result", Value: "passed", Note: fmt.Sprintf("%d steps", len(r.Steps))}
	if !r.Passed {
		res = Figure{Label: "result", Value: "FAILED", Note: fmt.Sprintf("%d of %d steps failed", failed, len(r.Steps)), Bad: true}
	}
	figs = append(figs, res)
	if v, ok := r.first("converge_ms"); ok {
		figs = append(figs, Figure{Label: "converged after", Value: seconds(v), Note: "from the start of the join", Bad: r.lowest("converged") == 0})
	}
	for _, d := range []struct{ label, metric, note string }{
		{"delivered", "delivery_ratio", "of each broadcast and group message, worst step"},
		{"delivered under churn", "broadcast_delivery_ratio", "of the broadcasts during churn, worst step"},
		{"requests answered", "request_success", "worst step"},
		{"lookups right", "lookup_success", "worst step"},
	} {
		if v, ok := r.lowestOK(d.metric); ok {
			figs = append(figs, Figure{Label: d.label, Value: percent(v), Note: d.note, Bad: v < 1})
		}
	}
	fs := r.sum("false_suspicions")
	figs = append(figs, Figure{Label: "false suspicions", Value: strconv.FormatFloat(fs, 'f', 0, 64), Note: "every step", Bad: fs > 0})
	for _, p := range []struct{ label, metric string }{
		{"request p99", "request_p99_ms"}, {"broadcast p99", "broadcast_p99_ms"}, {"lookup p99", "lookup_p99_ms"}, {"detection p99", "detection_p99_ms"},
	} {
		if v, ok := r.highest(p.metric); ok {
			figs = append(figs, Figure{Label: p.label, Value: millis(v), Note: "worst step"})
		}
	}
	if v, ok := r.highest("rss_per_node_mib"); ok {
		figs = append(figs, Figure{Label: "memory per node", Value: fmt.Sprintf("%.1f MiB", v), Note: fmt.Sprintf("resident, at its peak; heap %.1f MiB", r.PeakHeapPerNodeMiB)})
	}
	cpu := r.sum("cpu_ms") / 1000 / float64(max(r.Nodes, 1))
	note := "the process's CPU over the nodes, whole run"
	if m := r.sum("model_cpu_ms"); m > 0 {
		note += fmt.Sprintf("; the cost model charged %.2f s a node", m/1000/float64(max(r.Nodes, 1)))
	}
	figs = append(figs, Figure{Label: "CPU per node", Value: fmt.Sprintf("%.2f s", cpu), Note: note})
	return figs
}

// clockFigure says which clock the run was on and, in virtual time, how fast it ran.
func (r *Report) clockFigure() Figure {
	if r.Clock != ClockVirtual {
		return Figure{Label: "clock", Value: "real", Note: fmt.Sprintf("%s in all", seconds(r.DurationMS))}
	}
	note := fmt.Sprintf("%s of mesh time in %s of wall time", seconds(r.DurationMS), seconds(r.WallMS))
	if r.CostModel == nil {
		note += "; CPU cost model off"
	}
	if r.MemoryLimit > 0 {
		note += "; memory limit " + r.MemoryLimit.String()
	}
	return Figure{Label: "clock", Value: "virtual", Note: note}
}

// KeyMetrics returns a step's few key metrics (its action's, in order), then the cost columns
// every step has.
func (s *StepResult) KeyMetrics() []Figure {
	var out []Figure
	for _, k := range actions[s.Action].headline {
		if v, ok := s.Metrics[k]; ok {
			out = append(out, Figure{Label: strings.ReplaceAll(strings.TrimSuffix(k, "_ms"), "_", " "), Value: metricValue(k, v)})
		}
	}
	return out
}

// AllMetrics returns every metric of the step, by name.
func (s *StepResult) AllMetrics() []Figure {
	out := make([]Figure, 0, len(s.Metrics))
	for _, k := range sortedKeys(s.Metrics) {
		out = append(out, Figure{Label: k, Value: strconv.FormatFloat(s.Metrics[k], 'g', -1, 64)})
	}
	return out
}

// metricValue formats a metric for a person: milliseconds as ms or s, ratios as percents.
func metricValue(k string, v float64) string {
	switch {
	case strings.HasSuffix(k, "_ms"):
		return millis(v)
	case strings.HasSuffix(k, "_ratio") || strings.HasSuffix(k, "_success"):
		return percent(v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func millis(v float64) string {
	if v >= 10000 {
		return seconds(v)
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

func seconds(ms float64) string { return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s" }

func percent(v float64) string {
	if v == 1 {
		return "100 %"
	}
	return strconv.FormatFloat(100*v, 'f', 1, 64) + " %"
}

// first is the metric's value in the first step that measured it.
func (r *Report) first(metric string) (float64, bool) {
	for _, s := range r.Steps {
		if v, ok := s.Metrics[metric]; ok {
			return v, true
		}
	}
	return 0, false
}

// values is the metric over the steps that measured it.
func (r *Report) values(metric string) []float64 {
	var out []float64
	for _, s := range r.Steps {
		if v, ok := s.Metrics[metric]; ok {
			out = append(out, v)
		}
	}
	return out
}

func (r *Report) lowest(metric string) float64 {
	if vs := r.values(metric); len(vs) > 0 {
		return slices.Min(vs)
	}
	return -1
}

func (r *Report) lowestOK(metric string) (float64, bool) {
	vs := r.values(metric)
	if len(vs) == 0 {
		return 0, false
	}
	return slices.Min(vs), true
}

func (r *Report) highest(metric string) (float64, bool) {
	vs := r.values(metric)
	if len(vs) == 0 {
		return 0, false
	}
	return slices.Max(vs), true
}

func (r *Report) sum(metric string) float64 {
	t := 0.0
	for _, v := range r.values(metric) {
		t += v
	}
	return t
}
