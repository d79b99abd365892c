package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

type discoverParams struct {
	// Lookups is how many lookups to make (default 20).
	Lookups int `yaml:"lookups"`
	// By is "agent" (resolve an agent id to its peer, default) or "capability" (find the
	// agents with a capability).
	By string `yaml:"by"`
	// Parallel is how many lookups run at once (default 4).
	Parallel int `yaml:"parallel"`
	// Timeout bounds each lookup (default 10s).
	Timeout Duration `yaml:"timeout"`
}

var parseDiscover = params(discoverParams{Lookups: 20, By: "agent", Parallel: 4, Timeout: Duration(10 * time.Second)},
	func(p *discoverParams, sc *Scenario) error {
		switch {
		case p.Lookups < 1 || p.Lookups > 100000:
			return fmt.Errorf("discover: lookups %d is outside 1..100000", p.Lookups)
		case p.By != "agent" && p.By != "capability":
			return fmt.Errorf("discover: by %q is neither agent nor capability", p.By)
		case p.Parallel < 1 || p.Parallel > 256 || p.Timeout.D() <= 0:
			return fmt.Errorf("discover: parallel must be 1..256 and timeout positive")
		}
		return nil
	})

// lookup is one planned lookup, drawn before any runs.
type lookup struct {
	from, target int              // target: agent lookups
	cap          CapabilityWeight // capability lookups
}

// runDiscover makes lookups from random running nodes: an agent lookup succeeds when the DHT
// names the target's peer; a capability lookup succeeds when it returns at least one agent,
// every one of which has the capability. lookup_recall is the fraction of the running
// holders of the capability found (of at most discovery's provider limit).
func runDiscover(ctx context.Context, r *run, p any, res *StepResult) error {
	dp := p.(*discoverParams)
	c := r.c
	up := c.up()
	if len(up) < 2 {
		return fmt.Errorf("discover needs two running nodes, %d run", len(up))
	}
	plan := make([]lookup, dp.Lookups)
	for k := range plan {
		plan[k].from = up[c.rng.IntN(len(up))]
		for plan[k].target = plan[k].from; plan[k].target == plan[k].from; {
			plan[k].target = up[c.rng.IntN(len(up))]
		}
		plan[k].cap = c.sc.Agents.Capabilities[c.rng.IntN(len(c.sc.Agents.Capabilities))]
	}
	var mu sync.Mutex
	var lat samples
	ok, found, expected := 0, 0, 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, dp.Parallel)
	for _, l := range plan {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nd := c.node(l.from)
			if nd == nil || !nd.DiscoveryOn() {
				mu.Lock()
				res.Errors["NO_DISCOVERY"]++
				mu.Unlock()
				return
			}
			lctx, cancel := context.WithTimeout(ctx, dp.Timeout.D())
			defer cancel()
			t0 := time.Now()
			good, f, e, err := c.lookupOnce(lctx, nd, dp.By, l)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			lat.add(d)
			found, expected = found+f, expected+e
			if err != nil {
				res.Errors[codeOf(err)]++
			} else if good {
				ok++
			} else {
				res.Errors["WRONG_ANSWER"]++
			}
		}()
	}
	wg.Wait()
	r.lookups = append(r.lookups, lat...)
	res.Metrics["lookups"] = float64(len(plan))
	res.Metrics["lookup_success"] = ratio(ok, len(plan))
	if dp.By == "capability" {
		res.Metrics["lookup_recall"] = ratio(found, expected)
	}
	lat.put(res.Metrics, "lookup")
	return ctx.Err()
}

// lookupOnce makes one lookup and judges it.
func (c *cluster) lookupOnce(ctx context.Context, d *node.Node, by string, l lookup) (good bool, found, expected int, err error) {
	if by == "agent" {
		rec, err := d.Resolve(ctx, c.slots[l.target].agentID)
		if err != nil {
			return false, 0, 0, err
		}
		return rec.PeerID == c.slots[l.target].pid, 0, 0, nil
	}
	recs, err := d.FindByCapability(ctx, l.cap.Kind, l.cap.Name)
	if err != nil {
		return false, 0, 0, err
	}
	holders := map[string]bool{}
	for _, i := range c.up() {
		if c.slots[i].has(l.cap.Name) {
			holders[c.slots[i].agentID] = true
		}
	}
	good = len(recs) > 0 || len(holders) == 0
	for _, rec := range recs {
		if !hasCap(rec.Manifest, l.cap) {
			good = false
		}
		if holders[rec.AgentID] {
			found++
		}
	}
	return good, found, min(len(holders), node.MaxProviders), nil
}

func hasCap(m protocol.Manifest, cw CapabilityWeight) bool {
	list := m.Tools
	switch cw.Kind {
	case "model":
		list = m.Models
	case "domain":
		list = m.Domains
	}
	for _, x := range list {
		if protocol.NormalizeCapability(x) == protocol.NormalizeCapability(cw.Name) {
			return true
		}
	}
	return false
}
