package workflow

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A 4-step workflow with a diamond dependency completes: b and c get a's result, d gets both.
func TestWorkflow_DiamondCompletes(t *testing.T) {
	w := newWorkers(t, 4, nil)
	coord := startNode(t, 0, t.TempDir(), newKey(t))
	t.Cleanup(func() { coord.Close() })
	w.introduce(coord)
	e, err := New(coord)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.Start(diamond("wf-diamond")); err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(testCtx(t), "wf-diamond")
	if err != nil || st.Status != Completed {
		t.Fatalf("workflow: %s %s, %v", st.Status, st.Error, err)
	}
	d, _ := st.step("d")
	var got struct {
		Got struct {
			Inputs map[string]json.RawMessage `json:"inputs"`
		} `json:"got"`
	}
	if err := json.Unmarshal(d.Result, &got); err != nil || len(got.Got.Inputs) != 2 ||
		!strings.Contains(string(got.Got.Inputs["b"]), agentName(2)) || !strings.Contains(string(got.Got.Inputs["c"]), agentName(3)) {
		t.Fatalf("d got %s, want the results of b and c", d.Result)
	}
	b, _ := st.step("b")
	if !strings.Contains(string(b.Result), agentName(1)) {
		t.Fatalf("b got %s, want a's result", b.Result)
	}
	for i, s := range []string{"a", "b", "c", "d"} {
		if n := w.ran(fmtKey(i+1, s)); n != 1 {
			t.Fatalf("step %s ran %d times", s, n)
		}
	}
}

// A step whose agent refuses for good is asked of its fallback.
func TestWorkflow_FallbackTakesOver(t *testing.T) {
	w := newWorkers(t, 2, func(i int, r *node.Request) error {
		if i == 1 {
			return r.Fail(protocol.Errorf(protocol.CodePermissionDenied, "not me"))
		}
		return r.Reply(protocol.ResponseAccepted, map[string]string{"by": agentName(i)})
	})
	coord := startNode(t, 0, t.TempDir(), newKey(t))
	t.Cleanup(func() { coord.Close() })
	w.introduce(coord)
	e, err := New(coord)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	spec := Spec{ID: "wf-fallback", Steps: []Step{{ID: "only", Agent: agentName(1), Fallback: []string{agentName(2)}, Payload: json.RawMessage(`{"step":"only"}`)}}}
	if _, err := e.Start(spec); err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(testCtx(t), "wf-fallback")
	only, _ := st.step("only")
	if err != nil || st.Status != Completed || only.Agent != agentName(2) || only.Attempts != 2 {
		t.Fatalf("workflow %s (%s), step by %s after %d attempts, %v", st.Status, st.Error, only.Agent, only.Attempts, err)
	}
}

// Declarations that cannot run are refused, naming the step and member.
func TestSpec_RefusesBadDeclarations(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`steps: []`, "1 to 64 steps"},
		{`steps: [{id: a, agent: "test:flow:agent1"}, {id: a, agent: "test:flow:agent1"}]`, `step "a": two steps`},
		{`steps: [{id: a, agent: "test:flow:agent1", depends_on: [b]}]`, `depends on "b"`},
		{`steps: [{id: a, agent: "test:flow:agent1", depends_on: [b]}, {id: b, agent: "test:flow:agent1", depends_on: [a]}]`, "cycle"},
		{`steps: [{id: a, agent: "nope"}]`, `step "a".agent`},
		{`steps: [{id: a, agent: "test:flow:agent1", timeout: soon}]`, "duration"},
		{`steps: [{id: a, agent: "test:flow:agent1", payload: [1]}]`, "payload must be a JSON object"},
		{`steps: [{id: a, agent: "test:flow:agent1", intent: bogus}]`, "intent"},
		{`steps: [{id: a, agent: "test:flow:agent1", colour: red}]`, "unknown field"},
	} {
		_, err := Parse([]byte(c.doc))
		if protocol.CodeOf(err) != protocol.CodePayloadInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want PAYLOAD_INVALID naming %q", c.doc, err, c.want)
		}
	}
	s, err := Parse([]byte(`{"workflow_name": "ok", "steps": [{"id": "a", "agent": "test:flow:agent1"}]}`))
	if err != nil || s.ID == "" || s.Steps[0].Intent != protocol.IntentHandoff || s.Steps[0].Attempts != 1 {
		t.Fatalf("a JSON declaration: %+v, %v", s, err)
	}
}

