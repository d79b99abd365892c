package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iacp-node/iacp-node/api"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// request --fallback, request --capability, scatter and pipeline against a running node
// whose peer answers queries in Go (n -> n+1).
func TestCoordCommands(t *testing.T) {
	t.Cleanup(noLeaks(t))
	dirs, nodes := twoNodes(t)
	nodes[1].Handle(protocol.IntentQuery, func(_ context.Context, r *node.Request) error {
		var in struct{ N float64 }
		_ = json.Unmarshal(r.Msg.Message.Payload, &in)
		if in.N < 0 {
			return r.Fail(protocol.Errorf(protocol.CodePermissionDenied, "no negatives"))
		}
		return r.Reply(protocol.ResponseAccepted, map[string]any{"n": in.N + 1})
	})
	d0 := dirs[0]

	code, out, errOut := runIn(t, "", "request", "--data-dir", d0, "--fallback", "test:cli:agent1", "--intent", "query", "--payload", `{"n":1}`, "-o", "json")
	var res api.ResultDoc
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.AgentID != "test:cli:agent1" || n(res.Response) != 2 {
		t.Fatalf("request --fallback: exit %d, %s %s", code, out, errOut)
	}
	if code, out, _ := runIn(t, "", "request", "--data-dir", d0, "--fallback", "test:cli:agent1", "--intent", "query"); code != 0 || !strings.Contains(out, "FROM") || !strings.Contains(out, "test:cli:agent1") {
		t.Fatalf("request --fallback table: %d %s", code, out)
	}
	if code, _, errOut := runIn(t, "", "request", "--data-dir", d0, "--capability", "tool:terminal", "--intent", "query"); code == 0 || !strings.Contains(errOut, "discovery") {
		t.Fatalf("request --capability without discovery: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "request", "--data-dir", d0, "--capability", "terminal", "--intent", "query"); code == 0 || !strings.Contains(errOut, "KIND:NAME") {
		t.Fatalf("bad --capability: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runIn(t, "", "request", "--data-dir", d0, "--to", "test:cli:agent1", "--fallback", "test:cli:agent1"); code == 0 || !strings.Contains(errOut, "leave out --to") {
		t.Fatalf("--to with --fallback: exit %d, %s", code, errOut)
	}

	code, out, errOut = runIn(t, "", "scatter", "--data-dir", d0, "--to", "test:cli:agent1", "--completion", "first-k", "--payload", `{"n":5}`)
	if code != 0 || !strings.Contains(out, "MET") || !strings.Contains(out, `{"n":6`) {
		t.Fatalf("scatter: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runIn(t, "", "scatter", "--data-dir", d0, "--to", "test:cli:agent1", "--payload", `{"n":-1}`)
	if code != 1 || !strings.Contains(out, "PERMISSION_DENIED") || !strings.Contains(errOut, "PERMISSION_DENIED") {
		t.Fatalf("scatter not met: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "scatter", "--data-dir", d0, "--to", "test:cli:agent1", "--completion", "most"); code == 0 || !strings.Contains(errOut, "first-k") {
		t.Fatalf("bad completion: exit %d, %s", code, errOut)
	}

	file := filepath.Join(t.TempDir(), "p.yaml")
	doc := "correlation_id: chain-7\ninput: {n: 1}\nsteps:\n  - {name: a, agent: test:cli:agent1, intent: query}\n  - {name: b, agents: [test:cli:agent1], intent: query}\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runIn(t, "", "pipeline", "--data-dir", d0, file)
	if code != 0 || !strings.Contains(out, "chain-7") || !strings.Contains(out, `{"n":3,`) {
		t.Fatalf("pipeline: exit %d, %s %s", code, out, errOut)
	}
	code, out, errOut = runIn(t, "steps: [{agent: test:cli:agent1, intent: query, payload: {n: -5}}]", "pipeline", "--data-dir", d0, "-")
	if code != 1 || !strings.Contains(out, "PERMISSION_DENIED") {
		t.Fatalf("failing pipeline: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runIn(t, "", "pipeline", "--data-dir", d0, "/nonexistent/p.yaml"); code == 0 || errOut == "" {
		t.Fatalf("missing file: exit %d", code)
	}
	if code, out, _ := runIn(t, "", "agents", "--data-dir", d0); code != 0 || !strings.Contains(out, "gossip is off") {
		t.Fatalf("agents: %d %s", code, out)
	}
	for _, c := range []string{"scatter", "pipeline"} {
		if code, out, _ := runIn(t, "", c, "--help"); code != 0 || !strings.Contains(out, "docs/coordination.md") {
			t.Fatalf("%s --help: %d %s", c, code, out)
		}
	}
}

func n(m *protocol.Message) float64 {
	var p struct{ N float64 }
	_ = json.Unmarshal(m.Message.Payload, &p)
	return p.N
}

// After 5 failures to an agent nobody serves, its circuit is open: `agents` lists it, and the
// next request fails at once naming the open circuit.
func TestCoordCommands_AgentsShowsAnOpenCircuit(t *testing.T) {
	t.Cleanup(noLeaks(t))
	dirs, _ := twoNodes(t, node.WithDurable(false))
	for range 5 {
		if code, _, errOut := runIn(t, "", "request", "--data-dir", dirs[0], "--fallback", "test:cli:ghost", "--intent", "query"); code == 0 || !strings.Contains(errOut, "AGENT_NOT_FOUND") {
			t.Fatalf("request to a ghost: exit %d, %s", code, errOut)
		}
	}
	if code, _, errOut := runIn(t, "", "request", "--data-dir", dirs[0], "--fallback", "test:cli:ghost", "--intent", "query"); code == 0 || !strings.Contains(errOut, "circuit") {
		t.Fatalf("request to an open circuit: exit %d, %s", code, errOut)
	}
	code, out, _ := runIn(t, "", "agents", "--data-dir", dirs[0])
	if code != 0 || !strings.Contains(out, "CIRCUIT") || !strings.Contains(out, "test:cli:ghost") || !strings.Contains(out, "open") {
		t.Fatalf("agents: exit %d, %s", code, out)
	}
}
