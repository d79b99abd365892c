package sim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// Stop modes.
const (
	ModeCrash    = "crash"    // vanish without a word (links cut, then closed)
	ModeGraceful = "graceful" // node.Close: draining and offline heartbeats, a DHT "left" record
)

type killParams struct {
	// Count is how many random running nodes to stop (default 1), unless Nodes names them.
	Count int   `yaml:"count"`
	Nodes []int `yaml:"nodes"`
	// Mode is crash (default) or graceful.
	Mode string `yaml:"mode"`
	// DetectTimeout bounds the wait for every running node to notice (default: the suspect
	// timeout, SuspectAfter heartbeats, plus two heartbeats and 5s).
	DetectTimeout Duration `yaml:"detect_timeout"`
}

func checkMode(m string) error {
	if m != ModeCrash && m != ModeGraceful {
		return fmt.Errorf("mode %q is neither crash nor graceful", m)
	}
	return nil
}

// defaultDetect is how long every running node may take to notice a crash: SuspectAfter of the
// mesh beats, stretched in a mesh larger than its budget (docs/scale.md), plus two and 5 s.
// Nodes that watch the victim notice within SuspectAfter of their own intervals.
func defaultDetect(sc *Scenario) Duration {
	return Duration(time.Duration(sc.Node.SuspectAfter+2)*meshInterval(sc) + 5*time.Second)
}

// meshInterval is how often every agent of the scenario's mesh beats on the heartbeat topic,
// once every node knows every other (docs/scale.md).
func meshInterval(sc *Scenario) time.Duration {
	iv := sc.Node.HeartbeatInterval.D()
	k := (sc.Nodes + sc.Node.MeshBudget - 1) / max(sc.Node.MeshBudget, 1)
	return max(iv, min(time.Duration(k)*iv, node.MaxMeshInterval))
}

var parseKill = params(killParams{Count: 1, Mode: ModeCrash}, func(p *killParams, sc *Scenario) error {
	if p.DetectTimeout == 0 {
		p.DetectTimeout = defaultDetect(sc)
	}
	if p.Count < 1 || p.Count >= sc.Nodes {
		return fmt.Errorf("kill: count %d is outside 1..%d", p.Count, sc.Nodes-1)
	}
	if err := checkMode(p.Mode); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return checkNodes(p.Nodes, sc)
})

// gone are the states that say an agent no longer takes work.
var gone = []node.State{node.StateSuspect, node.StateOffline, node.StateStuck, node.StateDraining}

// runKill stops nodes and measures how long the running nodes take to notice: for each
// (observer, victim) pair, the first transition of the victim to suspect, draining, offline
// or stuck in the observer's liveness table.
func runKill(ctx context.Context, r *run, p any, res *StepResult) error {
	kp := p.(*killParams)
	c := r.c
	victims := kp.Nodes
	if len(victims) == 0 {
		victims = c.pick(kp.Count)
	}
	t0 := time.Now()
	for _, v := range victims {
		if err := c.stopNode(v, kp.Mode == ModeCrash); err != nil {
			return err
		}
	}
	res.Metrics["killed"] = float64(len(victims))
	if !c.gossipOn() {
		return ctx.Err()
	}
	pairs := map[[2]int]bool{}
	for _, o := range c.up() {
		for _, v := range victims {
			pairs[[2]int{o, v}] = true
		}
	}
	r.detect(ctx, res, pairs, t0, kp.DetectTimeout.D(), gone...)
	return ctx.Err()
}

