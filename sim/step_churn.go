package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/iacp-node/iacp-node/node"
)

type churnParams struct {
	// Rate is how many nodes stop per second, at random (Poisson) times (default 0.5).
	Rate float64 `yaml:"rate"`
	// PerMinute, when set, gives the churn as the fraction of the nodes stopped per minute
	// (0.1: a tenth of them a minute) in place of Rate, so that a scenario keeps its churn
	// when --nodes changes its size.
	PerMinute float64 `yaml:"per_minute"`
	// Duration is how long the churn lasts (default 10s).
	Duration Duration `yaml:"duration"`
	// Down is how long each stopped node stays down before it restarts (default 2s).
	Down Duration `yaml:"down"`
	// Mode is crash (default) or graceful.
	Mode string `yaml:"mode"`
	// Load, when set, sends requests during the churn (rate, pattern, ...; its duration is
	// the churn's).
	Load *loadParams `yaml:"load"`
	// Broadcast, when set, sends broadcasts during the churn (churnBroadcast).
	Broadcast *churnBroadcast `yaml:"broadcast"`
}

// churnBroadcast sends a broadcast every Every during a churn, from a random running node,
// and waits up to Timeout for it. Each is measured over the nodes that ran from its sending
// to the end of its wait (a node stopped or restarted meanwhile counts neither way):
// broadcast_delivery_ratio, broadcast_p50_ms, broadcast_p99_ms and broadcast_max_ms.
type churnBroadcast struct {
	// Every is the time from one broadcast to the next (default 5s).
	Every Duration `yaml:"every"`
	// Timeout bounds the wait for each (default 10s).
	Timeout Duration `yaml:"timeout"`
}

var parseChurn = params(churnParams{Rate: 0.5, Duration: Duration(10 * time.Second), Down: Duration(2 * time.Second), Mode: ModeCrash},
	func(p *churnParams, sc *Scenario) error {
		if p.Rate <= 0 || p.Rate > 100 || p.Duration.D() <= 0 {
			return fmt.Errorf("churn: rate must be in (0, 100] per second and duration positive")
		}
		if p.PerMinute < 0 || p.PerMinute > 1 {
			return fmt.Errorf("churn: per_minute is a fraction of the nodes, in (0, 1]; got %v", p.PerMinute)
		}
		if b := p.Broadcast; b != nil {
			if b.Every == 0 {
				b.Every = Duration(5 * time.Second)
			}
			if b.Timeout == 0 {
				b.Timeout = Duration(10 * time.Second)
			}
			if b.Every.D() <= 0 || b.Timeout.D() <= 0 {
				return fmt.Errorf("churn: broadcast every and timeout must be positive")
			}
		}
		if err := checkMode(p.Mode); err != nil {
			return fmt.Errorf("churn: %w", err)
		}
		if p.Load != nil {
			l := defaultLoad
			if p.Load.Rate > 0 {
				l.Rate = p.Load.Rate
			}
			if p.Load.Pattern != "" {
				l.Pattern = p.Load.Pattern
			}
			if p.Load.Timeout > 0 {
				l.Timeout = p.Load.Timeout
			}
			l.Duration = p.Duration
			*p.Load = l
			return p.Load.check()
		}
		return nil
	})

// churnEvent is a stop (restart false) or restart of a slot at an offset.
type churnEvent struct {
	at      time.Duration
	restart bool
	slot    int
}

