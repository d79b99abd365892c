package sim

import (
	"context"
	"fmt"
	"strings"
)

// action is one step kind: parse decodes and checks its parameters (with defaults filled);
// run performs it and writes what it measured into res.
type action struct {
	parse    func(st *Step, sc *Scenario) (any, error)
	run      func(ctx context.Context, r *run, p any, res *StepResult) error
	headline []string // metrics shown on the progress line
}

var actions map[string]action

func init() {
	actions = map[string]action{
		"join":      {parseJoin, runJoin, []string{"nodes_up", "join_ms", "joined_by_invitation"}},
		"converge":  {parseConverge, runConverge, []string{"converged", "converge_ms", "dht_ready_ms", "records_ready_ms", "gossip_ready_ms", "liveness_ready_ms"}},
		"discover":  {parseDiscover, runDiscover, []string{"lookup_success", "lookup_p50_ms", "lookup_p99_ms"}},
		"load":      {parseLoad, runLoad, []string{"requests", "request_success", "request_p50_ms", "request_p99_ms"}},
		"broadcast": {parseBroadcast, runBroadcast, []string{"delivery_ratio", "broadcast_p50_ms", "broadcast_p99_ms", "broadcast_max_ms"}},
		"group":     {parseGroup, runGroup, []string{"delivery_ratio", "group_p50_ms", "group_p99_ms"}},
		"ask":       {parseAsk, runAsk, []string{"answer_ratio", "ask_p50_ms", "ask_p99_ms", "missing"}},
		"scatter":   {parseScatter, runScatter, []string{"targets", "killed", "live_answered_ratio", "scatter_ms"}},
		"pipeline":  {parsePipeline, runPipeline, []string{"completed", "middle_by_fallback", "pipeline_ms"}},
		"breaker":   {parseBreaker, runBreaker, []string{"opened", "fast_fail_ms", "closed", "recover_ms"}},
		"workflow":  {parseWorkflow, runWorkflow, []string{"completed", "resumed", "steps_once_ratio", "workflow_ms"}},
		"kill":      {parseKill, runKill, []string{"killed", "detected_ratio", "detection_p50_ms", "detection_max_ms"}},
		"restart":   {parseRestart, runRestart, []string{"restarted", "rejoin_p50_ms", "rejoin_max_ms"}},
		"partition": {parsePartition, runPartition, []string{"cut_links", "detected_ratio", "detection_p50_ms"}},
		"heal":      {parseHeal, runHeal, []string{"converged", "heal_ms"}},
		"churn":     {parseChurn, runChurn, []string{"kills", "restarts", "request_success", "request_p99_ms", "broadcast_delivery_ratio", "broadcast_p99_ms"}},
		"offline":   {parseOffline, runOffline, []string{"offline_sent", "offline_delivered", "lost"}},
		"intruder":  {parseIntruder, runIntruder, []string{"intruder_sent", "refused_ratio", "named_ratio", "acted_on", "control_acted_ratio"}},
		"stall":     {parseStall, runStall, []string{"attacker_broadcasts", "honest_delivery_ratio", "revocation_applied_ms", "certificate_requests_to_attackers"}},
		"sleep":     {parseSleep, runSleep, nil},
	}
}

// params decodes a step's parameters over defaults d and checks them with check.
func params[T any](d T, check func(p *T, sc *Scenario) error) func(st *Step, sc *Scenario) (any, error) {
	return func(st *Step, sc *Scenario) (any, error) {
		p := d
		if err := st.decodeParams(&p); err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(&p, sc); err != nil {
				return nil, err
			}
		}
		return &p, nil
	}
}

// headline formats the step's main metrics for its progress line.
func headline(res *StepResult) string {
	var parts []string
	for _, k := range actions[res.Action].headline {
		if v, ok := res.Metrics[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%g", k, v))
		}
	}
	if res.Metrics["false_suspicions"] > 0 {
		parts = append(parts, fmt.Sprintf("false_suspicions=%g", res.Metrics["false_suspicions"]))
	}
	if res.Metrics["overloaded"] == 1 {
		parts = append(parts, fmt.Sprintf("OVERLOADED (timers %.0f ms late at p99, CPU %.0f%% of the cores)",
			res.Metrics["lag_p99_ms"], 100*res.Metrics["cpu_saturation"]))
	}
	return strings.Join(parts, " ")
}

// checkNodes checks explicit node indices against the scenario size.
func checkNodes(nodes []int, sc *Scenario) error {
	for _, n := range nodes {
		if n < 0 || n >= sc.Nodes {
			return fmt.Errorf("nodes: %d is outside 0..%d", n, sc.Nodes-1)
		}
	}
	return nil
}

// pick draws k distinct running nodes from the seeded source, leaving out the bootstrap
// nodes and those in exclude.
func (c *cluster) pick(k int, exclude ...int) []int {
	skip := map[int]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	var pool []int
	for _, i := range c.up() {
		if i >= c.sc.Node.BootstrapPeers && !skip[i] {
			pool = append(pool, i)
		}
	}
	c.rng.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
	return pool[:min(k, len(pool))]
}
