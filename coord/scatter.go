package coord

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// Completion is a scatter's rule for when it is done.
type Completion string

// The completion rules.
const (
	// All waits for every target's answer or failure (or the deadline).
	All Completion = "all"
	// FirstK is done at the first K answers; it fails early once K can no longer be reached.
	FirstK Completion = "first-k"
	// Quorum is done when K targets gave the same answer (equal response payloads, compared
	// as RFC 8785 canonical JSON); K defaults to a majority of the targets.
	Quorum Completion = "quorum"
)

// DefaultScatterDeadline bounds a scatter whose ScatterOptions.Deadline is zero.
const DefaultScatterDeadline = 30 * time.Second

// ScatterOptions are a scatter's rule and deadline.
type ScatterOptions struct {
	CallOptions
	// Completion is the rule (default All).
	Completion Completion `json:"completion,omitempty"`
	// K is FirstK's count (default 1) or Quorum's (default a majority: targets/2 + 1).
	K int `json:"k,omitempty"`
	// Deadline bounds the whole scatter (default 30s); each attempt is bounded by Timeout too.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// Failure is one target's failure, for Gather.Errors.
type Failure struct {
	AgentID  string `json:"agent_id"`
	Message  string `json:"message"`
	Attempts int    `json:"attempts"`
}

// Gather is the aggregate of a scatter.
type Gather struct {
	// Met says the completion rule was met.
	Met bool `json:"met"`
	// Answers are the responses, in the order they came.
	Answers []Answer `json:"answers"`
	// Agreed is the payload K targets agreed on (Quorum only).
	Agreed []byte `json:"agreed,omitempty"`
	// Errors are the failures, by error code.
	Errors map[protocol.Code][]Failure `json:"errors"`
	// TimedOut are the targets that had not answered when the deadline passed.
	TimedOut []string `json:"timed_out"`
	// Cancelled are the targets still asked when the rule was decided: their requests were
	// cancelled.
	Cancelled []string `json:"cancelled"`
}

// Scatter sends ask to every target at once (ACP v2 "Scatter-Gather") and gathers the
// answers until the completion rule is decided, met or out of reach, or the deadline passes;
// then it cancels the requests still out, waits for their goroutines, and returns. Each
// target is called as Call does (breaker, retry, per-attempt timeout). The error is nil when
// the rule was met; otherwise a TIMEOUT (the deadline passed) or the code most targets
// failed with, and the Gather says the rest.
func (c *Coordinator) Scatter(ctx context.Context, t Targets, ask Ask, opts ScatterOptions) (*Gather, error) {
	if err := ask.validate(); err != nil {
		return nil, err
	}
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	ids, err := c.resolve(ctx, t)
	if err != nil {
		return nil, err
	}
	rule, err := newRule(opts, len(ids))
	if err != nil {
		return nil, err
	}
	if err := ask.correlate(); err != nil {
		return nil, err
	}
	deadline := opts.Deadline
	if deadline <= 0 {
		deadline = DefaultScatterDeadline
	}
	sctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	answers := make(chan Answer, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- c.Call(sctx, id, ask, opts.CallOptions)
		}()
	}
	g := &Gather{Errors: map[protocol.Code][]Failure{}}
	pending := slices.Clone(ids)
	for len(pending) > 0 && !g.Met && !rule.outOfReach(len(pending)) {
		select {
		case a := <-answers:
			pending = slices.DeleteFunc(pending, func(id string) bool { return id == a.AgentID })
			if sctx.Err() != nil && a.Err != nil {
				pending = append(pending, a.AgentID) // cut by the deadline: not an answer
				goto cut
			}
			g.add(a)
			g.Met = rule.add(a)
		case <-sctx.Done():
			goto cut
		}
	}
	if len(pending) > 0 {
		g.Cancelled = pending
	}
	cancel()
	wg.Wait()
	return g, g.verdict(rule, len(ids), nil)
cut:
	cancel()
	wg.Wait()
	g.TimedOut = pending
	return g, g.verdict(rule, len(ids), ctx.Err())
}

func (g *Gather) add(a Answer) {
	if a.Err != nil {
		g.Errors[a.Code()] = append(g.Errors[a.Code()], Failure{AgentID: a.AgentID, Message: a.Err.Error(), Attempts: a.Attempts})
		return
	}
	g.Answers = append(g.Answers, a)
}

func (g *Gather) verdict(r *rule, n int, callerErr error) error {
	if g.Met {
		if r.quorum {
			g.Agreed = r.agreed
		}
		return nil
	}
	if len(g.TimedOut) > 0 {
		if callerErr != nil {
			return protocol.Errorf(protocol.CodeTimeout, "scatter to %d agents: the caller gave up with %d unanswered: %w", n, len(g.TimedOut), callerErr)
		}
		return protocol.Errorf(protocol.CodeTimeout, "scatter to %d agents: the deadline passed with %d unanswered (%s needs %d)", n, len(g.TimedOut), r.name, r.k)
	}
	code, most := protocol.CodeInternalError, 0
	for c, fs := range g.Errors {
		if len(fs) > most || (len(fs) == most && c < code) {
			code, most = c, len(fs)
		}
	}
	return protocol.Errorf(code, "scatter to %d agents: %s needs %d, out of reach with %d answer(s) and %d failure(s)", n, r.name, r.k, len(g.Answers), n-len(g.Answers)-len(g.Cancelled))
}

// rule tracks a completion rule over the answers.
type rule struct {
	name   Completion
	k      int
	quorum bool
	got    int            // answers (FirstK, All)
	groups map[string]int // quorum: answers by canonical payload
	best   int            // quorum: size of the largest group
	agreed []byte
}

func newRule(o ScatterOptions, n int) (*rule, error) {
	r := &rule{name: o.Completion}
	switch o.Completion {
	case "", All:
		r.name, r.k = All, n
		if o.K != 0 {
			return nil, protocol.Errorf(protocol.CodePayloadInvalid, "completion all takes no k (use first-k or quorum)")
		}
	case FirstK:
		r.k = max(o.K, 1)
	case Quorum:
		r.k, r.quorum, r.groups = o.K, true, map[string]int{}
		if r.k == 0 {
			r.k = n/2 + 1
		}
	default:
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "completion %q: use all, first-k or quorum", o.Completion)
	}
	if r.k < 1 || r.k > n {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s k=%d: want 1..%d (the number of targets)", r.name, o.K, n)
	}
	return r, nil
}

// add counts a and reports whether the rule is met.
func (r *rule) add(a Answer) bool {
	if a.Err != nil {
		return false
	}
	if !r.quorum {
		r.got++
		return r.got >= r.k
	}
	key, err := protocol.CanonicalJSON(a.Response.Message.Payload)
	if err != nil {
		key = a.Response.Message.Payload
	}
	r.groups[string(key)]++
	if n := r.groups[string(key)]; n > r.best {
		r.best = n
		if n >= r.k {
			r.agreed = key
			return true
		}
	}
	return false
}

// outOfReach reports whether the rule can no longer be met with pending answers to come.
func (r *rule) outOfReach(pending int) bool {
	if r.name == All {
		return false // all waits for every answer
	}
	have := r.got
	if r.quorum {
		have = r.best
	}
	return have+pending < r.k
}
