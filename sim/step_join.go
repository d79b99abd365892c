package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

type joinParams struct {
	// Count is how many nodes not yet started to start (default: all of them).
	Count int `yaml:"count"`
	// Parallel is how many start at once after the bootstrap nodes (default 8).
	Parallel int `yaml:"parallel"`
	// Rate paces the join, as a real mesh joins: nodes a second after the bootstrap nodes,
	// in batches of Batch (default 0: as fast as Parallel allows). With rate 3.33 and batch
	// 100, a hundred nodes start every 30 s.
	Rate float64 `yaml:"rate"`
	// Batch is how many nodes start together at each paced moment (default 1).
	Batch int `yaml:"batch"`
	// Every, instead of Rate, paces the join as Batch nodes every Every ({batch: 100, every:
	// 30s}).
	Every Duration `yaml:"every"`
}

var parseJoin = params(joinParams{Parallel: 8, Batch: 1}, func(p *joinParams, sc *Scenario) error {
	if p.Count < 0 || p.Parallel < 1 || p.Parallel > 256 {
		return fmt.Errorf("join: count must not be negative and parallel must be 1..256")
	}
	if p.Rate < 0 || p.Batch < 1 {
		return fmt.Errorf("join: rate (nodes a second) must not be negative and batch must be at least 1")
	}
	if p.Every > 0 {
		if p.Rate > 0 {
			return fmt.Errorf("join: give rate (nodes a second) or every (a batch every so often), not both")
		}
		p.Rate = float64(p.Batch) / p.Every.D().Seconds()
	}
	return nil
})

// due is when the k-th node after the bootstrap nodes starts in a join begun at t0: at once
// without a rate, else when its batch is due.
func (p *joinParams) due(t0 time.Time, k int) time.Time {
	if p.Rate == 0 {
		return t0
	}
	return t0.Add(time.Duration(float64(k/p.Batch*p.Batch) / p.Rate * float64(time.Second)))
}

