package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/protocol"
)

// The coordination steps (docs/coordination.md) run a pattern from one running node over the
// synthetic agents' handoff handler (agentHandlers: it answers after delay_ms), and crash
// agents while it runs.

type scatterParams struct {
	// Targets is how many agents are asked (default every running node but the caller, at
	// most coord's fan-out).
	Targets int `yaml:"targets"`
	// Kill is how many of the targets crash while they work on the request.
	Kill int `yaml:"kill"`
	// DelayMS is how long each agent works before it answers (default 500).
	DelayMS float64 `yaml:"delay_ms"`
	// Completion is all, first-k or quorum (default all); K its count.
	Completion string `yaml:"completion"`
	K          int    `yaml:"k"`
	// Deadline bounds the scatter (default 10s); Timeout each agent's attempt (default 5s).
	Deadline Duration `yaml:"deadline"`
	Timeout  Duration `yaml:"timeout"`
}

var parseScatter = params(scatterParams{DelayMS: 500, Completion: "all", Deadline: Duration(10 * time.Second), Timeout: Duration(5 * time.Second)},
	func(p *scatterParams, sc *Scenario) error {
		if p.Targets < 0 || p.Kill < 0 || (p.Targets > 0 && p.Kill >= p.Targets) || p.DelayMS < 0 || p.Deadline.D() <= 0 || p.Timeout.D() < time.Second {
			return fmt.Errorf("scatter: targets and kill must be >= 0 with kill < targets, delay_ms >= 0, deadline > 0, timeout >= 1s")
		}
		switch coord.Completion(p.Completion) {
		case coord.All, coord.FirstK, coord.Quorum:
			return nil
		}
		return fmt.Errorf("scatter: completion %q: use all, first-k or quorum", p.Completion)
	})

// runScatter scatters one request from a random running node to its targets, crashes Kill of
// them halfway through their work, and measures the aggregate: how many live targets answered
// (live_answered_ratio, the pattern's promise), how the killed ones were reported, and how long
// the scatter took against its deadline.
func runScatter(ctx context.Context, r *run, p any, res *StepResult) error {
	sp := p.(*scatterParams)
	c := r.c
	from := c.up()[c.rng.IntN(len(c.up()))]
	n := sp.Targets
	if n == 0 {
		n = len(c.up()) - 1
	}
	targets := c.pick(n, from)
	if len(targets) < n || len(targets) == 0 {
		return fmt.Errorf("scatter: %d targets wanted, %d running nodes besides the caller", n, len(targets))
	}
	co, err := coord.New(c.node(from), coord.WithMaxFanout(max(len(targets), coord.DefaultConfig().MaxFanout)))
	if err != nil {
		return err
	}
	agents := make([]string, len(targets))
	for i, t := range targets {
		agents[i] = c.slots[t].agentID
	}
	payload, _ := json.Marshal(workPayload{DelayMS: sp.DelayMS})
	ask := coord.Ask{Intent: protocol.IntentHandoff, Payload: payload}
	opts := coord.ScatterOptions{CallOptions: coord.CallOptions{Timeout: sp.Timeout.D()}, Completion: coord.Completion(sp.Completion), K: sp.K, Deadline: sp.Deadline.D()}
	done := make(chan *coord.Gather, 1)
	t0 := time.Now()
	go func() {
		g, err := co.Scatter(ctx, coord.Targets{Agents: agents}, ask, opts)
		if g == nil {
			g = &coord.Gather{Errors: map[protocol.Code][]coord.Failure{protocol.CodeOf(err): nil}}
		}
		done <- g
	}()
	killed := map[string]bool{}
	if sp.Kill > 0 {
		select {
		case <-time.After(time.Duration(sp.DelayMS / 2 * float64(time.Millisecond))):
		case <-ctx.Done():
		}
		for _, v := range targets[:sp.Kill] {
			if err := c.stopNode(v, true); err != nil {
				<-done
				return err
			}
			killed[c.slots[v].agentID] = true
		}
	}
	g := <-done
	took := time.Since(t0)
	for code, fs := range g.Errors {
		res.Errors[string(code)] += len(fs)
	}
	res.Metrics["targets"] = float64(len(targets))
	res.Metrics["killed"] = float64(len(killed))
	res.Metrics["answered"] = float64(len(g.Answers))
	res.Metrics["live_answered_ratio"] = ratio(liveAnswered(g, killed), len(targets)-len(killed))
	res.Metrics["killed_accounted_ratio"] = ratio(killedReported(g, killed), len(killed))
	res.Metrics["met"] = boolMetric(g.Met)
	res.Metrics["scatter_ms"] = float64(took.Milliseconds())
	res.Metrics["deadline_ms"] = float64(sp.Deadline.D().Milliseconds())
	return ctx.Err()
}

