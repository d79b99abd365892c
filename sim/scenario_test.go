package sim

import (
	"strings"
	"testing"
	"time"
)

// Every refusal names the field at fault, so a scenario author knows what to fix.
func TestParse_RefusesBadScenarios(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"nodes: 1\nsteps: [{join: {}}]", "nodes: 1 is outside"},
		{"steps: []", "steps: the scenario has none"},
		{"steps: [{fly: {}}]", `unknown step "fly"`},
		{"steps: [{join: {}, load: {}}]", "a step has one action"},
		{"steps: [{load: {rate: 0}}]", "rate and duration must be positive"},
		{"steps: [{load: {pattern: zigzag}}]", `pattern "zigzag"`},
		{"steps: [{load: {rte: 5}}]", "field rte not found"},
		{"steps: [{join: {}, expect: {lost: \"about 0\"}}]", "is not a condition"},
		{"network: {transport: carrier-pigeon}\nsteps: [{join: {}}]", "network.transport"},
		{"network: {transport: loopback, latency: 5ms}\nsteps: [{join: {}}]", "need transport mocknet"},
		{"network: {latency: 1ms, jitter: 2ms}\nsteps: [{join: {}}]", "network.jitter"},
		{"network: {tick: 20ms}\nsteps: [{join: {}}]", "network.tick: 20ms is outside 0..10ms"},
		{"network: {transport: loopback}\nsteps: [{partition: {}}]", "partition needs network.transport mocknet"},
		{"node: {heartbeat_interval: 500ms}\nsteps: [{join: {}}]", "node: invalid config: heartbeat_interval: 1 s to 300 s"},
		{"node: {heartbeat: 1s}\nsteps: [{join: {}}]", "line 1: node.heartbeat is now node.heartbeat_interval"},
		{"node: {quorum: 2}\nsteps: [{join: {}}]", "line 1: node.quorum is now node.dht_quorum"},
		{"node: {suspect_after: 200}\nsteps: [{join: {}}]", "suspect_after: 1 to 100"},
		{"node: {retry_min: 5m}\nsteps: [{join: {}}]", "node.retry_min, retry_max: 5m0s, 1m0s"},
		{"node: {bootstrap_peers: 10}\nsteps: [{join: {}}]", "node.bootstrap_peers"},
		{"node: {conn_low: 50, conn_high: 10}\nsteps: [{join: {}}]", "node.conn_low, conn_high: 50, 10"},
		{"steps: [{group: {capability: juggling}}]", `capability "juggling"`},
		{"steps: [{kill: {nodes: [42]}}]", "nodes: 42 is outside"},
		{"steps: [{kill: {mode: vanish}}]", `mode "vanish"`},
		{"steps: [{sleep: {duration: soon}}]", "is not a duration"},
		{"agents: {per_agent: {min: 2, max: 9}}\nsteps: [{join: {}}]", "agents.per_agent"},
		{"trust: lax\nsteps: [{join: {}}]", `trust: "lax"`},
		{"trust: open\nsteps: [{intruder: {}}]", "intruder: needs trust: authority"},
		{"steps: [{intruder: {certificate: forged}}]", `certificate "forged"`},
		{"steps: [{intruder: {as: 10}}]", "as 10 is outside"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}

