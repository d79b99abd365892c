package coord

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
)

// BreakerState is the state of one agent's circuit.
type BreakerState string

// The circuit states.
const (
	// Closed: calls go through; consecutive failures are counted.
	Closed BreakerState = "closed"
	// Open: calls fail at once with AGENT_NOT_FOUND (cause ErrCircuitOpen) until OpenFor passes.
	Open BreakerState = "open"
	// HalfOpen: up to Probes calls go through; a success closes the circuit, a failure opens it.
	HalfOpen BreakerState = "half-open"
)

// ErrCircuitOpen is the cause of the error a call to an open circuit fails with at once:
// errors.Is(err, ErrCircuitOpen). The error itself is a *protocol.Error with code
// AGENT_NOT_FOUND ("not reachable", retryable), its RetryAfter the time left until a probe
// may pass.
var ErrCircuitOpen = errors.New("circuit open")

// Breaker is a snapshot of one agent's circuit.
type Breaker struct {
	AgentID  string       `json:"agent_id"`
	State    BreakerState `json:"state"`
	Failures int          `json:"consecutive_failures"`
	// OpenedAt is when the circuit last opened (zero if never).
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// RetryAt is when an open circuit lets a probe through (zero unless open).
	RetryAt  time.Time `json:"retry_at,omitzero"`
	LastUsed time.Time `json:"last_used"`
}

// BreakerTransition is one circuit's move from one state to another.
type BreakerTransition struct {
	Seq     uint64       `json:"seq"`
	At      time.Time    `json:"at"`
	AgentID string       `json:"agent_id"`
	From    BreakerState `json:"from"`
	To      BreakerState `json:"to"`
	// Cause is the error code of the failure that opened the circuit ("" otherwise).
	Cause protocol.Code `json:"cause,omitempty"`
}

type breaker struct {
	state    BreakerState
	failures int
	probes   int // probes in flight while half-open
	openedAt time.Time
	lastUsed time.Time
}

// breakers is the coordinator's set of circuits, bounded by cfg.MaxBreakers, and the log of
// their transitions. Everything is guarded by mu.
type breakers struct {
	cfg     *Config
	now     func() time.Time
	mu      sync.Mutex
	m       map[string]*breaker
	log     []BreakerTransition // ring of the last DefaultTransitionLog transitions
	seq     uint64
	changed chan struct{} // closed and replaced at each transition
	opened  uint64        // how many times a circuit opened, for /metrics
	refused uint64        // calls failed at once by an open circuit, for /metrics
}

func newBreakers(cfg *Config, now func() time.Time) *breakers {
	return &breakers{cfg: cfg, now: now, m: map[string]*breaker{}, changed: make(chan struct{})}
}

// admit decides whether a call to agent may go: nil (probe says it is a half-open circuit's
// probe), or the open-circuit error. A call admitted reports its outcome with record.
func (b *breakers) admit(agent string) (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	br := b.get(agent, now)
	br.lastUsed = now
	switch br.state {
	case Open:
		retryAt := br.openedAt.Add(b.cfg.OpenFor)
		if now.Before(retryAt) {
			b.refused++
			return false, b.openErr(agent, retryAt.Sub(now))
		}
		b.move(agent, br, HalfOpen, "", now)
		fallthrough
	case HalfOpen:
		if br.probes >= b.cfg.Probes {
			b.refused++
			return false, b.openErr(agent, 0)
		}
		br.probes++
		return true, nil
	}
	return false, nil
}

func (b *breakers) openErr(agent string, wait time.Duration) error {
	e := protocol.Errorf(protocol.CodeAgentNotFound, "the circuit to %s is open after repeated failures: calls fail at once until a probe succeeds (retry in %s, or call another agent)", agent, wait.Round(time.Millisecond))
	e.Err = ErrCircuitOpen
	e.RetryAfter = wait
	e.Detail = map[string]any{"circuit": string(Open), "agent_id": agent}
	return e
}

// outcome is what a call's result means to its target's circuit.
type outcome int

const (
	neutral outcome = iota // the caller gave up: says nothing of the agent
	success                // the agent answered (a response, or a final refusal)
	failure                // a retryable failure: timeout, unreachable, internal error, overload
)

