package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/iacp-node/iacp-node/workflow"
)

type workflowParams struct {
	// KillCoordinator crashes the coordinator once the first step completed, while the
	// second layer works, and starts it again (default true).
	KillCoordinator bool `yaml:"kill_coordinator"`
	// DelayMS is each step's work (default 800); Timeout each attempt (default 3s);
	// CompleteTimeout how long the whole workflow may take (default 60s).
	DelayMS         float64  `yaml:"delay_ms"`
	Timeout         Duration `yaml:"timeout"`
	CompleteTimeout Duration `yaml:"complete_timeout"`
}

var parseWorkflow = params(workflowParams{KillCoordinator: true, DelayMS: 800, Timeout: Duration(3 * time.Second), CompleteTimeout: Duration(60 * time.Second)},
	func(p *workflowParams, sc *Scenario) error {
		if p.DelayMS < 0 || p.Timeout.D() < time.Second || p.CompleteTimeout.D() <= 0 {
			return fmt.Errorf("workflow: delay_ms >= 0, timeout >= 1s, complete_timeout > 0")
		}
		return nil
	})

// runWorkflow runs a diamond workflow (a; b and c after a; d after both, each on its own agent)
// from a node that crashes while b and c work, and starts again over its store: the workflow
// must complete (completed, resumed) with each step's agent running it once
// (steps_once_ratio).
func runWorkflow(ctx context.Context, r *run, p any, res *StepResult) error {
	wp := p.(*workflowParams)
	c := r.c
	picked := c.pick(5)
	if len(picked) < 5 {
		return fmt.Errorf("workflow: needs 5 running nodes besides the bootstrap ones, has %d", len(picked))
	}
	co, workers := picked[0], picked[1:]
	id := fmt.Sprintf("sim-wf-%d-%d", res.Index, c.rng.IntN(1<<30))
	spec, marks := c.diamond(id, wp, workers)
	for _, m := range marks {
		c.rec.expectDelivery(m)
	}
	t0 := time.Now()
	e, err := workflow.New(c.node(co))
	if err != nil {
		return err
	}
	if _, err := e.Start(spec); err != nil {
		e.Close()
		return err
	}
	if wp.KillCoordinator {
		for ctx.Err() == nil {
			st, _ := e.Status(id)
			if a := st.Steps[0]; a.Status == workflow.Completed || st.Status != workflow.Running {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(wp.DelayMS / 2 * float64(time.Millisecond))) // b and c are with their agents
		e.Close()                                                             // nothing more is recorded, as in a crash
		if err := c.stopNode(co, true); err != nil {
			return err
		}
		if err := c.startNode(ctx, co); err != nil {
			return err
		}
		if e, err = workflow.New(c.node(co)); err != nil {
			return err
		}
	}
	defer e.Close()
	wctx, cancel := context.WithTimeout(ctx, wp.CompleteTimeout.D())
	defer cancel()
	st, err := e.Wait(wctx, id)
	if err != nil {
		res.Errors[codeOf(err)]++
	}
	once := 0
	for _, m := range marks {
		if c.rec.deliveries(m) == 1 {
			once++
		}
	}
	res.Metrics["completed"] = boolMetric(st.Status == workflow.Completed)
	res.Metrics["resumed"] = float64(st.Resumed)
	res.Metrics["steps_once_ratio"] = ratio(once, len(marks))
	res.Metrics["workflow_ms"] = float64(time.Since(t0).Milliseconds())
	return ctx.Err()
}

// diamond is the workflow id runWorkflow runs, its steps a; b and c after a; d after both, on
// the agents of workers in that order, and the mark of each step's work by step id.
func (c *cluster) diamond(id string, wp *workflowParams, workers []int) (workflow.Spec, map[string]string) {
	spec := workflow.Spec{ID: id, Name: "sim diamond"}
	marks := map[string]string{}
	for i, s := range []struct {
		id   string
		deps []string
	}{{"a", nil}, {"b", []string{"a"}}, {"c", []string{"a"}}, {"d", []string{"b", "c"}}} {
		marks[s.id] = id + "/" + s.id
		payload, _ := json.Marshal(workPayload{DelayMS: wp.DelayMS, Mark: marks[s.id]})
		spec.Steps = append(spec.Steps, workflow.Step{ID: s.id, Agent: c.slots[workers[i]].agentID, Payload: payload,
			DependsOn: s.deps, Timeout: workflow.Duration(wp.Timeout.D()), Attempts: 10})
	}
	return spec, marks
}
