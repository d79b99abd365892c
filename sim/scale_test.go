package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A sweep runs the scenario at each size and puts the steady window's cost per node against
// the size, in the table, the JSON and the HTML curves; with two runs a size, in two rounds,
// each point is their median within the lowest and highest run.
func TestSweep_CostPerNodeAgainstTheSize(t *testing.T) {
	sc, err := Parse([]byte(`
seed: 5
node: {heartbeat_interval: 1s}
steps:
  - join: {}
  - converge: {timeout: 40s}
  - sleep: {duration: 2s}
    name: steady
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	sr, err := Sweep(ctx, sc, []int{3, 6}, WithLogger(testLogger(t)), WithRepeats(2), WithVirtualTime(inBubble(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Points) != 2 || len(sr.Runs) != 4 || !sr.Passed || sr.Repeats != 2 {
		t.Fatalf("%d points, %d runs, passed %v, %d repeats; want 2, 4, true, 2", len(sr.Points), len(sr.Runs), sr.Passed, sr.Repeats)
	}
	for k, want := range []int{3, 6, 3, 6} { // rounds of every size
		if sr.Runs[k].Nodes != want {
			t.Fatalf("run %d had %d nodes, want %d (the sizes in rounds)", k+1, sr.Runs[k].Nodes, want)
		}
	}
	for _, p := range sr.Points {
		if p.CPUSecondsPerNodeMin <= 0 || p.KiBPerNodeMin <= 0 || p.RSSPerNodeMiB <= 0 || p.ConvergeMS <= 0 || p.Repeats != 2 {
			t.Fatalf("%d nodes: cost not measured: %+v", p.Nodes, p)
		}
		if p.CPULow > p.CPUSecondsPerNodeMin || p.CPUSecondsPerNodeMin > p.CPUHigh || p.KiBLow > p.KiBPerNodeMin || p.KiBPerNodeMin > p.KiBHigh {
			t.Fatalf("%d nodes: a median outside its runs: %+v", p.Nodes, p)
		}
	}
	if sr.CPUGrowthLow <= 0 || sr.CPUGrowthLow > sr.CPUGrowth || sr.CPUGrowth > sr.CPUGrowthHigh {
		t.Fatalf("CPU growth x%v outside x%v to x%v", sr.CPUGrowth, sr.CPUGrowthLow, sr.CPUGrowthHigh)
	}
	// Every node of these meshes, far below the mesh budget, beats at its own interval, beat
	// during the steady window and knows every other agent.
	for _, run := range sr.Runs {
		steady := run.Steps[len(run.Steps)-1].Metrics
		if steady["mesh_interval_s_p50"] != 1 || steady["mesh_interval_s_max"] != 1 || steady["liveness_agents_p50"] != float64(run.Nodes-1) ||
			steady["mesh_beats_per_node"] <= 0 {
			t.Fatalf("%d nodes, steady window: mesh interval p50 %v max %v, %v agents known, %v beats per node (want 1, 1, %d, some)", run.Nodes,
				steady["mesh_interval_s_p50"], steady["mesh_interval_s_max"], steady["liveness_agents_p50"], steady["mesh_beats_per_node"], run.Nodes-1)
		}
	}
	if sr.CPUGrowth <= 0 || sr.KiBGrowth <= 0 {
		t.Fatalf("growth not computed: %+v", sr)
	}
	var text, js, html bytes.Buffer
	if err := sr.WriteText(&text); err != nil || !strings.Contains(text.String(), "cpu-s/node/min") || !strings.Contains(text.String(), "medians of 2 runs") ||
		!strings.Contains(text.String(), "between the runs' extremes") {
		t.Fatalf("table: %v\n%s", err, text.String())
	}
	if err := sr.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"kib_per_node_min"`) || !strings.Contains(js.String(), `"cpu_growth_high"`) {
		t.Fatalf("json: %v", err)
	}
	if err := sr.WriteHTML(&html); err != nil || strings.Count(html.String(), "<svg") != 3 {
		t.Fatalf("html: %v, %d plots", err, strings.Count(html.String(), "<svg"))
	}
}

// Sizes are a short increasing list of node counts; a sweep needs a steady window.
func TestSweep_RefusesBadSizesAndScenariosWithoutASteadyWindow(t *testing.T) {
	for _, bad := range []string{"100", "300,100", "1,10", "a,b", "10,20,30,40,50,60,70,80,90"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("sizes %q accepted", bad)
		}
	}
	if got, err := ParseSizes("100, 300,1000"); err != nil || len(got) != 3 || got[2] != 1000 {
		t.Fatalf("ParseSizes: %v %v", got, err)
	}
	sc, err := Parse([]byte("nodes: 3\nsteps: [{join: {}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sweep(context.Background(), sc, []int{3, 4}); err == nil || !strings.Contains(err.Error(), "sleep step") {
		t.Fatalf("a scenario without a steady window: %v", err)
	}
}

// A size's point of several runs: the median of the runs that reached their steady window
// (the middle one, or the mean of the two middle ones), their extremes, passed only if every
// run passed, overloaded if any was, and every run's error named by its number.
func TestSweep_CombinesTheRunsOfASize(t *testing.T) {
	p := combine([]ScalePoint{
		{Nodes: 100, Passed: true, CPUSecondsPerNodeMin: 0.12, KiBPerNodeMin: 1100, RSSPerNodeMiB: 7, ConvergeMS: 9000},
		{Nodes: 100, Passed: false, Error: "the run ended before its steady window"},
		{Nodes: 100, Passed: true, CPUSecondsPerNodeMin: 0.10, KiBPerNodeMin: 1300, RSSPerNodeMiB: 8, ConvergeMS: 8000, Overloaded: true, LagP99MS: 150},
		{Nodes: 100, Passed: true, CPUSecondsPerNodeMin: 0.15, KiBPerNodeMin: 1200, RSSPerNodeMiB: 9, ConvergeMS: 7000},
	})
	want := ScalePoint{Nodes: 100, Passed: false, Repeats: 4, CPUSecondsPerNodeMin: 0.12, KiBPerNodeMin: 1200, RSSPerNodeMiB: 8, ConvergeMS: 8000,
		Overloaded: true, LagP99MS: 150, CPULow: 0.10, CPUHigh: 0.15, KiBLow: 1100, KiBHigh: 1300,
		Error: "run 2: the run ended before its steady window"}
	if p != want {
		t.Fatalf("combined\n%+v\nwant\n%+v", p, want)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median of 1..4 = %v, want 2.5", got)
	}
	if one := combine([]ScalePoint{{Nodes: 3, Passed: true, CPUSecondsPerNodeMin: 0.2, KiBPerNodeMin: 5}}); one.Repeats != 1 || one.CPULow != 0.2 || one.CPUHigh != 0.2 || one.Error != "" {
		t.Fatalf("one run: %+v", one)
	}
}