// classify maps a call's error to its outcome for the breaker. callerGone says the caller's
// own context ended (not the attempt's timeout).
func classify(err error, callerGone bool) outcome {
	switch {
	case err == nil:
		return success
	case callerGone:
		return neutral
	case protocol.CodeOf(err).Retryable():
		return failure
	}
	return success // a final refusal: the agent is there and answering
}

// record reports the outcome of a call admitted by admit.
func (b *breakers) record(agent string, probe bool, o outcome, cause protocol.Code) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	br := b.get(agent, now)
	br.lastUsed = now
	if probe && br.probes > 0 {
		br.probes--
	}
	switch o {
	case success:
		br.failures = 0
		if br.state != Closed {
			b.move(agent, br, Closed, "", now)
		}
	case failure:
		br.failures++
		if br.state == HalfOpen || (br.state == Closed && br.failures >= b.cfg.FailureThreshold) {
			br.openedAt = now
			b.opened++
			b.move(agent, br, Open, cause, now)
		}
	}
}

func (b *breakers) move(agent string, br *breaker, to BreakerState, cause protocol.Code, now time.Time) {
	b.seq++
	t := BreakerTransition{Seq: b.seq, At: now, AgentID: agent, From: br.state, To: to, Cause: cause}
	br.state = to
	if len(b.log) < DefaultTransitionLog {
		b.log = append(b.log, t)
	} else {
		copy(b.log, b.log[1:])
		b.log[len(b.log)-1] = t
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// get returns agent's breaker, making room for a new one: an idle one goes first, else the
// least recently used.
func (b *breakers) get(agent string, now time.Time) *breaker {
	if br, ok := b.m[agent]; ok {
		return br
	}
	if len(b.m) >= b.cfg.MaxBreakers {
		var lru string
		var oldest time.Time
		for id, br := range b.m {
			if now.Sub(br.lastUsed) >= b.cfg.BreakerIdle {
				delete(b.m, id)
				continue
			}
			if lru == "" || br.lastUsed.Before(oldest) {
				lru, oldest = id, br.lastUsed
			}
		}
		if len(b.m) >= b.cfg.MaxBreakers {
			delete(b.m, lru)
		}
	}
	br := &breaker{state: Closed, lastUsed: now}
	b.m[agent] = br
	return br
}

func (b *breakers) snapshot(agent string, br *breaker) Breaker {
	s := Breaker{AgentID: agent, State: br.state, Failures: br.failures, OpenedAt: br.openedAt, LastUsed: br.lastUsed}
	if br.state == Open {
		s.RetryAt = br.openedAt.Add(b.cfg.OpenFor)
	}
	return s
}

func (b *breakers) list() []Breaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Breaker, 0, len(b.m))
	for id, br := range b.m {
		out = append(out, b.snapshot(id, br))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out
}

func (b *breakers) one(agent string) (Breaker, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br, ok := b.m[agent]
	if !ok {
		return Breaker{}, false
	}
	return b.snapshot(agent, br), true
}

// peekOpen reports whether agent's circuit is open now (and not yet due for a probe), without
// changing it: candidates with an open circuit are ranked out.
func (b *breakers) peekOpen(agent string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	br, ok := b.m[agent]
	if !ok {
		return false
	}
	switch br.state {
	case Open:
		return b.now().Before(br.openedAt.Add(b.cfg.OpenFor))
	case HalfOpen:
		return br.probes >= b.cfg.Probes
	}
	return false
}

func (b *breakers) transitions(after uint64) ([]BreakerTransition, uint64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []BreakerTransition
	for _, t := range b.log {
		if t.Seq > after {
			out = append(out, t)
		}
	}
	return out, b.seq, b.changed
}

// BreakerStats are the counters /metrics shows.
type BreakerStats struct {
	// ByState counts the breakers kept in each state.
	ByState map[BreakerState]int
	// Opened counts how many times a circuit opened; Refused, the calls an open circuit
	// failed at once.
	Opened, Refused uint64
}

func (b *breakers) stats() BreakerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := BreakerStats{ByState: map[BreakerState]int{Closed: 0, Open: 0, HalfOpen: 0}, Opened: b.opened, Refused: b.refused}
	for _, br := range b.m {
		s.ByState[br.state]++
	}
	return s
}
