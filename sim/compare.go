package sim

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Reproducibility (docs/sim.md, "Repeatability"). In virtual time one seed gives one outcome:
// every step passes or fails alike and counts alike (what converged, what was delivered,
// detected, lost or suspected). It does not give every number: the runtime schedules the
// goroutines of the bubble in an order of its own, and that order moves a message's arrival
// by a timer tick here and there, so latencies, timings and memory may differ from one run of
// a seed to the next. Compare says which did.

// Difference is one number that two runs of a scenario measured differently.
type Difference struct {
	Step   string  `json:"step"`
	Metric string  `json:"metric"`
	First  float64 `json:"first"`
	Second float64 `json:"second"`
}

// String is the difference in one phrase.
func (d Difference) String() string {
	return fmt.Sprintf("%s %s %g → %g", d.Step, d.Metric, d.First, d.Second)
}

// Reproduction compares a run with an earlier run of the same scenario.
type Reproduction struct {
	// Against names the earlier run (the file it was read from).
	Against string `json:"against"`
	// SameSeed says both runs had one scenario, size and seed: only then is the same outcome
	// expected.
	SameSeed bool `json:"same_seed"`
	// SameOutcome holds when every step passed or failed alike and every count was equal.
	SameOutcome bool `json:"same_outcome"`
	// Outcomes lists the steps that passed in one run and failed in the other (or ran in one
	// only).
	Outcomes []string `json:"outcomes,omitempty"`
	// Counts are the counts that differed (what converged, was delivered, detected, lost or
	// suspected: every metric that is not a time, a rate of the machine or a size).
	Counts []Difference `json:"counts,omitempty"`
	// Numbers are the other numbers that differed: latencies, timings, CPU, memory.
	Numbers []Difference `json:"numbers,omitempty"`
	// Compared is how many numbers the two runs had in common.
	Compared int `json:"compared"`
}

// measureSuffixes and measureNames mark the metrics that measure time, the machine or memory:
// what the schedule of goroutines may move. Every other metric is a count.
var (
	measureSuffixes = []string{"_ms", "_mib", "_min", "_rps", "_per_node", "_s_p50", "_s_max", "_mean", "_max", "_p50"}
	measureNames    = []string{"cpu_cores", "cpu_saturation", "overloaded"}
)

// isCount reports whether the metric is a count (see measureSuffixes).
func isCount(metric string) bool {
	if slices.Contains(measureNames, metric) {
		return false
	}
	return !slices.ContainsFunc(measureSuffixes, func(s string) bool { return strings.HasSuffix(metric, s) })
}

// Compare compares second, a run, with first, an earlier one named against.
func Compare(first, second *Report, against string) *Reproduction {
	rp := &Reproduction{Against: against, SameOutcome: true,
		SameSeed: first.Scenario == second.Scenario && first.Nodes == second.Nodes && first.Seed == second.Seed}
	for i := range max(len(first.Steps), len(second.Steps)) {
		if i >= len(first.Steps) || i >= len(second.Steps) {
			rp.Outcomes = append(rp.Outcomes, fmt.Sprintf("step %d ran in one run only", i+1))
			continue
		}
		a, b := &first.Steps[i], &second.Steps[i]
		name := fmt.Sprintf("%d %s", a.Index, a.Name)
		if a.Passed != b.Passed || a.Name != b.Name {
			rp.Outcomes = append(rp.Outcomes, fmt.Sprintf("step %s: passed %v, then %v", name, a.Passed, b.Passed))
		}
		for _, k := range sortedKeys(a.Metrics) {
			v, ok := b.Metrics[k]
			if !ok {
				continue
			}
			rp.Compared++
			if v == a.Metrics[k] {
				continue
			}
			d := Difference{Step: name, Metric: k, First: a.Metrics[k], Second: v}
			if isCount(k) {
				rp.Counts = append(rp.Counts, d)
			} else {
				rp.Numbers = append(rp.Numbers, d)
			}
		}
	}
	rp.SameOutcome = len(rp.Outcomes) == 0 && len(rp.Counts) == 0
	return rp
}

// WriteText says what the comparison found.
func (rp *Reproduction) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "the same outcome and the same counts"
	if !rp.SameOutcome {
		verdict = "ANOTHER OUTCOME"
	}
	fmt.Fprintf(&b, "against %s: %s; %d of %d numbers differed\n", rp.Against, verdict, len(rp.Counts)+len(rp.Numbers), rp.Compared)
	if !rp.SameSeed {
		b.WriteString("  (another scenario, size or seed: the runs are not expected to agree)\n")
	}
	for _, o := range rp.Outcomes {
		fmt.Fprintf(&b, "  outcome: %s\n", o)
	}
	for _, d := range rp.Counts {
		fmt.Fprintf(&b, "  count:   %s\n", d)
	}
	for _, d := range rp.Numbers {
		fmt.Fprintf(&b, "  number:  %s\n", d)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Text is WriteText's text.
func (rp *Reproduction) Text() string {
	var b strings.Builder
	_ = rp.WriteText(&b)
	return b.String()
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
