package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// A sweep runs the scenario at each size and puts the steady window's cost per node against
// the size, in the table, the JSON and the HTML curves.
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
	sr, err := Sweep(ctx, sc, []int{3, 6}, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Points) != 2 || len(sr.Runs) != 2 || !sr.Passed {
		t.Fatalf("%d points, %d runs, passed %v", len(sr.Points), len(sr.Runs), sr.Passed)
	}
	for _, p := range sr.Points {
		if p.CPUSecondsPerNodeMin <= 0 || p.KiBPerNodeMin <= 0 || p.RSSPerNodeMiB <= 0 || p.ConvergeMS <= 0 {
			t.Fatalf("%d nodes: cost not measured: %+v", p.Nodes, p)
		}
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
	if err := sr.WriteText(&text); err != nil || !strings.Contains(text.String(), "cpu-s/node/min") {
		t.Fatalf("table: %v\n%s", err, text.String())
	}
	if err := sr.WriteJSON(&js); err != nil || !strings.Contains(js.String(), `"kib_per_node_min"`) {
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