// runChurn stops random nodes at Poisson times and restarts each Down later, optionally
// under request load and broadcasts; it ends with every churned node restarted.
func runChurn(ctx context.Context, r *run, p any, res *StepResult) error {
	cp := p.(*churnParams)
	c := r.c
	rate := cp.rate(len(c.slots))
	spread := r.spreadAsync(ctx, cp, res.Index)
	var out loadResult
	loadDone := c.loadAsync(ctx, cp.Load, &out)
	t0 := time.Now()
	queue := c.churnStops(rate, cp.Duration.D())
	kills, restarts := 0, 0
	var firstErr error
	down := map[int]bool{}
	for len(queue) > 0 && ctx.Err() == nil {
		sort.SliceStable(queue, func(a, b int) bool { return queue[a].at < queue[b].at })
		ev := queue[0]
		queue = queue[1:]
		if wait := time.Until(t0.Add(ev.at)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				continue
			}
		}
		if ev.restart {
			if err := c.startNode(ctx, ev.slot); err != nil && firstErr == nil {
				firstErr = err
			}
			delete(down, ev.slot)
			restarts++
			continue
		}
		victims := c.pick(1)
		if len(victims) == 0 {
			continue
		}
		if err := c.stopNode(victims[0], cp.Mode == ModeCrash); err != nil && firstErr == nil {
			firstErr = err
		}
		kills++
		down[victims[0]] = true
		queue = append(queue, churnEvent{at: time.Since(t0) + cp.Down.D(), restart: true, slot: victims[0]})
	}
	for s := range down { // cancelled early: leave the mesh whole
		if err := c.startNode(context.WithoutCancel(ctx), s); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	<-loadDone
	measured := spread()
	res.Metrics["kills"] = float64(kills)
	res.Metrics["restarts"] = float64(restarts)
	res.Metrics["churn_rate_per_s"] = round3(rate)
	if cp.Load != nil {
		out.put(r, res, time.Since(t0))
	}
	if cp.Broadcast != nil {
		measured.put(r, res)
	}
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// loadAsync runs the load p (none when nil) into out, and closes the channel it returns when
// the load is over.
func (c *cluster) loadAsync(ctx context.Context, p *loadParams, out *loadResult) <-chan struct{} {
	done := make(chan struct{})
	if p == nil {
		close(done)
		return done
	}
	plan := c.schedule(p)
	go func() {
		defer close(done)
		c.runSchedule(ctx, p, plan, out)
	}()
	return done
}

// churnStops draws the times of the churn's stops within d, a Poisson process of rate stops
// per second.
func (c *cluster) churnStops(rate float64, d time.Duration) []churnEvent {
	var stops []time.Duration
	for at := time.Duration(c.rng.ExpFloat64() / rate * float64(time.Second)); at < d; at += time.Duration(c.rng.ExpFloat64() / rate * float64(time.Second)) {
		stops = append(stops, at)
	}
	var queue []churnEvent
	for _, at := range stops {
		queue = append(queue, churnEvent{at: at, slot: -1})
	}
	return queue
}

// rate is the churn's stops per second in a mesh of n slots: PerMinute's share of them a
// minute when set, else Rate.
func (p *churnParams) rate(n int) float64 {
	if p.PerMinute > 0 {
		return p.PerMinute * float64(n) / 60
	}
	return p.Rate
}

// spreadAsync starts the broadcasts of a churn (p.Broadcast) and returns a function that
// waits for them to end and returns what they measured; without broadcasts it starts nothing.
func (r *run) spreadAsync(ctx context.Context, p *churnParams, step int) func() churnSpread {
	if p.Broadcast == nil {
		return func() churnSpread { return churnSpread{} }
	}
	c := r.c
	rng := rand.New(rand.NewPCG(c.rng.Uint64(), c.rng.Uint64())) // c.rng is the churn's own
	done := make(chan struct{})
	var out churnSpread
	go func() {
		defer close(done)
		out = r.spreadDuring(ctx, step, *p.Broadcast, p.Duration.D(), rng)
	}()
	return func() churnSpread { <-done; return out }
}

// churnSpread is what the broadcasts sent during a churn measured.
type churnSpread struct {
	lat                     samples
	sent, reached, expected int
	series                  []Series
	errs                    map[string]int
}

// spreadDuring sends a broadcast every p.Every for d (churnBroadcast) and measures each over
// the nodes that ran throughout its wait. rng is its own: the churn draws from the cluster's.
func (r *run) spreadDuring(ctx context.Context, step int, p churnBroadcast, d time.Duration, rng *rand.Rand) churnSpread {
	out := churnSpread{errs: map[string]int{}}
	end := time.Now().Add(d)
	for k := 0; ctx.Err() == nil && time.Now().Before(end); k++ {
		next := time.Now().Add(p.Every.D())
		r.spreadOne(ctx, step, k, p.Timeout.D(), rng, &out)
		if wait := time.Until(next); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	return out
}

// spreadOne sends broadcast k of a churn step from a random running node and waits until
// every node that ran when it was sent, and still runs the same node, has it, or timeout.
func (r *run) spreadOne(ctx context.Context, step, k int, timeout time.Duration, rng *rand.Rand, out *churnSpread) {
	c := r.c
	up := c.up()
	if len(up) < 2 {
		return
	}
	from := up[rng.IntN(len(up))]
	nd := c.node(from)
	if nd == nil { // stopped since
		return
	}
	want := map[int]*node.Node{}
	for _, i := range up {
		if n := c.node(i); n != nil && i != from {
			want[i] = n
		}
	}
	throughout := func() map[int]bool {
		m := make(map[int]bool, len(want))
		for i, n := range want {
			if c.node(i) == n {
				m[i] = true
			}
		}
		return m
	}
	key := fmt.Sprintf("sim.broadcast.%d.churn.%d", step, k)
	out.sent++
	delays, n, err := r.gossipOnce(ctx, nd, key, "simulator broadcast under churn", "", timeout, throughout)
	if err != nil {
		out.errs[codeOf(err)]++
	}
	out.lat = append(out.lat, delays...)
	out.reached += len(delays)
	out.expected += n
	out.series = append(out.series, propagation(fmt.Sprintf("step %d broadcast under churn %d", step, k+1), delays, n))
}

// put writes what the broadcasts measured into res and the report.
func (s churnSpread) put(r *run, res *StepResult) {
	res.Metrics["broadcasts"] = float64(s.sent)
	res.Metrics["broadcast_delivery_ratio"] = ratio(s.reached, s.expected)
	res.Metrics["broadcast_receivers_expected"] = float64(s.expected)
	s.lat.put(res.Metrics, "broadcast")
	for code, n := range s.errs {
		res.Errors[code] += n
	}
	r.rep.Propagation = append(r.rep.Propagation, s.series...)
}
