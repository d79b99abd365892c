package coord

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// Capability names one capability: its kind (tool, model or domain) and name.
type Capability struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// String returns KIND:NAME.
func (c Capability) String() string { return c.Kind + ":" + c.Name }

func (c Capability) validate() error {
	switch c.Kind {
	case "tool", "model", "domain":
	default:
		return protocol.Errorf(protocol.CodePayloadInvalid, "capability kind %q: use tool, model or domain", c.Kind)
	}
	if c.Name == "" {
		return protocol.Errorf(protocol.CodePayloadInvalid, "capability %s: give its name", c.Kind)
	}
	return nil
}

// CandidateSource returns the agents that provide a capability. The default asks the node's
// DHT (node.FindByCapability).
type CandidateSource func(ctx context.Context, c Capability) ([]string, error)

// Targets are the agents a pattern addresses: a list, or every agent with a capability.
type Targets struct {
	Agents     []string    `json:"agents,omitempty"`
	Capability *Capability `json:"capability,omitempty"`
}

// Candidate is one agent ranked for a capability: its liveness and load from heartbeats.
type Candidate struct {
	AgentID string
	// State is its liveness ("" when no heartbeat was heard: gossip off, or not yet).
	State node.State
	// Load is its announced load 0..1 (0 when unknown).
	Load float64
}

// tier orders liveness: alive first, then agents not heard of, then busy ones; -1 skips.
func tier(s node.State) int {
	switch s {
	case node.StateAlive:
		return 0
	case "":
		return 1
	case node.StateBusy:
		return 2
	}
	return -1 // suspect, stuck, draining, offline
}

// minWeight is the share of a fully loaded agent in any-of's draw: it is still chosen, rarely.
const minWeight = 0.02

func (cd Candidate) weight() float64 { return max(1-cd.Load, minWeight) }

// resolve returns the agents of t, deduplicated, at most MaxFanout: the list as given, or a
// capability's providers from the candidate source.
func (c *Coordinator) resolve(ctx context.Context, t Targets) ([]string, error) {
	if (len(t.Agents) > 0) == (t.Capability != nil) {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "give either agents or a capability, not both or neither")
	}
	ids := t.Agents
	if t.Capability != nil {
		if err := t.Capability.validate(); err != nil {
			return nil, err
		}
		var err error
		if ids, err = c.providers(ctx, *t.Capability); err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, protocol.Errorf(protocol.CodeAgentNotFound, "no agent provides %s (discovery found none)", t.Capability)
		}
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if err := protocol.ValidateAgentID(id); err != nil {
			return nil, protocol.Errorf(protocol.CodePayloadInvalid, "agent %q: %w", id, err)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) > c.cfg.MaxFanout {
		if t.Capability != nil {
			return out[:c.cfg.MaxFanout], nil
		}
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%d agents exceed the fan-out bound %d: split the call", len(out), c.cfg.MaxFanout)
	}
	return out, nil
}

func (c *Coordinator) providers(ctx context.Context, cp Capability) ([]string, error) {
	if c.cfg.Candidates != nil {
		return c.cfg.Candidates(ctx, cp)
	}
	recs, err := c.n.FindByCapability(ctx, cp.Kind, cp.Name)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		if r.AgentID != c.n.AgentID() {
			ids = append(ids, r.AgentID)
		}
	}
	return ids, nil
}

// Rank returns the candidates of ids in the order fallback tries them: liveness first (alive,
// not heard of, busy; suspect, stuck, draining and offline agents and open circuits are left
// out), then the most free capacity (1 - load). skipped are the ones left out.
func (c *Coordinator) Rank(ids []string) (ranked []Candidate, skipped []string) {
	for _, id := range ids {
		cd := Candidate{AgentID: id}
		if st, ok := c.n.Agent(id); ok {
			cd.State, cd.Load = st.State, min(max(st.Load, 0), 1)
		}
		if tier(cd.State) < 0 || c.br.peekOpen(id) {
			skipped = append(skipped, id)
			continue
		}
		ranked = append(ranked, cd)
	}
	sort.SliceStable(ranked, func(i, j int) bool {
		if ti, tj := tier(ranked[i].State), tier(ranked[j].State); ti != tj {
			return ti < tj
		}
		return ranked[i].Load < ranked[j].Load
	})
	return ranked, skipped
}

// spread reorders ranked candidates for any-of: within each liveness tier, a weighted random
// order without replacement, each candidate's weight its free capacity, so that load spreads
// in proportion to it.
func (c *Coordinator) spread(ranked []Candidate) []Candidate {
	out := make([]Candidate, 0, len(ranked))
	for i := 0; i < len(ranked); {
		j := i
		for j < len(ranked) && tier(ranked[j].State) == tier(ranked[i].State) {
			j++
		}
		group := slices.Clone(ranked[i:j])
		for len(group) > 0 {
			total := 0.0
			for _, cd := range group {
				total += cd.weight()
			}
			x, k := c.rnd.Float64()*total, 0
			for k < len(group)-1 && x >= group[k].weight() {
				x -= group[k].weight()
				k++
			}
			out = append(out, group[k])
			group = slices.Delete(group, k, k+1)
		}
		i = j
	}
	return out
}