// liveAnswered counts the answers of g from targets not killed.
func liveAnswered(g *coord.Gather, killed map[string]bool) int {
	n := 0
	for _, a := range g.Answers {
		if !killed[a.AgentID] {
			n++
		}
	}
	return n
}

// killedReported counts the killed targets the aggregate g names: failed, timed out or
// answered (before it crashed).
func killedReported(g *coord.Gather, killed map[string]bool) int {
	reported := map[string]bool{}
	for _, fs := range g.Errors {
		for _, f := range fs {
			if killed[f.AgentID] {
				reported[f.AgentID] = true
			}
		}
	}
	for _, a := range g.TimedOut {
		if killed[a] {
			reported[a] = true
		}
	}
	for _, a := range g.Answers {
		if killed[a.AgentID] {
			reported[a.AgentID] = true // it answered before it crashed
		}
	}
	return len(reported)
}

type pipelineParams struct {
	// Length is the number of steps (default 3); each step has a primary agent and a fallback.
	Length int `yaml:"length"`
	// KillMiddle crashes the middle step's primary agent while the first step works.
	KillMiddle bool `yaml:"kill_middle"`
	// DelayMS is each agent's work (default 300); Timeout each attempt (default 3s).
	DelayMS float64  `yaml:"delay_ms"`
	Timeout Duration `yaml:"timeout"`
}

var parsePipeline = params(pipelineParams{Length: 3, DelayMS: 300, Timeout: Duration(3 * time.Second)}, func(p *pipelineParams, sc *Scenario) error {
	if p.Length < 2 || p.Length > 16 || p.DelayMS < 0 || p.Timeout.D() < time.Second {
		return fmt.Errorf("pipeline: length 2 to 16, delay_ms >= 0, timeout >= 1s")
	}
	return nil
})

// runPipeline runs a pipeline whose steps each name a primary agent and a fallback, and
// crashes the middle primary while the first step works: the pipeline must complete through
// the middle fallback (completed, middle_by_fallback).
func runPipeline(ctx context.Context, r *run, p any, res *StepResult) error {
	pp := p.(*pipelineParams)
	c := r.c
	from := c.up()[c.rng.IntN(len(c.up()))]
	agents := c.pick(2*pp.Length, from)
	if len(agents) < 2*pp.Length {
		return fmt.Errorf("pipeline: %d agents needed besides the caller, %d running", 2*pp.Length, len(agents))
	}
	co, err := coord.New(c.node(from))
	if err != nil {
		return err
	}
	payload, _ := json.Marshal(workPayload{DelayMS: pp.DelayMS})
	steps := make([]coord.Step, pp.Length)
	for i := range steps {
		steps[i] = coord.Step{Name: fmt.Sprintf("step %d", i+1), Agents: []string{c.slots[agents[2*i]].agentID, c.slots[agents[2*i+1]].agentID},
			Intent: protocol.IntentHandoff, Payload: payload}
	}
	mid := pp.Length / 2
	type outcome struct {
		pr  *coord.PipelineResult
		err error
	}
	done := make(chan outcome, 1)
	t0 := time.Now()
	go func() {
		pr, err := co.Pipeline(ctx, "", nil, steps, coord.CallOptions{Timeout: pp.Timeout.D()})
		done <- outcome{pr, err}
	}()
	if pp.KillMiddle {
		select {
		case <-time.After(time.Duration(pp.DelayMS / 2 * float64(time.Millisecond))):
		case <-ctx.Done():
		}
		if err := c.stopNode(agents[2*mid], true); err != nil {
			<-done
			return err
		}
	}
	o := <-done
	res.Metrics["pipeline_ms"] = float64(time.Since(t0).Milliseconds())
	if o.err != nil {
		res.Errors[string(protocol.CodeOf(o.err))]++
	}
	pr := o.pr
	if pr == nil {
		pr = &coord.PipelineResult{}
	}
	res.Metrics["completed"] = boolMetric(o.err == nil && len(pr.Steps) == pp.Length)
	if len(pr.Steps) > mid {
		res.Metrics["middle_by_fallback"] = boolMetric(pr.Steps[mid].AgentID == c.slots[agents[2*mid+1]].agentID)
	}
	return ctx.Err()
}

