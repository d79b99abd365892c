package sim

import (
	"context"
	"fmt"
	"sort"
	"time"
)

type churnParams struct {
	// Rate is how many nodes stop per second, at random (Poisson) times (default 0.5).
	Rate float64 `yaml:"rate"`
	// Duration is how long the churn lasts (default 10s).
	Duration Duration `yaml:"duration"`
	// Down is how long each stopped node stays down before it restarts (default 2s).
	Down Duration `yaml:"down"`
	// Mode is crash (default) or graceful.
	Mode string `yaml:"mode"`
	// Load, when set, sends requests during the churn (rate, pattern, ...; its duration is
	// the churn's).
	Load *loadParams `yaml:"load"`
}

var parseChurn = params(churnParams{Rate: 0.5, Duration: Duration(10 * time.Second), Down: Duration(2 * time.Second), Mode: ModeCrash},
	func(p *churnParams, sc *Scenario) error {
		if p.Rate <= 0 || p.Rate > 100 || p.Duration.D() <= 0 {
			return fmt.Errorf("churn: rate must be in (0, 100] per second and duration positive")
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
// under request load; it ends with every churned node restarted.
func runChurn(ctx context.Context, r *run, p any, res *StepResult) error {
	cp := p.(*churnParams)
	c := r.c
	var out loadResult
	loadDone := make(chan struct{})
	if cp.Load != nil {
		plan := c.schedule(cp.Load)
		go func() {
			defer close(loadDone)
			c.runSchedule(ctx, cp.Load, plan, &out)
		}()
	} else {
		close(loadDone)
	}
	t0 := time.Now()
	var stops []time.Duration
	for at := time.Duration(c.rng.ExpFloat64() / cp.Rate * float64(time.Second)); at < cp.Duration.D(); at += time.Duration(c.rng.ExpFloat64() / cp.Rate * float64(time.Second)) {
		stops = append(stops, at)
	}
	var queue []churnEvent
	for _, at := range stops {
		queue = append(queue, churnEvent{at: at, slot: -1})
	}
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
	res.Metrics["kills"] = float64(kills)
	res.Metrics["restarts"] = float64(restarts)
	if cp.Load != nil {
		out.put(r, res, time.Since(t0))
	}
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