func fmtKey(agent int, step string) string { return strconv.Itoa(agent) + "/" + step }

// An IaCP 1.0 workflow_start message is a declaration: its payload's plan gives the steps,
// their dependencies and timeouts.
func TestSpec_ReadsAWorkflowStartMessage(t *testing.T) {
	doc := `{"message_type": "workflow_start", "payload": {"workflow_id": "wf-1", "workflow_name": "review",
	  "participants": [{"agent_id": "test:flow:agent1", "role": "worker"}],
	  "execution_plan": {
	    "steps": [{"id": "a", "agent": "test:flow:agent1"}, {"id": "b", "agent": "test:flow:agent2"}],
	    "dependencies": {"b": ["a"]},
	    "timeouts": {"b": "5s"}}}}`
	s, err := Parse([]byte(doc))
	if err != nil || s.ID != "wf-1" || s.Name != "review" || len(s.Participants) != 1 || len(s.Steps) != 2 {
		t.Fatalf("workflow_start: %+v, %v", s, err)
	}
	if b := s.Steps[1]; len(b.DependsOn) != 1 || b.DependsOn[0] != "a" || time.Duration(b.Timeout) != 5*time.Second {
		t.Fatalf("step b: %+v", b)
	}
	if _, err := Parse([]byte(`{"message_type": "task_request", "payload": {}}`)); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("another IaCP 1.0 message: %v", err)
	}
	if _, err := Parse([]byte(`{"message_type": "workflow_start", "payload": {"execution_plan": {"dependencies": {"b": ["a"]}, "steps": [{"id": "b", "agent": "test:flow:agent2"}]}}}`)); err == nil || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("a dependency on no step: %v", err)
	}
}

// A step may name a capability instead of an agent: it asks the agents found with it, in
// order, failing over like fallbacks.
func TestWorkflow_CapabilityStep(t *testing.T) {
	w := newWorkers(t, 2, func(i int, r *node.Request) error {
		if i == 1 {
			return r.Fail(protocol.Errorf(protocol.CodePermissionDenied, "busy elsewhere"))
		}
		return r.Reply(protocol.ResponseAccepted, map[string]string{"by": agentName(i)})
	})
	coord := startNode(t, 0, t.TempDir(), newKey(t))
	t.Cleanup(func() { coord.Close() })
	w.introduce(coord)
	var asked Capability
	e, err := New(coord, WithCandidates(func(_ context.Context, c Capability) ([]string, error) {
		asked = c
		return []string{agentName(1), agentName(2)}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s, err := Parse([]byte(`{"workflow_id": "wf-cap", "steps": [{"id": "x", "capability": {"kind": "tool", "name": "terminal"}, "payload": {"step": "x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(s); err != nil {
		t.Fatal(err)
	}
	st, err := e.Wait(testCtx(t), "wf-cap")
	x, _ := st.step("x")
	if err != nil || st.Status != Completed || x.Agent != agentName(2) || len(x.Candidates) != 2 || asked.Name != "terminal" {
		t.Fatalf("capability step: %s (%s), by %s of %v, asked %v, %v", st.Status, st.Error, x.Agent, x.Candidates, asked, err)
	}
	if _, err := Parse([]byte(`steps: [{id: a, agent: "test:flow:agent1", capability: {kind: tool, name: t}}]`)); err == nil || !strings.Contains(err.Error(), "one of the two") {
		t.Fatalf("agent and capability: %v", err)
	}
}
