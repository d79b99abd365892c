package sim

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Load patterns.
const (
	PatternConstant = "constant" // evenly spaced
	PatternPoisson  = "poisson"  // exponential gaps: random arrivals at the mean rate
	PatternRamp     = "ramp"     // the rate grows linearly from 0 to twice the mean
	PatternBurst    = "burst"    // Bursts equal bursts, evenly spaced, all at once
)

type loadParams struct {
	// Rate is the mean number of requests per second (default 20).
	Rate float64 `yaml:"rate"`
	// Duration is how long requests are sent (default 3s).
	Duration Duration `yaml:"duration"`
	// Pattern is constant (default), poisson, ramp or burst.
	Pattern string `yaml:"pattern"`
	// Bursts is the number of bursts of the burst pattern (default 5).
	Bursts int `yaml:"bursts"`
	// Timeout bounds each request (default 10s).
	Timeout Duration `yaml:"timeout"`
	// MaxInFlight bounds outstanding requests; a request due when it is reached is counted
	// as skipped instead of sent (default 512).
	MaxInFlight int `yaml:"max_in_flight"`
}

// maxPlanned bounds the requests of one step.
const maxPlanned = 1_000_000

var defaultLoad = loadParams{Rate: 20, Duration: Duration(3 * time.Second), Pattern: PatternConstant, Bursts: 5,
	Timeout: Duration(10 * time.Second), MaxInFlight: 512}

func (p *loadParams) check() error {
	switch {
	case p.Rate <= 0 || p.Duration.D() <= 0:
		return fmt.Errorf("load: rate and duration must be positive")
	case p.Rate*p.Duration.D().Seconds() > maxPlanned:
		return fmt.Errorf("load: rate x duration plans %.0f requests; at most %d per step", p.Rate*p.Duration.D().Seconds(), maxPlanned)
	case p.Pattern != PatternConstant && p.Pattern != PatternPoisson && p.Pattern != PatternRamp && p.Pattern != PatternBurst:
		return fmt.Errorf("load: pattern %q is not constant, poisson, ramp or burst", p.Pattern)
	case p.Bursts < 1 || p.Timeout.D() <= 0 || p.MaxInFlight < 1:
		return fmt.Errorf("load: bursts, timeout and max_in_flight must be positive")
	}
	return nil
}

var parseLoad = params(defaultLoad, func(p *loadParams, _ *Scenario) error { return p.check() })

// planned is one request of a schedule: when, and uniform draws that pick the sender, the
// target and the handler delay among the nodes running at that moment.
type planned struct {
	at             time.Duration
	from, to, work float64
}

// schedule draws the requests of a load from the seeded source.
func (c *cluster) schedule(p *loadParams) []planned {
	d := p.Duration.D()
	n := int(math.Round(p.Rate * d.Seconds()))
	out := make([]planned, 0, n)
	var at time.Duration
	for k := 0; k < n; k++ {
		switch p.Pattern {
		case PatternConstant:
			at = time.Duration(float64(k) / p.Rate * float64(time.Second))
		case PatternPoisson:
			if k > 0 {
				at += time.Duration(c.rng.ExpFloat64() / p.Rate * float64(time.Second))
			}
		case PatternRamp:
			at = time.Duration(math.Sqrt(float64(k)/float64(n)) * float64(d))
		case PatternBurst:
			at = time.Duration(k*p.Bursts/n) * d / time.Duration(p.Bursts)
		}
		if at >= d {
			break
		}
		out = append(out, planned{at: at, from: c.rng.Float64(), to: c.rng.Float64(), work: c.rng.Float64()})
	}
	return out
}

// loadResult accumulates the outcome of requests; guarded by mu.
type loadResult struct {
	mu      sync.Mutex
	lat     samples
	ok      int
	sent    int
	skipped int
	errs    map[string]int
}

// runSchedule sends the planned requests on time and waits for every answer.
func (c *cluster) runSchedule(ctx context.Context, p *loadParams, plan []planned, out *loadResult) {
	t0 := time.Now()
	sem := make(chan struct{}, p.MaxInFlight)
	var wg sync.WaitGroup
	for _, pr := range plan {
		if wait := time.Until(t0.Add(pr.at)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			out.mu.Lock()
			out.skipped++
			out.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.request(ctx, p.Timeout.D(), pr, out)
		}()
	}
	wg.Wait()
}

// request sends one planned request and records its round trip or error.
func (c *cluster) request(ctx context.Context, timeout time.Duration, pr planned, out *loadResult) {
	up := c.up()
	if len(up) < 2 {
		return
	}
	fi, ti := int(pr.from*float64(len(up))), int(pr.to*float64(len(up)-1))
	if ti >= fi {
		ti++ // every other running node equally likely
	}
	nd, target := c.node(up[fi]), c.slots[up[ti]]
	if nd == nil {
		return // stopped since up() was read
	}
	dl := target.delay
	work := dl.Min.D() + time.Duration(pr.work*float64(dl.Max-dl.Min))
	m, err := nd.Builder().Request(target.agentID, protocol.IntentHandoff, workPayload{DelayMS: float64(work) / float64(time.Millisecond)})
	if err != nil {
		out.record(0, err)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t0 := time.Now()
	_, err = nd.Request(rctx, m)
	out.record(time.Since(t0), err)
}

func (out *loadResult) record(d time.Duration, err error) {
	out.mu.Lock()
	defer out.mu.Unlock()
	out.sent++
	if err != nil {
		if out.errs == nil {
			out.errs = map[string]int{}
		}
		out.errs[codeOf(err)]++
		return
	}
	out.ok++
	out.lat.add(d)
}

// put writes the load metrics into res and the samples into the run's distribution.
func (out *loadResult) put(r *run, res *StepResult, wall time.Duration) {
	out.mu.Lock()
	defer out.mu.Unlock()
	res.Metrics["requests"] = float64(out.sent)
	res.Metrics["request_errors"] = float64(out.sent - out.ok)
	res.Metrics["request_success"] = ratio(out.ok, out.sent)
	res.Metrics["skipped"] = float64(out.skipped)
	res.Metrics["throughput_rps"] = round3(float64(out.ok) / max(wall.Seconds(), 1e-3))
	out.lat.put(res.Metrics, "request")
	for k, v := range out.errs {
		res.Errors[k] += v
	}
	r.requests = append(r.requests, out.lat...)
}

// runLoad sends requests between random running agents (handoff, answered by the synthetic
// agent after its handler delay) and measures their round trips.
func runLoad(ctx context.Context, r *run, p any, res *StepResult) error {
	lp := p.(*loadParams)
	plan := r.c.schedule(lp)
	var out loadResult
	t0 := time.Now()
	r.c.runSchedule(ctx, lp, plan, &out)
	out.put(r, res, time.Since(t0))
	return ctx.Err()
}
