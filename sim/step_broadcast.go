package sim

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

type broadcastParams struct {
	// Count is how many broadcasts to send, one after the other (default 3).
	Count int `yaml:"count"`
	// Timeout bounds the wait for each to reach every running node (default 10s).
	Timeout Duration `yaml:"timeout"`
}

var parseBroadcast = params(broadcastParams{Count: 3, Timeout: Duration(10 * time.Second)}, func(p *broadcastParams, _ *Scenario) error {
	if p.Count < 1 || p.Count > 1000 || p.Timeout.D() <= 0 {
		return fmt.Errorf("broadcast: count must be 1..1000 and timeout positive")
	}
	return nil
})

type groupParams struct {
	// Capability is the group (default: the scenario's first capability).
	Capability string `yaml:"capability"`
	// Count and Timeout as for broadcast.
	Count   int      `yaml:"count"`
	Timeout Duration `yaml:"timeout"`
}

var parseGroup = params(groupParams{Count: 3, Timeout: Duration(10 * time.Second)}, func(p *groupParams, sc *Scenario) error {
	if p.Capability == "" {
		p.Capability = sc.Agents.Capabilities[0].Name
	}
	if !sc.hasCapability(p.Capability) {
		return fmt.Errorf("group: capability %q is not among agents.capabilities", p.Capability)
	}
	if p.Count < 1 || p.Count > 1000 || p.Timeout.D() <= 0 {
		return fmt.Errorf("group: count must be 1..1000 and timeout positive")
	}
	return nil
})

// runBroadcast sends events to every agent from random running nodes and measures how long
// each takes to reach each running node (propagation) and how many it reaches.
func runBroadcast(ctx context.Context, r *run, p any, res *StepResult) error {
	bp := p.(*broadcastParams)
	return r.spread(ctx, res, bp.Count, bp.Timeout.D(), "broadcast", "")
}

// runGroup sends group messages to the members of a capability group and measures them as
// broadcasts, over the running members.
func runGroup(ctx context.Context, r *run, p any, res *StepResult) error {
	gp := p.(*groupParams)
	return r.spread(ctx, res, gp.Count, gp.Timeout.D(), "group", gp.Capability)
}

// spread sends count gossip messages (a broadcast when group is "", else a group message)
// and waits for each to reach its expected receivers.
func (r *run) spread(ctx context.Context, res *StepResult, count int, timeout time.Duration, kind, group string) error {
	c := r.c
	var lat samples
	reached, expected := 0, 0
	for k := 0; k < count && ctx.Err() == nil; k++ {
		up := c.up()
		from := up[c.rng.IntN(len(up))]
		nd := c.node(from)
		if nd == nil || !nd.GossipOn() {
			return fmt.Errorf("%s needs gossip (node.gossip: true)", kind)
		}
		want := map[int]bool{}
		for _, i := range up {
			if i != from && (group == "" || c.slots[i].has(group)) {
				want[i] = true
			}
		}
		key := fmt.Sprintf("sim.%s.%d.%d", kind, res.Index, k)
		delays, n, err := r.gossipOnce(ctx, nd, key, "simulator "+kind, group, timeout, func() map[int]bool { return want })
		if err != nil {
			res.Errors[codeOf(err)]++
		}
		lat = append(lat, delays...)
		reached += len(delays)
		expected += n
		r.rep.Propagation = append(r.rep.Propagation, propagation(fmt.Sprintf("step %d %s %d", res.Index, kind, k+1), delays, n))
	}
	res.Metrics["messages"] = float64(count)
	res.Metrics["delivery_ratio"] = ratio(reached, expected)
	res.Metrics["receivers_expected"] = float64(expected)
	lat.put(res.Metrics, kind)
	return ctx.Err()
}

// gossipOnce sends one gossip message, key, from nd (a broadcast when group is "", else a
// message to group) and waits, within timeout, until every receiver that want names has it.
// want is asked again at each look, so that a churn can change who counts. It returns the
// delay (ms) of each receiver want names at the end that had the message, how many want named
// then, and the send's error.
func (r *run) gossipOnce(ctx context.Context, nd *node.Node, key, detail, group string, timeout time.Duration, want func() map[int]bool) (delays []float64, expected int, err error) {
	c := r.c
	c.rec.expect(key)
	ev := protocol.EventPayload{EventType: key, Detail: detail}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	if group == "" {
		_, err = nd.Broadcast(sctx, ev)
	} else {
		_, err = nd.SendToGroup(sctx, group, protocol.IntentNotify, ev)
	}
	if err == nil {
		waitFor(sctx, func() bool { w := want(); return countIn(c.rec.receipts(key, false), w) == len(w) })
	}
	got, w := c.rec.receipts(key, true), want()
	for i, at := range got {
		if w[i] {
			delays = append(delays, ms(at.Sub(t0)))
		}
	}
	return delays, len(w), err
}

// propagation is the plot of one message: fraction of expected receivers reached over time.
func propagation(label string, delays []float64, expected int) Series {
	sort.Float64s(delays)
	s := Series{Label: label, Points: []Point{{0, 0}}}
	for k, d := range delays {
		s.Points = append(s.Points, Point{X: d, Y: float64(k+1) / float64(max(1, expected))})
	}
	return s
}

func countIn(got map[int]time.Time, want map[int]bool) int {
	n := 0
	for i := range got {
		if want[i] {
			n++
		}
	}
	return n
}

// waitFor polls cond every 10 ms until it holds or ctx ends; it reports whether it held.
func waitFor(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return cond()
		}
	}
}
