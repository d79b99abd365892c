package coord

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// Any-of spreads 300 requests over 3 capable agents roughly in proportion to their
// free capacity (loads announced by heartbeat), and fails over when one is killed.
func TestAnyOf_SpreadsByFreeCapacityAndFailsOver(t *testing.T) {
	var hang atomic.Bool
	var r *rig
	r = newRig(t, 4, rigOpts{gossip: true, handle: func(i int, req *node.Request) error {
		if i == 2 && hang.Load() {
			return r.block(req)
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
	}})
	loads := map[int]float64{1: 0, 2: 0.5, 3: 0.8} // free capacity 1, 0.5, 0.2
	for i, l := range loads {
		if err := r.nodes[i].SetStatus(protocol.StatusAlive, l, 0); err != nil {
			t.Fatal(err)
		}
	}
	testsupport.WaitFor(t, 20*time.Second, "node 0 hears every agent's load", func() bool {
		for i, l := range loads {
			st, ok := r.nodes[0].Agent(agentName(i))
			if !ok || st.State != node.StateAlive || st.Load != l {
				return false
			}
		}
		return true
	})
	c := r.coordinator(t, WithAttemptTimeout(time.Second), WithBreaker(2, time.Minute, 1))
	ctx := testCtx(t, 60*time.Second)
	got := map[string]int{}
	for range 300 {
		res, err := c.AnyOf(ctx, Capability{"tool", "terminal"}, query, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got[by(t, res.Response)]++
	}
	// Shares 1/1.7, 0.5/1.7, 0.2/1.7 of 300: about 176, 88 and 35.
	want := map[int][2]int{1: {145, 210}, 2: {60, 115}, 3: {18, 55}}
	for i, w := range want {
		if n := got[agentName(i)]; n < w[0] || n > w[1] {
			t.Errorf("agent %d (load %.1f) took %d of 300, want %d..%d (all: %v)", i, loads[i], n, w[0], w[1], got)
		}
	}
	t.Logf("300 any-of requests: %v", got)

	// Kill agent 1, the least loaded, as a crash looks (no leave announced; Crash's error
	// reports the parts that lost their host): every request still gets an answer, from 2
	// or 3. Agent 1 is failed over from, or left out once liveness makes it suspect.
	_ = r.nodes[1].Crash()
	for range 20 {
		res, err := c.AnyOf(ctx, Capability{"tool", "terminal"}, query, CallOptions{})
		if err != nil {
			t.Fatalf("any-of with agent 1 dead: %v", err)
		}
		if who := by(t, res.Response); who == agentName(1) {
			t.Fatalf("a dead agent answered")
		}
		if !slices.Contains(res.Skipped, agentName(1)) && !slices.ContainsFunc(res.Tried, func(tr Tried) bool { return tr.AgentID == agentName(1) }) {
			t.Fatalf("agent 1 neither skipped nor tried: %+v", res)
		}
	}
	st, _ := r.nodes[0].Agent(agentName(1))
	t.Logf("agent 1 after its crash: %s", st.State)

	// Agent 2 stops answering but still beats: requests to it time out (1 s) and fail over to
	// agent 3, until its circuit opens at 2 failures.
	hang.Store(true)
	failedOver := 0
	for range 20 {
		res, err := c.AnyOf(ctx, Capability{"tool", "terminal"}, query, CallOptions{})
		if err != nil {
			t.Fatalf("any-of with agent 2 hanging: %v", err)
		}
		if who := by(t, res.Response); who != agentName(3) {
			t.Fatalf("answered by %s, want agent 3", who)
		}
		for _, tr := range res.Tried {
			if tr.AgentID == agentName(2) {
				if tr.Code != protocol.CodeTimeout {
					t.Fatalf("agent 2 failed with %s, want TIMEOUT", tr.Code)
				}
				failedOver++
			}
		}
	}
	if failedOver == 0 || failedOver > 2 {
		t.Errorf("the hanging agent was asked %d times, want 1 or 2 (until its circuit opens at 2 failures)", failedOver)
	}
	if b, _ := c.Breaker(agentName(2)); b.State != Open {
		t.Errorf("agent 2's circuit is %s, want open", b.State)
	}
}

// Rank skips open circuits (and suspect, stuck, draining and offline agents), and puts alive
// before not-heard-of before busy, then by load.
func TestRank_LivenessThenLoad(t *testing.T) {
	r := newRig(t, 4, rigOpts{gossip: true})
	if err := r.nodes[1].SetStatus(protocol.StatusBusy, 0.1, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.nodes[2].SetStatus(protocol.StatusAlive, 0.6, 1); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "node 0 hears the states", func() bool {
		a, ok1 := r.nodes[0].Agent(agentName(1))
		b, ok2 := r.nodes[0].Agent(agentName(2))
		_, ok3 := r.nodes[0].Agent(agentName(3))
		return ok1 && ok2 && ok3 && a.State == node.StateBusy && b.Load == 0.6
	})
	c := r.coordinator(t, WithBreaker(1, time.Hour, 1))
	c.br.admit(agentName(3))
	c.br.record(agentName(3), false, failure, protocol.CodeTimeout) // agent 3's circuit opens
	ranked, skipped := c.Rank([]string{agentName(1), agentName(2), agentName(3), "test:coord:unknown"})
	var order []string
	for _, cd := range ranked {
		order = append(order, cd.AgentID)
	}
	want := []string{agentName(2), "test:coord:unknown", agentName(1)}
	if len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("ranked %v, want %v", order, want)
	}
	if len(skipped) != 1 || skipped[0] != agentName(3) {
		t.Fatalf("skipped %v, want agent 3, whose circuit is open", skipped)
	}
}

// Fallback asks an explicit list in order; a refusal moves on to the next, a bad payload
// does not (the next agent would refuse it too).
func TestFallback_InOrderUntilOneAnswers(t *testing.T) {
	var mu sync.Mutex
	corr := map[string]bool{}
	r := newRig(t, 4, rigOpts{handle: func(i int, req *node.Request) error {
		mu.Lock()
		corr[req.Msg.Envelope.CorrelationID] = true
		mu.Unlock()
		if i == 1 {
			return req.Fail(protocol.Errorf(protocol.CodeCapabilityMismatch, "not me"))
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
	}})
	c := r.coordinator(t)
	ctx := testCtx(t, 20*time.Second)
	res, err := c.Fallback(ctx, Targets{Agents: []string{agentName(1), agentName(3), agentName(2)}}, query, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who := by(t, res.Response); who != agentName(3) {
		t.Fatalf("answered by %s, want agent 3 (the second in order)", who)
	}
	if len(res.Tried) != 1 || res.Tried[0].AgentID != agentName(1) || res.Tried[0].Code != protocol.CodeCapabilityMismatch {
		t.Fatalf("tried %+v, want agent 1 refusing with CAPABILITY_MISMATCH", res.Tried)
	}
	if r.hits[2].Load() != 0 {
		t.Fatal("agent 2, last in order, was asked")
	}
	mu.Lock()
	if len(corr) != 1 {
		t.Fatalf("correlation ids %v: want one for every candidate of a fallback", corr)
	}
	mu.Unlock()
	_, err = c.Fallback(ctx, Targets{Agents: []string{agentName(1)}}, query, CallOptions{})
	if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch {
		t.Fatalf("every candidate refusing: %v, want the last refusal's code", err)
	}
	if _, err := c.Fallback(ctx, Targets{}, query, CallOptions{}); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
		t.Fatalf("no targets: %v, want PAYLOAD_INVALID", err)
	}
}
