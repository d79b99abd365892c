package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// summaryMetrics are shown in the table when a step measured them, in this order.
var summaryMetrics = []string{
	"converge_ms", "heal_ms", "lookup_success", "lookup_p50_ms", "lookup_p99_ms",
	"request_success", "request_p50_ms", "request_p99_ms", "delivery_ratio",
	"broadcast_p50_ms", "broadcast_p99_ms", "broadcast_max_ms", "group_p50_ms", "group_p99_ms",
	"answer_ratio", "ask_p50_ms", "ask_p99_ms", "missing",
	"detected_ratio", "detection_p50_ms", "detection_max_ms", "rejoin_p50_ms", "false_suspicions",
	"offline_delivered", "lost", "revocation_applied_ms", "intruder_sent", "refused_ratio", "named_ratio", "acted_on", "control_acted_ratio",
}

// WriteText writes the summary table: one row per step with its main metrics, memory and CPU,
// then the failed expectations and the errors by code.
func (r *Report) WriteText(w io.Writer) error {
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED"
	}
	virtual := r.Clock == ClockVirtual
	if virtual {
		fmt.Fprintf(w, "scenario %s: %d nodes, %s, trust %s, seed %d, %.1f s of virtual time in %.1f s: %s\n", r.Scenario, r.Nodes, r.Transport, r.Trust, r.Seed, r.DurationMS/1000, r.WallMS/1000, verdict)
		fmt.Fprintln(w, clockNote(r))
	} else {
		fmt.Fprintf(w, "scenario %s: %d nodes, %s, trust %s, seed %d, %.1f s: %s\n", r.Scenario, r.Nodes, r.Transport, r.Trust, r.Seed, r.DurationMS/1000, verdict)
	}
	fmt.Fprintln(w)
	if err := r.writeTable(w); err != nil {
		return err
	}
	for _, s := range r.Steps {
		writeStepNotes(w, &s)
	}
	fmt.Fprintf(w, "peak live heap per node: %.2f MiB; gossip items the observers dropped: %d\n", r.PeakHeapPerNodeMiB, r.DroppedItems)
	if r.Reproduction != nil {
		return r.Reproduction.WriteText(w)
	}
	return nil
}

// writeTable writes one line a step: its result, its times, its headline metrics, its heap
// per node and CPU.
func (r *Report) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tstep\tresult\ttime\twall\tmeasured\theap/node\tcpu")
	for _, s := range r.Steps {
		ok := "ok"
		if !s.Passed {
			ok = "FAIL"
		}
		var parts []string
		for _, k := range summaryMetrics {
			if v, found := s.Metrics[k]; found && !(k == "false_suspicions" && v == 0) {
				parts = append(parts, fmt.Sprintf("%s=%g", strings.TrimSuffix(k, "_ms")+unit(k), v))
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.1fs\t%.1fs\t%s\t%.2f MiB\t%.0f ms\n", s.Index, s.Name, ok, s.DurationMS/1000, s.WallMS/1000,
			strings.Join(parts, " "), s.Metrics["heap_per_node_mib"], s.Metrics["cpu_ms"])
	}
	return tw.Flush()
}

// writeStepNotes writes what a step's line leaves out: overload, excused and failed checks,
// errors by code, refusals by rule, and why it could not run.
func writeStepNotes(w io.Writer, s *StepResult) {
	if s.Metrics["overloaded"] == 1 {
		fmt.Fprintf(w, "step %d %s: %s\n", s.Index, s.Name, overloadNote(s))
	}
	for _, c := range s.Checks {
		if c.Excused != "" {
			fmt.Fprintf(w, "step %d %s: %s = %g excused (expected %s): %s\n", s.Index, s.Name, c.Metric, c.Got, c.Want, c.Excused)
		}
		if c.OK {
			continue
		}
		if c.Missing {
			fmt.Fprintf(w, "step %d %s: expected %s %s, but the step does not measure it\n", s.Index, s.Name, c.Metric, c.Want)
		} else {
			fmt.Fprintf(w, "step %d %s: expected %s %s, got %g\n", s.Index, s.Name, c.Metric, c.Want, c.Got)
		}
	}
	if len(s.Errors) > 0 {
		codes := make([]string, 0, len(s.Errors))
		for k, v := range s.Errors {
			codes = append(codes, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(codes)
		fmt.Fprintf(w, "step %d %s: errors by code: %s\n", s.Index, s.Name, strings.Join(codes, " "))
	}
	var rules []string
	for k, v := range s.Metrics {
		if rule, ok := strings.CutPrefix(k, "rule_"); ok {
			rules = append(rules, fmt.Sprintf("%s %.0f%%", rule, 100*v))
		}
	}
	if len(rules) > 0 {
		sort.Strings(rules)
		fmt.Fprintf(w, "step %d %s: refusals by the rule they name: %s\n", s.Index, s.Name, strings.Join(rules, ", "))
	}
	if s.Error != "" {
		fmt.Fprintf(w, "step %d %s: could not run: %s\n", s.Index, s.Name, s.Error)
	}
}

// clockNote says what a virtual run's times mean.
func clockNote(r *Report) string {
	note := fmt.Sprintf("virtual time: a latency is the links' (%s", r.Network.Latency)
	if r.Network.Jitter > 0 {
		note += fmt.Sprintf(" ± %s", r.Network.Jitter)
	}
	note += " one way"
	if r.Network.Tick > 0 {
		note += fmt.Sprintf(", arriving on a %s tick", r.Network.Tick)
	}
	note += ") plus the timers'"
	if r.CostModel != nil {
		return note + ", plus what the " + r.CostModel.String() + " charged the nodes"
	}
	return note + "; CPU costs no virtual time (cost model off)"
}

func unit(k string) string {
	if strings.HasSuffix(k, "_ms") {
		return "(ms)"
	}
	return ""
}
