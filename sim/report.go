package sim

import (
	"encoding/json"
	"io"
	"time"
)

// Point is one point of a plot.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Series is one labelled line of a plot.
type Series struct {
	Label  string  `json:"label"`
	Points []Point `json:"points"`
}

// StepResult is what one step measured and whether its expectations held.
type StepResult struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Action string `json:"action"`
	// StartMS is when the step began, in milliseconds since the run began, and DurationMS
	// how long it took, both on the run's clock (Report.Clock); WallMS is how long it took on
	// the real clock (the same as DurationMS, give or take, in real time).
	StartMS    float64            `json:"start_ms"`
	DurationMS float64            `json:"duration_ms"`
	WallMS     float64            `json:"wall_ms"`
	Metrics    map[string]float64 `json:"metrics"`
	// Errors counts failed requests, lookups or sends by IACP error code.
	Errors map[string]int `json:"errors,omitempty"`
	Checks []Check        `json:"checks,omitempty"`
	// Error is set when the step could not run at all (the run stops there).
	Error  string `json:"error,omitempty"`
	Passed bool   `json:"passed"`
}

// Report is the result of one run.
type Report struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	Nodes       int    `json:"nodes"`
	Seed        uint64 `json:"seed"`
	Transport   string `json:"transport"`
	// Trust is the nodes' trust mode: authority or open.
	Trust string `json:"trust"`
	// Clock is the clock the run ran on: "real", or "virtual" (docs/sim.md, "Virtual time":
	// latencies are then the links' plus the timers', plus what the CPU cost model charged).
	Clock string `json:"clock"`
	// CostModel is the CPU cost model's charges in a virtual run; nil in real time, or with the
	// model off.
	CostModel *CostModel `json:"cost_model,omitempty"`
	// MemoryLimit is the soft memory limit the process ran under (a virtual run's
	// memory_limit; 0: none).
	MemoryLimit Bytes `json:"memory_limit,omitempty"`
	// Network is the medium the run had (in virtual time with DefaultVirtualLatency when the
	// scenario set no latency).
	Network NetworkSpec `json:"network"`
	Started time.Time   `json:"started"`
	// DurationMS is the run's length on its clock, WallMS on the real clock.
	DurationMS float64 `json:"duration_ms"`
	WallMS     float64 `json:"wall_ms"`
	// Passed is true when every step ran and every expectation held.
	Passed bool         `json:"passed"`
	Steps  []StepResult `json:"steps"`
	// RequestCDF is the distribution of request round trips (ms) over every load and churn
	// step; LookupCDF the same for lookups.
	RequestCDF []Point `json:"request_cdf,omitempty"`
	LookupCDF  []Point `json:"lookup_cdf,omitempty"`
	// Propagation has one series per broadcast or group message: the fraction of its
	// expected receivers reached (y) by each time in ms since it was sent (x).
	Propagation []Series `json:"propagation,omitempty"`
	// Liveness is every liveness transition the nodes saw, except first sightings.
	Liveness []transition `json:"liveness,omitempty"`
	// DroppedItems counts gossip items the simulator's observers could not keep up with.
	DroppedItems uint64 `json:"dropped_items"`
	// PeakHeapPerNodeMiB is the largest live heap per running node measured after a step.
	PeakHeapPerNodeMiB float64 `json:"peak_heap_per_node_mib"`
	// Reproduction compares this run with an earlier one (iacp-node sim --compare); nil
	// without.
	Reproduction *Reproduction `json:"reproduction,omitempty"`
	// StallTraceMS is how late the simulator's timer fired at the stall whose execution trace
	// WithStallTrace wrote (0: none written).
	StallTraceMS float64 `json:"stall_trace_ms,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