func TestParse_DefaultsAndLibrary(t *testing.T) {
	sc, err := Parse([]byte("steps: [{join: {}}, {load: {}, name: warm, expect: {request_success: 1}}]"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Nodes != 10 || sc.Seed != 1 || sc.Network.Transport != TransportMocknet || sc.Node.HeartbeatInterval.D() != time.Second || sc.Trust != "authority" {
		t.Fatalf("defaults not filled: %+v", sc)
	}
	if sc.Steps[1].Name != "warm" || sc.Steps[1].Action != "load" || sc.Steps[0].Name != "join" {
		t.Fatalf("steps: %+v", sc.Steps)
	}
	infos, err := List()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, in := range infos {
		seen[in.Name] = true
		if _, err := Load(in.Name); err != nil {
			t.Errorf("library scenario %s: %v", in.Name, err)
		}
	}
	// The library together uses every step.
	used := map[string]bool{}
	for _, in := range infos {
		sc, _ := Builtin(in.Name)
		for _, st := range sc.Steps {
			used[st.Action] = true
		}
	}
	for a := range actions {
		if !used[a] {
			t.Errorf("no library scenario uses step %q", a)
		}
	}
	if !seen[DefaultScenario] {
		t.Fatalf("the default scenario %q is not in the library", DefaultScenario)
	}
	if _, err := Load("no-such-scenario"); err == nil || !strings.Contains(err.Error(), "--list") {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := Load("missing/file.yaml"); err == nil {
		t.Fatal("a missing file must be an error")
	}
}

func TestCondition(t *testing.T) {
	cases := []struct {
		v    any
		got  float64
		want bool
	}{
		{"<= 50", 50, true}, {"<= 50", 50.1, false}, {">= 0.99", 1, true}, {"< 3", 3, false},
		{"> 0", 0.5, true}, {"== 0", 0, true}, {"!= 0", 0, false}, {1.0, 1, true}, {0, 0.2, false},
		{true, 1, true}, {"7", 7, true},
	}
	for _, c := range cases {
		cond, err := parseCondition(c.v)
		if err != nil {
			t.Fatalf("%v: %v", c.v, err)
		}
		if cond.holds(c.got) != c.want {
			t.Errorf("%v holds for %v = %v, want %v", c.v, c.got, !c.want, c.want)
		}
	}
	checks := evaluate(map[string]any{"lost": 0, "p99": "<= 10", "absent": 1}, map[string]float64{"lost": 0, "p99": 11})
	if len(checks) != 3 || !checks[0].Missing || checks[0].OK || !checks[1].OK || checks[2].OK {
		t.Fatalf("evaluate: %+v", checks)
	}
}

// One seed gives the same identities, capabilities and schedules; another seed does not.
func TestSeed_MakesTheScriptRepeatable(t *testing.T) {
	plan := func(seed uint64, pattern string) ([]planned, []string, [][]CapabilityWeight) {
		sc, err := Parse([]byte("nodes: 5\nsteps: [{join: {}}]"))
		if err != nil {
			t.Fatal(err)
		}
		sc.Seed = seed
		c, err := newCluster(sc, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ids []string
		var caps [][]CapabilityWeight
		for _, s := range c.slots {
			ids = append(ids, s.pid.String())
			caps = append(caps, s.caps)
		}
		lp := defaultLoad
		lp.Pattern = pattern
		return c.schedule(&lp), ids, caps
	}
	for _, pattern := range []string{PatternConstant, PatternPoisson, PatternRamp, PatternBurst} {
		a, idsA, capsA := plan(7, pattern)
		b, idsB, _ := plan(7, pattern)
		other, idsC, _ := plan(8, pattern)
		// 20/s for 3s; Poisson arrivals past the end are not sent.
		if len(a) != len(b) || len(a) > 60 || (pattern != PatternPoisson && len(a) != 60) || len(a) < 40 {
			t.Fatalf("%s: %d and %d requests planned, want 60", pattern, len(a), len(b))
		}
		for k := range a {
			if a[k] != b[k] {
				t.Fatalf("%s: request %d differs between runs of one seed: %+v vs %+v", pattern, k, a[k], b[k])
			}
			if a[k].at < 0 || a[k].at >= 3*time.Second || (k > 0 && a[k].at < a[k-1].at) {
				t.Fatalf("%s: request %d at %s is out of order or outside the duration", pattern, k, a[k].at)
			}
		}
		if strings.Join(idsA, ",") != strings.Join(idsB, ",") || strings.Join(idsA, ",") == strings.Join(idsC, ",") {
			t.Fatal("peer ids must follow the seed")
		}
		if other[1] == a[1] {
			t.Fatalf("%s: another seed drew the same request", pattern)
		}
		for _, cs := range capsA {
			if len(cs) < 1 || len(cs) > 2 || (len(cs) == 2 && cs[0].Name == cs[1].Name) {
				t.Fatalf("capabilities drawn: %+v", cs)
			}
		}
	}
}

// Every library scenario configures nodes that start: its node settings pass the node's own
// checks (a scenario whose first node is refused would fail at its first step).
func TestLibrary_NodesStart(t *testing.T) {
	infos, err := List()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		t.Run(in.Name, func(t *testing.T) {
			sc, err := Load(in.Name)
			if err != nil {
				t.Fatal(err)
			}
			testCluster(t, sc, 0)
		})
	}
}