// runJoin starts nodes that never ran, in slot order: the bootstrap nodes one by one, then
// the rest Parallel at a time.
func runJoin(ctx context.Context, r *run, p any, res *StepResult) error {
	jp := p.(*joinParams)
	c := r.c
	var todo []int
	for _, i := range c.down() {
		if c.slots[i].bootAddr == "" { // never started
			todo = append(todo, i)
		}
	}
	if jp.Count > 0 {
		todo = todo[:min(jp.Count, len(todo))]
	}
	t0, invited := time.Now(), c.invited.Load()
	c.joinStart = t0
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, jp.Parallel)
	paced := 0
	for _, i := range todo {
		if ctx.Err() != nil {
			break
		}
		if i < c.sc.Node.BootstrapPeers {
			if err := c.startNode(ctx, i); err != nil {
				return err
			}
			continue
		}
		if !sleepUntil(ctx, jp.due(t0, paced)) {
			break
		}
		if jp.Rate > 0 && paced%jp.Batch == 0 && paced > 0 {
			fmt.Fprintf(r.progress, "      join: %d of %d nodes started after %s (%s of wall time)\n", paced, len(todo)-slices.IndexFunc(todo, func(i int) bool { return i >= c.sc.Node.BootstrapPeers }),
				time.Since(t0).Round(time.Millisecond), wallNow().Sub(r.wall0).Round(time.Second))
		}
		paced++
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.startNode(ctx, i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Metrics["join_ms"] = ms(time.Since(t0))
	res.Metrics["started"] = float64(len(todo))
	if jp.Rate > 0 {
		res.Metrics["join_rate_per_s"] = jp.Rate
	}
	if c.auth != nil {
		res.Metrics["joined_by_invitation"] = float64(c.invited.Load() - invited)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

type convergeParams struct {
	// Timeout bounds the wait (default 60s).
	Timeout Duration `yaml:"timeout"`
	// Liveness also requires every node to see every other running agent alive in its
	// liveness table (default true; large meshes with slow heartbeats turn it off).
	Liveness *bool `yaml:"liveness"`
	// RoutingTable is the least DHT routing table size per node (default min(nodes-1, 3)).
	RoutingTable int `yaml:"routing_table"`
}

var parseConverge = params(convergeParams{Timeout: Duration(60 * time.Second)}, func(p *convergeParams, sc *Scenario) error {
	if p.Timeout.D() <= 0 || p.RoutingTable < 0 {
		return fmt.Errorf("converge: timeout must be positive and routing_table not negative")
	}
	return nil
})

// runConverge waits until the mesh has converged (see converged) and reports the time since
// the last join, restart or heal began, and when each part of convergence was first complete
// (a part never complete is left out): the DHT (joined, routing table), the agent records,
// the gossip mesh, and liveness.
func runConverge(ctx context.Context, r *run, p any, res *StepResult) error {
	cp := p.(*convergeParams)
	live := cp.Liveness == nil || *cp.Liveness
	ok, st := r.c.waitConverged(ctx, cp.Timeout.D(), live, cp.RoutingTable)
	res.Metrics["converged"] = b2f(ok)
	res.Metrics["converge_ms"] = ms(time.Since(r.c.joinStart))
	res.Metrics["not_converged_nodes"] = float64(st.missing)
	for name, at := range map[string]time.Time{"dht_ready_ms": st.dht, "records_ready_ms": st.records,
		"gossip_ready_ms": st.gossip, "liveness_ready_ms": st.live} {
		if !at.IsZero() {
			res.Metrics[name] = ms(at.Sub(r.c.joinStart))
		}
	}
	return ctx.Err()
}

// convergence is one poll of waitConverged: how many running nodes have not converged and how
// many lack each part, and when each part was checked; waitConverged turns the times into
// when each part was first complete on every node.
type convergence struct {
	missing                           int
	noDHT, noRecord, noGossip, noLive int

	dht, records, gossip, live time.Time
}

// waitConverged polls until every running node (1) has joined the DHT: bootstrapped, its
// record published and at least rt peers in its routing table; (2) has a gossip peer on the
// heartbeat topic; and (3) when live is set, sees every other running agent alive. It returns
// whether that happened before timeout, and the last poll.
func (c *cluster) waitConverged(ctx context.Context, timeout time.Duration, live bool, rt int) (bool, convergence) {
	deadline := time.Now().Add(timeout)
	poll := 50*time.Millisecond + time.Duration(len(c.slots))*time.Millisecond/4
	var first convergence
	for {
		st := c.notConverged(live, rt)
		for _, part := range []struct {
			lacking int
			checked time.Time
			first   *time.Time
		}{{st.noDHT, st.dht, &first.dht}, {st.noRecord, st.records, &first.records},
			{st.noGossip, st.gossip, &first.gossip}, {st.noLive, st.live, &first.live}} {
			if part.lacking == 0 && part.first.IsZero() {
				*part.first = part.checked
			}
		}
		st.dht, st.records, st.gossip, st.live = first.dht, first.records, first.gossip, first.live
		if !live {
			st.live = time.Time{}
		}
		if st.missing == 0 {
			return true, st
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, st
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// notConverged checks every running node once, part by part, and notes when each part was
// checked: the DHT and the records, liveness (a table lookup), then the gossip mesh (a count
// the node keeps: asking gossipsub's event loop took a minute a pass in a crowded process, and
// convergence was seen that much late).
func (c *cluster) notConverged(live bool, rt int) convergence {
	up := c.up()
	if rt == 0 {
		rt = min(len(up)-1, 3)
	}
	var st convergence
	bad := map[int]bool{}
	nodes := make(map[int]*node.Node, len(up))
	for _, i := range up {
		if nd := c.node(i); nd != nil {
			nodes[i] = nd
		}
	}
	for i, nd := range nodes {
		if ds, ok := nd.DiscoveryStatus(); ok {
			if !ds.Bootstrapped || ds.RoutingTableSize < rt {
				st.noDHT++
				bad[i] = true
			}
			if ds.Published.IsZero() {
				st.noRecord++
				bad[i] = true
			}
		}
	}
	st.dht, st.records = time.Now(), time.Now()
	for i, nd := range nodes {
		if !nd.GossipOn() || !live {
			continue
		}
		for _, j := range up {
			if j == i {
				continue
			}
			if a, known := nd.Agent(c.slots[j].agentID); !known || a.State != node.StateAlive && a.State != node.StateBusy {
				st.noLive++
				bad[i] = true
				break
			}
		}
	}
	st.live = time.Now()
	for i, nd := range nodes {
		if !nd.GossipOn() || len(up) < 2 {
			continue
		}
		if hb, _ := nd.GossipPeers(); hb == 0 {
			st.noGossip++
			bad[i] = true
		}
	}
	st.gossip = time.Now()
	st.missing = len(bad)
	return st
}

type sleepParams struct {
	Duration Duration `yaml:"duration"`
}

var parseSleep = params(sleepParams{Duration: Duration(time.Second)}, nil)

// runSleep lets the mesh run: heartbeats go on, and any suspicion of a healthy agent is
// counted as false.
func runSleep(ctx context.Context, _ *run, p any, _ *StepResult) error {
	t := time.NewTimer(p.(*sleepParams).Duration.D())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sleepUntil waits until t, or until ctx ends (false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// codeOf is the IACP code of err for the error table ("OTHER" for non-IACP errors).
func codeOf(err error) string {
	if c := protocol.CodeOf(err); c != "" {
		return string(c)
	}
	return "OTHER"
}