func boolMetric(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type breakerParams struct {
	// Threshold is the failures that open a circuit (default 3); OpenFor how long it stays open
	// before a probe (default 2s).
	Threshold int      `yaml:"threshold"`
	OpenFor   Duration `yaml:"open_for"`
	// Timeout bounds each call (default 1s); RecoverTimeout how long the restarted agent has to
	// answer a probe (default 20s).
	Timeout        Duration `yaml:"timeout"`
	RecoverTimeout Duration `yaml:"recover_timeout"`
}

var parseBreaker = params(breakerParams{Threshold: 3, OpenFor: Duration(2 * time.Second), Timeout: Duration(time.Second), RecoverTimeout: Duration(20 * time.Second)},
	func(p *breakerParams, sc *Scenario) error {
		if p.Threshold < 1 || p.Threshold > 100 || p.OpenFor.D() <= 0 || p.Timeout.D() < time.Second || p.RecoverTimeout.D() <= 0 {
			return fmt.Errorf("breaker: threshold 1 to 100, open_for > 0, timeout >= 1s, recover_timeout > 0")
		}
		return nil
	})

// runBreaker crashes an agent and calls it from another node until its circuit opens, calls
// it once more while open (it must fail at once: fast_fail_ms), restarts it, and calls until a
// probe closes the circuit again (opened, closed, recover_ms).
func runBreaker(ctx context.Context, r *run, p any, res *StepResult) error {
	bp := p.(*breakerParams)
	c := r.c
	victims := c.pick(1)
	if len(victims) == 0 {
		return fmt.Errorf("breaker: no running node to fail")
	}
	v := victims[0]
	from := -1
	for _, i := range c.up() {
		if i != v {
			from = i
			break
		}
	}
	if from < 0 {
		return fmt.Errorf("breaker: needs two running nodes")
	}
	co, err := coord.New(c.node(from), coord.WithBreaker(bp.Threshold, bp.OpenFor.D(), 1))
	if err != nil {
		return err
	}
	agent := c.slots[v].agentID
	ask := coord.Ask{Intent: protocol.IntentHandoff, Payload: json.RawMessage(`{}`)}
	opts := coord.CallOptions{Timeout: bp.Timeout.D()}
	if err := c.stopNode(v, true); err != nil {
		return err
	}
	calls := 0
	for ; calls < bp.Threshold+5 && ctx.Err() == nil; calls++ {
		if b, ok := co.Breaker(agent); ok && b.State == coord.Open {
			break
		}
		if a := co.Call(ctx, agent, ask, opts); a.Err != nil {
			res.Errors[string(a.Code())]++
		}
	}
	b, _ := co.Breaker(agent)
	res.Metrics["calls_to_open"] = float64(calls)
	res.Metrics["opened"] = boolMetric(b.State == coord.Open)
	t0 := time.Now()
	a := co.Call(ctx, agent, ask, opts)
	res.Metrics["fast_fail_ms"] = float64(time.Since(t0).Microseconds()) / 1000
	res.Metrics["fast_failed"] = boolMetric(a.Attempts == 0 && a.Err != nil)
	if err := c.startNode(ctx, v); err != nil {
		return err
	}
	t1 := time.Now()
	closed := false
	for time.Since(t1) < bp.RecoverTimeout.D() && ctx.Err() == nil {
		if a := co.Call(ctx, agent, ask, opts); a.Err == nil {
			b, _ := co.Breaker(agent)
			closed = b.State == "" || b.State == coord.Closed
			break
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	res.Metrics["closed"] = boolMetric(closed)
	res.Metrics["recover_ms"] = float64(time.Since(t1).Milliseconds())
	return ctx.Err()
}
