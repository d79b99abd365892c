package sim

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

// A simulation runs every node in one process. When that process has less CPU than the nodes
// need, every node's timers run late together: heartbeats go out late, arrive late, and are
// judged late by checkers that are themselves late. Suspicions raised then say nothing about
// the protocol. So the run measures its own health beside the mesh's, and a step's report says
// when the simulator was overloaded, with the figures that show it.

// lagTick is how often the lag monitor expects to wake up.
const lagTick = 50 * time.Millisecond

// overloadLag is the overload threshold (docs/sim.md, "When the simulator is the
// bottleneck"): the process's timers fire this late at the 99th percentile of a step. A 1 s
// heartbeat checked by a ticker a quarter beat apart tolerates far less. A busy CPU alone is
// not overload: a step can use every core and still keep its timers on time; the step
// reports its CPU saturation beside the lag.
const overloadLag = 100 * time.Millisecond

// lagMonitor measures how late a timer of the simulator's own fires: what every node's
// timers suffer too. It owns one goroutine, stopped by stop.
type lagMonitor struct {
	mu      sync.Mutex
	samples []time.Duration // lateness of each tick since the last take
	done    chan struct{}
	wg      sync.WaitGroup
}

// startLagMonitor starts the monitor; observe, if not nil, sees each lateness as it is measured.
func startLagMonitor(observe func(late time.Duration)) *lagMonitor {
	m := &lagMonitor{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		next := time.Now().Add(lagTick)
		t := time.NewTimer(lagTick)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case now := <-t.C:
				late := max(now.Sub(next), 0)
				if observe != nil {
					observe(late)
				}
				m.mu.Lock()
				if len(m.samples) < 1<<16 {
					m.samples = append(m.samples, late)
				}
				m.mu.Unlock()
				next = now.Add(lagTick)
				t.Reset(lagTick)
			}
		}
	}()
	return m
}

// take returns the 99th percentile and the largest lateness since the last take (0 on a nil
// monitor: a run in virtual time has none).
func (m *lagMonitor) take() (p99, worst time.Duration) {
	if m == nil { // virtual time
		return 0, 0
	}
	m.mu.Lock()
	s := m.samples
	m.samples = nil
	m.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)], s[len(s)-1]
}

func (m *lagMonitor) stop() {
	close(m.done)
	m.wg.Wait()
}

// measureOverload adds the step's overload metrics: lag_p99_ms and lag_max_ms (how late the
// process's timers fired), cpu_saturation (cpu_cores over the cores the process may use) and
// overloaded (1 when the lag's p99 reached overloadLag).
func measureOverload(res *StepResult, lagP99, lagMax time.Duration) {
	res.Metrics["lag_p99_ms"] = ms(lagP99)
	res.Metrics["lag_max_ms"] = ms(lagMax)
	sat := round3(res.Metrics["cpu_cores"] / float64(runtime.GOMAXPROCS(0)))
	res.Metrics["cpu_saturation"] = sat
	over := 0.0
	if lagP99 >= overloadLag {
		over = 1
	}
	res.Metrics["overloaded"] = over
}

// meshBeats returns how many beats each running node has published on the heartbeat topic.
func (r *run) meshBeats() map[*node.Node]uint64 {
	beats := map[*node.Node]uint64{}
	for _, i := range r.c.up() {
		if nd := r.c.node(i); nd != nil {
			beats[nd] = nd.Safety().Gossip.MeshBeats
		}
	}
	return beats
}

// measureNodes adds what the running nodes report of themselves at the end of the step:
// local_health_max and local_health_mean, their Lifeguard scores (0 healthy .. 8), how slow
// they found themselves; mesh_interval_s_p50 and mesh_interval_s_max, the intervals their beats
// on the heartbeat topic announce, how far the mesh stretched its beats (docs/scale.md);
// liveness_agents_p50, how many agents their liveness tables hold; and mesh_beats_per_node,
// the beats they published on the heartbeat topic during the step (since beats0, meshBeats at
// its start; a node started during the step counts from its start).
func (r *run) measureNodes(res *StepResult, beats0 map[*node.Node]uint64) {
	up := r.c.up()
	sum, top := 0, 0
	var beats uint64
	var intervals, agents []float64
	for _, i := range up {
		nd := r.c.node(i)
		if nd == nil {
			continue
		}
		s := nd.Safety()
		sum += s.LocalHealth.Score
		top = max(top, s.LocalHealth.Score)
		if nd.GossipOn() {
			intervals = append(intervals, s.Gossip.MeshInterval.Seconds())
			agents = append(agents, float64(s.Gossip.Agents))
			beats += s.Gossip.MeshBeats - beats0[nd]
		}
	}
	res.Metrics["local_health_max"] = float64(top)
	res.Metrics["local_health_mean"] = round3(float64(sum) / float64(max(1, len(up))))
	if len(intervals) > 0 {
		slices.Sort(intervals)
		slices.Sort(agents)
		res.Metrics["mesh_interval_s_p50"] = intervals[len(intervals)/2]
		res.Metrics["mesh_interval_s_max"] = intervals[len(intervals)-1]
		res.Metrics["liveness_agents_p50"] = agents[len(agents)/2]
		res.Metrics["mesh_beats_per_node"] = round3(float64(beats) / float64(len(intervals)))
	}
}

// overloadNote says why a step counts as overloaded, with its figures.
func overloadNote(res *StepResult) string {
	return fmt.Sprintf("the simulator itself was overloaded: its timers fired %.0f ms late (p99; worst %.0f ms), CPU %.2f of %d cores",
		res.Metrics["lag_p99_ms"], res.Metrics["lag_max_ms"], res.Metrics["cpu_cores"], runtime.GOMAXPROCS(0))
}

// excuse marks the failed expectations on false suspicions of an overloaded step as excused:
// they held no meaning about the protocol. Every other expectation stands.
func excuse(res *StepResult) {
	if res.Metrics["overloaded"] != 1 {
		return
	}
	for i := range res.Checks {
		ch := &res.Checks[i]
		if ch.Metric == "false_suspicions" && !ch.OK && !ch.Missing {
			ch.OK, ch.Excused = true, overloadNote(res)
		}
	}
}