// Tried is one candidate a failover pattern asked, and how it ended.
type Tried struct {
	AgentID  string        `json:"agent_id"`
	Attempts int           `json:"attempts"`
	Code     protocol.Code `json:"code,omitempty"`
	Message  string        `json:"message,omitempty"`
}

// Result is the outcome of any-of or fallback: the answer that ended it and every candidate
// asked before it, in order.
type Result struct {
	Answer
	Tried []Tried `json:"tried"`
	// Skipped are the candidates left out by liveness or an open circuit.
	Skipped []string `json:"skipped,omitempty"`
}

// failsOver reports whether the next candidate is worth asking after err: every failure
// except a payload the next agent would refuse too, and the caller's own end.
func failsOver(ctx context.Context, err error) bool {
	return ctx.Err() == nil && protocol.CodeOf(err) != protocol.CodePayloadInvalid
}

// tryInOrder asks the candidates one after the other until one answers.
func (c *Coordinator) tryInOrder(ctx context.Context, order []Candidate, skipped []string, ask Ask, opts CallOptions, what string) (Result, error) {
	res := Result{Skipped: skipped}
	if err := ask.correlate(); err != nil {
		res.Err = err
		return res, err
	}
	if len(order) == 0 {
		err := protocol.Errorf(protocol.CodeAgentNotFound, "%s: no candidate to ask (%d left out as suspect, stuck, draining, offline or with an open circuit)", what, len(skipped))
		res.Err = err
		return res, err
	}
	for _, cd := range order {
		a := c.Call(ctx, cd.AgentID, ask, opts)
		if a.Err == nil {
			res.Answer = a
			return res, nil
		}
		res.Tried = append(res.Tried, Tried{AgentID: a.AgentID, Attempts: a.Attempts, Code: a.Code(), Message: a.Err.Error()})
		res.Answer = a
		if !failsOver(ctx, a.Err) {
			break
		}
	}
	last := res.Answer.Err
	var pe *protocol.Error
	code := protocol.CodeOf(last)
	if ctx.Err() != nil {
		code = protocol.CodeTimeout
	}
	err := &protocol.Error{Code: code, Message: fmt.Sprintf("%s: %d candidate(s) asked, none answered; last: %v", what, len(res.Tried), last), Err: last, Detail: map[string]any{"tried": res.Tried}}
	if asPE(last, &pe) {
		err.RetryAfter = pe.RetryAfter
	}
	res.Err = err
	return res, err
}

// AnyOf asks "an agent with capability cp" (ACP v2 "Fallback Agent" over discovery, spread
// like a load balancer): the providers from discovery, ranked by liveness (Rank), are tried
// in a weighted random order within each liveness tier (weights: free capacity, 1 - load),
// failing over to the next on any refusal, timeout or open circuit, until one answers.
func (c *Coordinator) AnyOf(ctx context.Context, cp Capability, ask Ask, opts CallOptions) (Result, error) {
	if err := ask.validate(); err != nil {
		return Result{Answer: Answer{Err: err}}, err
	}
	ids, err := c.resolve(ctx, Targets{Capability: &cp})
	if err != nil {
		return Result{Answer: Answer{Err: err}}, err
	}
	ranked, skipped := c.Rank(ids)
	return c.tryInOrder(ctx, c.spread(ranked), skipped, ask, opts, "any-of "+cp.String())
}

// Fallback asks the candidates of t in order until one answers (ACP v2 "Fallback Agent"): an
// explicit list in its own order (agents known to be suspect, stuck, draining or offline, or
// with an open circuit, are left to the end rather than left out), or a capability's
// providers in Rank's order.
func (c *Coordinator) Fallback(ctx context.Context, t Targets, ask Ask, opts CallOptions) (Result, error) {
	if err := ask.validate(); err != nil {
		return Result{Answer: Answer{Err: err}}, err
	}
	ids, err := c.resolve(ctx, t)
	if err != nil {
		return Result{Answer: Answer{Err: err}}, err
	}
	ranked, skipped := c.Rank(ids)
	if t.Capability == nil {
		ranked = ranked[:0]
		for _, id := range ids {
			ranked = append(ranked, Candidate{AgentID: id})
		}
		var last []Candidate
		for _, cd := range ranked {
			if slices.Contains(skipped, cd.AgentID) {
				last = append(last, cd)
			}
		}
		ranked = append(slices.DeleteFunc(ranked, func(cd Candidate) bool { return slices.Contains(skipped, cd.AgentID) }), last...)
		skipped = nil
	}
	return c.tryInOrder(ctx, ranked, skipped, ask, opts, "fallback")
}
