package sim

import (
	"context"
	"strings"
	"testing"
)

// A bad option refuses the run before any node starts, and says which option and why.
func TestRun_RefusesBadOptions(t *testing.T) {
	sc, err := Parse([]byte("nodes: 3\nsteps: [{join: {}}]"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		opt  Option
		want string
	}{
		{WithNodes(-1), "sim.WithNodes: -1 nodes"},
		{WithNodes(1), "nodes: 1 is outside 2..5000"},
		{WithProgress(nil), "sim.WithProgress: nil writer"},
		{WithLogger(nil), "sim.WithLogger: nil logger"},
		{WithHeapProfile(nil), "sim.WithHeapProfile: nil writer"},
	}
	for _, c := range cases {
		rep, err := Run(context.Background(), sc, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) || rep != nil {
			t.Errorf("Run = %v, %v; want no report and an error containing %q", rep, err, c.want)
		}
	}
}
