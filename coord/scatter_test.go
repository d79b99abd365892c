package coord

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

func agents(is ...int) []string {
	var out []string
	for _, i := range is {
		out = append(out, agentName(i))
	}
	return out
}

func answered(g *Gather) []string {
	var out []string
	for _, a := range g.Answers {
		out = append(out, a.AgentID)
	}
	slices.Sort(out)
	return out
}

// First-k returns as soon as k answers came: the slow targets are cancelled, not
// waited for (the deadline is far; a scatter that waited would report them timed out).
func TestScatter_FirstKReturnsAtK(t *testing.T) {
	var r *rig
	r = newRig(t, 6, rigOpts{handle: func(i int, req *node.Request) error {
		if i >= 3 {
			return r.block(req)
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
	}})
	c := r.coordinator(t)
	ctx := testCtx(t, 30*time.Second)
	g, err := c.Scatter(ctx, Targets{Agents: agents(1, 2, 3, 4, 5)}, query, ScatterOptions{Completion: FirstK, K: 2, Deadline: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !g.Met || !slices.Equal(answered(g), agents(1, 2)) {
		t.Fatalf("met %v, answers from %v, want agents 1 and 2", g.Met, answered(g))
	}
	slices.Sort(g.Cancelled)
	if !slices.Equal(g.Cancelled, agents(3, 4, 5)) || len(g.TimedOut) != 0 {
		t.Fatalf("cancelled %v, timed out %v: want 3, 4, 5 cancelled", g.Cancelled, g.TimedOut)
	}
}

// Quorum returns as soon as k targets agreed; the one that disagreed is kept with
// its answer if it came first, the slow one is cancelled.
func TestScatter_QuorumReturnsAtAgreement(t *testing.T) {
	var r *rig
	r = newRig(t, 6, rigOpts{handle: func(i int, req *node.Request) error {
		switch i {
		case 5:
			return r.block(req)
		case 4:
			return req.Reply(protocol.ResponseAccepted, map[string]any{"v": 2})
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"v": 1})
	}})
	c := r.coordinator(t)
	ctx := testCtx(t, 30*time.Second)
	g, err := c.Scatter(ctx, Targets{Capability: &Capability{"tool", "terminal"}}, query, ScatterOptions{Completion: Quorum, Deadline: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var agreed map[string]any
	if err := json.Unmarshal(g.Agreed, &agreed); err != nil || agreed["v"] != 1.0 {
		t.Fatalf("agreed %s, want v=1", g.Agreed)
	}
	// Agent 4's dissenting answer may come before the third agreeing one, or be cancelled.
	slices.Sort(g.Cancelled)
	if !g.Met || !(slices.Equal(g.Cancelled, agents(5)) || slices.Equal(g.Cancelled, agents(4, 5))) {
		t.Fatalf("met %v, cancelled %v: want agent 5 cancelled (and perhaps 4)", g.Met, g.Cancelled)
	}
	if got := answered(g); !slices.Contains(got, agentName(1)) || !slices.Contains(got, agentName(2)) || !slices.Contains(got, agentName(3)) {
		t.Fatalf("answers from %v, want 1, 2 and 3 among them", got)
	}
}

// All waits for everyone; the aggregate keeps each answer, each error by code, and who did
// not answer by the deadline.
func TestScatter_AllKeepsErrorsByCodeAndTimedOut(t *testing.T) {
	var r *rig
	r = newRig(t, 5, rigOpts{handle: func(i int, req *node.Request) error {
		switch i {
		case 3:
			return req.Fail(protocol.Errorf(protocol.CodePermissionDenied, "no"))
		case 4:
			return r.block(req)
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
	}})
	c := r.coordinator(t)
	ctx := testCtx(t, 30*time.Second)
	g, err := c.Scatter(ctx, Targets{Agents: agents(1, 2, 3, 4)}, query, ScatterOptions{Deadline: 1500 * time.Millisecond})
	if protocol.CodeOf(err) != protocol.CodeTimeout {
		t.Fatalf("err %v, want TIMEOUT", err)
	}
	if g.Met || !slices.Equal(answered(g), agents(1, 2)) {
		t.Fatalf("met %v, answers %v", g.Met, answered(g))
	}
	if fs := g.Errors[protocol.CodePermissionDenied]; len(fs) != 1 || fs[0].AgentID != agentName(3) {
		t.Fatalf("errors %+v, want agent 3 under PERMISSION_DENIED", g.Errors)
	}
	if !slices.Equal(g.TimedOut, agents(4)) || len(g.Cancelled) != 0 {
		t.Fatalf("timed out %v, cancelled %v: want agent 4 timed out", g.TimedOut, g.Cancelled)
	}
}

// A first-k that can no longer be met returns at once, with the failures' code.
func TestScatter_OutOfReachReturnsEarly(t *testing.T) {
	var r *rig
	r = newRig(t, 4, rigOpts{handle: func(i int, req *node.Request) error {
		if i == 3 {
			return r.block(req)
		}
		return req.Fail(protocol.Errorf(protocol.CodeCapabilityMismatch, "no"))
	}})
	c := r.coordinator(t)
	g, err := c.Scatter(testCtx(t, 30*time.Second), Targets{Agents: agents(1, 2, 3)}, query, ScatterOptions{Completion: FirstK, K: 2, Deadline: time.Minute})
	if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch {
		t.Fatalf("err %v, want CAPABILITY_MISMATCH", err)
	}
	if !slices.Equal(g.Cancelled, agents(3)) {
		t.Fatalf("cancelled %v, want agent 3", g.Cancelled)
	}
}

func TestScatter_RefusesBadInput(t *testing.T) {
	r := newRig(t, 2, rigOpts{})
	c := r.coordinator(t, WithMaxFanout(2))
	ctx := testCtx(t, 10*time.Second)
	for name, tc := range map[string]struct {
		t Targets
		o ScatterOptions
	}{
		"too many":  {Targets{Agents: agents(1, 2, 3)}, ScatterOptions{}},
		"k too big": {Targets{Agents: agents(1)}, ScatterOptions{Completion: FirstK, K: 2}},
		"bad rule":  {Targets{Agents: agents(1)}, ScatterOptions{Completion: "most"}},
		"both":      {Targets{Agents: agents(1), Capability: &Capability{"tool", "terminal"}}, ScatterOptions{}},
		"bad id":    {Targets{Agents: []string{"not an id"}}, ScatterOptions{}},
	} {
		if _, err := c.Scatter(ctx, tc.t, query, tc.o); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
			t.Errorf("%s: %v, want PAYLOAD_INVALID", name, err)
		}
	}
}