// detect waits until every (observer, subject) pair has seen a transition of the subject to
// one of states since t0, or timeout, and writes detected_ratio and detection_* metrics.
func (r *run) detect(ctx context.Context, res *StepResult, pairs map[[2]int]bool, t0 time.Time, timeout time.Duration, states ...node.State) {
	subjects := map[int]bool{}
	for p := range pairs {
		subjects[p[1]] = true
	}
	seen := func() map[[2]int]time.Time {
		out := map[[2]int]time.Time{}
		for s := range subjects {
			for o, at := range r.c.rec.firstTransition(s, t0, states...) {
				if pairs[[2]int{o, s}] {
					out[[2]int{o, s}] = at
				}
			}
		}
		return out
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for len(seen()) < len(pairs) && dctx.Err() == nil {
		select {
		case <-poll.C:
		case <-dctx.Done():
		}
	}
	var lat samples
	got := seen()
	for _, at := range got {
		lat.add(at.Sub(t0))
	}
	res.Metrics["detected_ratio"] = ratio(len(got), len(pairs))
	lat.put(res.Metrics, "detection")
}

type restartParams struct {
	// Nodes to restart (default: every stopped node that ran before).
	Nodes []int `yaml:"nodes"`
	// RejoinTimeout bounds the wait for every running node to see them alive (default 30s).
	RejoinTimeout Duration `yaml:"rejoin_timeout"`
}

var parseRestart = params(restartParams{RejoinTimeout: Duration(30 * time.Second)}, func(p *restartParams, sc *Scenario) error {
	return checkNodes(p.Nodes, sc)
})

// runRestart restarts stopped nodes with their identity and data directory, and measures
// how long until every running node sees each alive again (rejoin).
func runRestart(ctx context.Context, r *run, p any, res *StepResult) error {
	rp := p.(*restartParams)
	c := r.c
	nodes := rp.Nodes
	if len(nodes) == 0 {
		for _, i := range c.down() {
			if c.slots[i].bootAddr != "" {
				nodes = append(nodes, i)
			}
		}
	}
	t0 := time.Now()
	c.joinStart = t0
	for _, i := range nodes {
		if err := c.startNode(ctx, i); err != nil {
			return err
		}
	}
	res.Metrics["restarted"] = float64(len(nodes))
	if c.gossipOn() {
		r.rejoin(ctx, res, nodes, t0, rp.RejoinTimeout.D())
	}
	return ctx.Err()
}

// rejoin polls until every running node sees each of nodes alive with a heartbeat received
// after t0, and writes rejoined_ratio and rejoin_* metrics.
func (r *run) rejoin(ctx context.Context, res *StepResult, nodes []int, t0 time.Time, timeout time.Duration) {
	c := r.c
	done := map[[2]int]time.Duration{}
	want := 0
	deadline := time.Now().Add(timeout)
	for {
		want = 0
		for _, o := range c.up() {
			nd := c.node(o)
			for _, s := range nodes {
				if o == s {
					continue
				}
				want++
				k := [2]int{o, s}
				if _, ok := done[k]; ok || nd == nil {
					continue
				}
				a, known := nd.Agent(c.slots[s].agentID)
				if known && a.State == node.StateAlive && a.LastSeen.After(t0) {
					done[k] = time.Since(t0)
				}
			}
		}
		if len(done) >= want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var lat samples
	for _, d := range done {
		lat.add(d)
	}
	res.Metrics["rejoined_ratio"] = ratio(len(done), want)
	lat.put(res.Metrics, "rejoin")
}

type partitionParams struct {
	// Fraction of the nodes (by slot order, so the bootstrap nodes are in it) on the first
	// side; the rest form the second (default 0.5).
	Fraction float64 `yaml:"fraction"`
	// DetectTimeout bounds the wait for every node to suspect every node across (default as
	// for kill).
	DetectTimeout Duration `yaml:"detect_timeout"`
}

var parsePartition = params(partitionParams{Fraction: 0.5}, func(p *partitionParams, sc *Scenario) error {
	if p.DetectTimeout == 0 {
		p.DetectTimeout = defaultDetect(sc)
	}
	if p.Fraction <= 0 || p.Fraction >= 1 {
		return fmt.Errorf("partition: fraction %v is outside (0, 1)", p.Fraction)
	}
	if sc.Network.Transport != TransportMocknet {
		return fmt.Errorf("partition needs network.transport mocknet")
	}
	return nil
})

// runPartition splits the mesh in two and measures how long nodes take to suspect the
// agents across the cut (those suspicions are expected, not false).
func runPartition(ctx context.Context, r *run, p any, res *StepResult) error {
	pp := p.(*partitionParams)
	c := r.c
	k := int(math.Round(pp.Fraction * float64(len(c.slots))))
	side := make([]int, len(c.slots))
	for i := range side {
		side[i] = 1
		if i >= k {
			side[i] = 2
		}
	}
	t0 := time.Now()
	if err := c.setSides(side); err != nil {
		return err
	}
	pairs := map[[2]int]bool{}
	up := c.up()
	for _, o := range up {
		for _, s := range up {
			if side[o] != side[s] {
				pairs[[2]int{o, s}] = true
			}
		}
	}
	res.Metrics["cut_links"] = float64(len(pairs) / 2)
	if c.gossipOn() {
		r.detect(ctx, res, pairs, t0, pp.DetectTimeout.D(), node.StateSuspect, node.StateStuck)
	}
	return ctx.Err()
}

type healParams struct {
	// Timeout bounds the wait for the mesh to converge again (default 60s).
	Timeout Duration `yaml:"timeout"`
}

var parseHeal = params(healParams{Timeout: Duration(60 * time.Second)}, func(p *healParams, sc *Scenario) error {
	if sc.Network.Transport != TransportMocknet {
		return fmt.Errorf("heal needs network.transport mocknet")
	}
	return nil
})

// runHeal restores every link and measures how long until the mesh has converged again,
// every node seeing every running agent alive (heal_ms).
func runHeal(ctx context.Context, r *run, p any, res *StepResult) error {
	hp := p.(*healParams)
	c := r.c
	t0 := time.Now()
	c.joinStart = t0
	if err := c.setSides(make([]int, len(c.slots))); err != nil {
		return err
	}
	ok, st := c.waitConverged(ctx, hp.Timeout.D(), c.gossipOn(), 0)
	res.Metrics["converged"] = b2f(ok)
	res.Metrics["heal_ms"] = ms(time.Since(t0))
	res.Metrics["not_converged_nodes"] = float64(st.missing)
	return ctx.Err()
}
