package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

type askParams struct {
	// Capability is the group asked; empty asks every agent (default).
	Capability string `yaml:"capability"`
	// Count is how many queries to run, one after the other (default 3).
	Count int `yaml:"count"`
	// Deadline is each query's deadline (default 5s).
	Deadline Duration `yaml:"deadline"`
}

var parseAsk = params(askParams{Count: 3, Deadline: Duration(5 * time.Second)}, func(p *askParams, sc *Scenario) error {
	if p.Capability != "" && !sc.hasCapability(p.Capability) {
		return fmt.Errorf("ask: capability %q is not among agents.capabilities", p.Capability)
	}
	if p.Count < 1 || p.Count > 1000 || p.Deadline.D() <= 0 || p.Deadline.D() > node.MaxAskDeadline {
		return fmt.Errorf("ask: count must be 1..1000 and deadline positive, at most %s", node.MaxAskDeadline)
	}
	return nil
})

// runAsk runs broadcast queries (docs/coordination.md) from random running nodes to a group or
// to every agent, each expecting the running members (the asker aside): a capability query,
// which every node answers itself. It measures the share of expected agents that answered
// before the deadline and each answer's latency.
func runAsk(ctx context.Context, r *run, p any, res *StepResult) error {
	ap := p.(*askParams)
	c := r.c
	var lat samples
	answered, expected, missing, early := 0, 0, 0, 0
	for k := 0; k < ap.Count && ctx.Err() == nil; k++ {
		up := c.up()
		from := up[c.rng.IntN(len(up))]
		nd := c.node(from)
		if nd == nil || !nd.GossipOn() {
			return fmt.Errorf("ask needs gossip (node.gossip: true)")
		}
		var expect []string
		for _, i := range up {
			if i != from && (ap.Capability == "" || c.slots[i].has(ap.Capability)) {
				expect = append(expect, c.slots[i].agentID)
			}
		}
		if len(expect) == 0 {
			return fmt.Errorf("ask: no running agent but the asker is in %q", ap.Capability)
		}
		out, err := nd.Ask(ctx, node.AskOptions{Group: ap.Capability, Intent: protocol.IntentQuery, Expect: expect, Deadline: ap.Deadline.D()})
		expected += len(expect)
		if err != nil {
			res.Errors[codeOf(err)]++
			missing += len(expect)
			continue
		}
		for _, a := range out.Answers {
			lat.add(a.Latency)
		}
		for _, e := range out.Errors {
			lat.add(e.Latency)
			res.Errors[string(e.Code)]++
		}
		answered += len(expect) - len(out.Missing)
		missing += len(out.Missing)
		if out.Ended == "expected" {
			early++
		}
	}
	res.Metrics["queries"] = float64(ap.Count)
	res.Metrics["answer_ratio"] = ratio(answered, expected)
	res.Metrics["answers_expected"] = float64(expected)
	res.Metrics["missing"] = float64(missing)
	res.Metrics["ended_early_ratio"] = ratio(early, ap.Count)
	lat.put(res.Metrics, "ask")
	return ctx.Err()
}
