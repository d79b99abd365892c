package coord

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// Coordinator runs the coordination patterns for one node and owns the circuit breakers of
// the agents it calls. It is safe for concurrent use; it starts no background goroutine, so
// it needs no Close (the node's Close ends the calls in flight).
type Coordinator struct {
	n   *node.Node
	cfg Config
	br  *breakers
	rnd Rand
}

// New builds the coordinator of n.
func New(n *node.Node, opts ...Option) (*Coordinator, error) {
	if n == nil {
		return nil, errors.New("coord: no node")
	}
	cfg := DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	var r Rand = globalRand{}
	if cfg.Rand != nil {
		r = &lockedRand{r: cfg.Rand}
	}
	return &Coordinator{n: n, cfg: cfg, br: newBreakers(&cfg, now), rnd: r}, nil
}

type globalRand struct{}

// lockedRand serialises a caller's Rand, which need not be safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  Rand
}

func (l *lockedRand) Float64() float64 { l.mu.Lock(); defer l.mu.Unlock(); return l.r.Float64() }
func (l *lockedRand) Int64N(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64N(n)
}

func (globalRand) Float64() float64     { return rand.Float64() }
func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// Breakers returns the circuits kept, sorted by agent id.
func (c *Coordinator) Breakers() []Breaker { return c.br.list() }

// Breaker returns one agent's circuit; ok is false when none is kept (a closed circuit).
func (c *Coordinator) Breaker(agentID string) (Breaker, bool) { return c.br.one(agentID) }

// BreakerStats returns the breakers' counters, for /metrics.
func (c *Coordinator) BreakerStats() BreakerStats { return c.br.stats() }

// Transitions returns the breaker transitions after seq (of the last DefaultTransitionLog),
// the sequence number of the latest, and a channel closed at the next one.
func (c *Coordinator) Transitions(after uint64) ([]BreakerTransition, uint64, <-chan struct{}) {
	return c.br.transitions(after)
}

// Ask is what a pattern asks each agent: one request's intent, payload and channel.
type Ask struct {
	Intent protocol.Intent `json:"intent"`
	// Payload is a JSON object (nil: {}).
	Payload json.RawMessage `json:"payload,omitempty"`
	// Channel is recipient.channel (empty: the intent's default).
	Channel string `json:"channel,omitempty"`
	// CorrelationID is every request's correlation_id: all attempts, candidates and targets of
	// one pattern carry the same (empty: a new UUIDv7 per pattern; a pipeline sets its own).
	CorrelationID string `json:"correlation_id,omitempty"`
}

func (a Ask) validate() error {
	if !protocol.IntentAllowed(protocol.TypeRequest, a.Intent) {
		return protocol.Errorf(protocol.CodePayloadInvalid, "intent %q is not one a request may carry (use handoff, query, negotiate or notify)", a.Intent)
	}
	if len(a.Payload) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(a.Payload, &obj); err != nil || obj == nil {
			return protocol.Errorf(protocol.CodePayloadInvalid, "the payload must be a JSON object")
		}
	}
	return nil
}

// correlate gives the ask a correlation id of its own when it has none, so that every attempt
// and every candidate of one pattern carries the same one.
func (a *Ask) correlate() error {
	if a.CorrelationID != "" {
		return nil
	}
	id, err := uuid.NewV7()
	if err != nil {
		return protocol.Errorf(protocol.CodeInternalError, "new correlation id: %w", err)
	}
	a.CorrelationID = id.String()
	return nil
}

// CallOptions are the per-call settings of every pattern.
type CallOptions struct {
	// Timeout bounds each attempt to one agent (0: the coordinator's AttemptTimeout); it is
	// also the request's TTL, so a queued request expires with it.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retry is the policy for each agent asked (zero: one attempt).
	Retry RetryPolicy `json:"retry,omitzero"`
}

func (o CallOptions) timeout(c *Coordinator) time.Duration {
	if o.Timeout > 0 {
		return max(o.Timeout, time.Second)
	}
	return c.cfg.AttemptTimeout
}

// Answer is one agent's answer to a pattern's request, or its failure.
type Answer struct {
	AgentID string `json:"agent_id"`
	// Response is the agent's response (nil when Err is set).
	Response *protocol.Message `json:"response,omitempty"`
	// Attempts is how many requests this agent was sent (0: its circuit was open).
	Attempts int `json:"attempts"`
	// Err is the failure, an *protocol.Error (nil with a Response).
	Err error `json:"-"`
}

// Code returns the code of the answer's error ("" for a response).
func (a Answer) Code() protocol.Code { return protocol.CodeOf(a.Err) }

// Call asks one agent, through its circuit breaker and under the retry policy: each attempt
// is a new request (a new message_id) with TTL opts.Timeout. It returns the agent's response,
// or the last error (an *protocol.Error; an error reply keeps its code). A call to an open
// circuit fails at once with AGENT_NOT_FOUND wrapping ErrCircuitOpen.
func (c *Coordinator) Call(ctx context.Context, agentID string, ask Ask, opts CallOptions) Answer {
	a := Answer{AgentID: agentID}
	if err := ask.validate(); err != nil {
		a.Err = err
		return a
	}
	if err := opts.Retry.Validate(); err != nil {
		a.Err = err
		return a
	}
	if err := protocol.ValidateAgentID(agentID); err != nil {
		a.Err = protocol.Errorf(protocol.CodePayloadInvalid, "agent %q: %w", agentID, err)
		return a
	}
	if err := ask.correlate(); err != nil {
		a.Err = err
		return a
	}
	for {
		resp, err := c.attempt(ctx, agentID, ask, opts)
		if errors.Is(err, ErrCircuitOpen) {
			a.Err = err
			return a
		}
		a.Attempts++
		if err == nil {
			a.Response, a.Err = resp, nil
			return a
		}
		a.Err = err
		if a.Attempts >= opts.Retry.attempts() || !opts.Retry.retries(err) || ctx.Err() != nil {
			return a
		}
		t := time.NewTimer(opts.Retry.delay(a.Attempts, err, c.rnd))
		select {
		case <-ctx.Done():
			t.Stop()
			return a
		case <-t.C:
		}
	}
}

// attempt sends one request through the breaker.
func (c *Coordinator) attempt(ctx context.Context, agentID string, ask Ask, opts CallOptions) (*protocol.Message, error) {
	probe, err := c.br.admit(agentID)
	if err != nil {
		return nil, err
	}
	timeout := opts.timeout(c)
	mopts := []protocol.Option{protocol.WithTTL(timeout)}
	if ask.Channel != "" {
		mopts = append(mopts, protocol.WithChannel(ask.Channel))
	}
	if ask.CorrelationID != "" {
		mopts = append(mopts, protocol.WithCorrelation(ask.CorrelationID))
	}
	var payload any
	if len(ask.Payload) > 0 {
		payload = ask.Payload
	}
	m, err := c.n.Builder().Request(agentID, ask.Intent, payload, mopts...)
	if err != nil {
		c.br.record(agentID, probe, neutral, "")
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.n.RequestOnce(actx, m) // coord retries and fails over itself: no outbox behind its back
	c.br.record(agentID, probe, classify(err, ctx.Err() != nil), protocol.CodeOf(err))
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func asPE(err error, pe **protocol.Error) bool { return errors.As(err, pe) }
