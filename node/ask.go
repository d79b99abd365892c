package node

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// A broadcast query (serf's queries): the asker publishes a request to a capability group, or
// to AllGroup for every agent, over gossip; each member that takes it answers directly to the
// asker (correlation_id = the query's message_id); the asker collects the answers until its
// deadline, a count, or every expected agent answered. docs/coordination.md, "Broadcast query".

// AllGroup is the group every node with gossip joins: a query to it asks every agent.
const AllGroup = "iacp.all"

// Bounds of broadcast queries.
const (
	// DefaultAskDeadline is how long Ask collects answers when AskOptions.Deadline is 0.
	DefaultAskDeadline = 2 * time.Second
	// MaxAskDeadline is the longest deadline of one query.
	MaxAskDeadline = 5 * time.Minute
	// MaxAskAnswers bounds the answers one query collects (answers and errors together); it is
	// also the count when AskOptions.Count is 0.
	MaxAskAnswers = 1024
	// MaxAsks bounds the queries open at once on one node; one more is refused with
	// RATE_LIMITED.
	MaxAsks = 64
	// maxClosedAsks bounds the closed queries whose late answers are recognised and dropped.
	maxClosedAsks = 4096
	// askLateGrace keeps a closed query's id after its TTL, for clocks that drift.
	askLateGrace = 30 * time.Second
)

// AskOptions describes one broadcast query.
type AskOptions struct {
	// Group is the capability group asked; empty (or AllGroup) asks every agent.
	Group string
	// Intent of the request: query (the default; every node answers a capability query with
	// its manifest unless its agent handles query itself), handoff, negotiate or an x- intent.
	Intent protocol.Intent
	// Payload of the request: nil, a struct, a map or json.RawMessage encoding to an object.
	Payload any
	// Deadline is how long answers are collected (default DefaultAskDeadline, at most
	// MaxAskDeadline); the request's TTL is the deadline rounded up to whole seconds, so a
	// member does not start on a query whose asker stopped listening.
	Deadline time.Duration
	// Count: return as soon as this many agents answered (default and at most MaxAskAnswers).
	Count int
	// Expect lists agents expected to answer: Ask returns as soon as all of them answered,
	// and reports the others in Missing. Without it, a query to every agent reports in
	// Missing the agents of the liveness table that take work (alive or busy) and did not
	// answer, but does not end early when they all did (the table may not know every agent
	// yet); a group query reports nobody.
	Expect []string
}

// AskAnswer is one agent's answer to a query.
type AskAnswer struct {
	AgentID string            `json:"agent_id"`
	Peer    string            `json:"peer_id"`
	Status  string            `json:"status"` // the response's payload status
	Payload json.RawMessage   `json:"payload"`
	Latency time.Duration     `json:"latency_ns"`
	Message *protocol.Message `json:"-"`
}

// AskError is one agent's error answer to a query.
type AskError struct {
	AgentID string        `json:"agent_id"`
	Peer    string        `json:"peer_id"`
	Code    protocol.Code `json:"code"`
	Message string        `json:"message"`
	Latency time.Duration `json:"latency_ns"`
}

// AskResult is what a query collected.
type AskResult struct {
	QueryID string      `json:"query_id"`
	Group   string      `json:"group"`
	Answers []AskAnswer `json:"answers"`
	Errors  []AskError  `json:"errors"`
	// Missing lists the expected agents that did not answer before the query closed.
	Missing []string `json:"missing"`
	// Ended says why collection stopped: "count", "expected", "deadline" or "canceled".
	Ended string `json:"ended"`
	// Refused counts answers dropped: a second answer of the same agent, or over the count.
	Refused int `json:"refused"`
}

// ask is one open query, owned by askBook.mu.
type ask struct {
	started  time.Time
	count    int
	expect   map[string]bool // expected agents that have not answered yet
	answered map[string]bool
	res      AskResult
	waited   bool          // the caller named the agents expected: the query ends once all answered
	done     chan struct{} // closed once the count or every expected agent answered
	reason   string        // why done closed: "count" or "expected"
}

// askBook holds the open queries and the ids of recently closed ones. Its own lock.
type askBook struct {
	mu     sync.Mutex
	open   map[string]*ask
	closed map[string]time.Time // query id -> until when a late answer is dropped
	order  []string             // closed ids, oldest first
}

// ask publishes a query and collects its answers (Node.Ask).
func (m *meshPart) ask(ctx context.Context, o AskOptions) (*AskResult, error) {
	g := m.gossip()
	if !g.on() {
		return nil, errGossipOff("a broadcast query") // before the options are checked
	}
	group, err := o.normalise()
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternalError, "new query id: %v", err)
	}
	qid := id.String()
	a := &ask{started: m.now(), count: o.Count, answered: map[string]bool{}, done: make(chan struct{}),
		res: AskResult{QueryID: qid, Group: group, Answers: []AskAnswer{}, Errors: []AskError{}}}
	a.expect = m.expected(g, o, group)
	a.waited = len(o.Expect) > 0
	if err := m.asks.openAsk(qid, a); err != nil {
		return nil, err
	}
	expires := a.started.Add(time.Duration(int64((o.Deadline+time.Second-1)/time.Second)) * time.Second)
	defer func() { m.asks.closeAsk(qid, expires.Add(askLateGrace)) }()
	ctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	setID := func(msg *protocol.Message) { msg.Envelope.MessageID = qid }
	if _, err := g.SendToGroup(ctx, group, o.Intent, o.Payload, protocol.WithTTL(o.Deadline), setID); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, &protocol.Error{Code: protocol.CodeAgentNotFound, Err: err,
			Message: "the query to group " + group + " reached nobody: no member is connected yet (check the group's name, or ask again once the mesh formed)"}
	}
	ended := "deadline"
	select {
	case <-a.done:
	case <-ctx.Done():
		if ctx.Err() == context.Canceled {
			ended = "canceled"
		}
	}
	return m.asks.result(qid, ended), nil
}

// normalise fills in defaults and checks the options; it returns the group to publish to.
func (o *AskOptions) normalise() (string, error) {
	group := o.Group
	if group == "" {
		group = AllGroup
	}
	if err := ValidateGroup(group); err != nil {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "query group: %v", err)
	}
	if o.Intent == "" {
		o.Intent = protocol.IntentQuery
	}
	if o.Intent == protocol.IntentNotify || o.Intent == protocol.IntentHealth {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "a query asks for answers; intent %s is an event: use query, handoff, negotiate or an x- intent, or broadcast the event", o.Intent)
	}
	switch {
	case o.Deadline == 0:
		o.Deadline = DefaultAskDeadline
	case o.Deadline < 0 || o.Deadline > MaxAskDeadline:
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "query deadline %s: use more than 0 and at most %s", o.Deadline, MaxAskDeadline)
	}
	switch {
	case o.Count == 0:
		o.Count = MaxAskAnswers
	case o.Count < 0 || o.Count > MaxAskAnswers:
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "query count %d: use 1 to %d (0: %d)", o.Count, MaxAskAnswers, MaxAskAnswers)
	}
	if len(o.Expect) > MaxAskAnswers {
		return "", protocol.Errorf(protocol.CodePayloadInvalid, "a query expects at most %d agents, not %d", MaxAskAnswers, len(o.Expect))
	}
	return group, nil
}

// expected returns the agents a query waits for: the caller's, or for a query to every
// agent the agents of the liveness table that take work. This node's own agent is never
// expected: it does not answer its own queries.
func (m *meshPart) expected(g gossiper, o AskOptions, group string) map[string]bool {
	out := map[string]bool{}
	if len(o.Expect) > 0 {
		for _, id := range o.Expect {
			out[id] = true
		}
	} else if group == AllGroup {
		for _, st := range g.Agents() {
			if (st.State == pubsub.StateAlive || st.State == pubsub.StateBusy) && len(out) < MaxAskAnswers {
				out[st.AgentID] = true
			}
		}
	}
	delete(out, m.agentID)
	return out
}

func (b *askBook) openAsk(id string, a *ask) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open, b.closed = map[string]*ask{}, map[string]time.Time{}
	}
	if len(b.open) >= MaxAsks {
		return &protocol.Error{Code: protocol.CodeRateLimited, RetryAfter: time.Second,
			Message: "this node already runs " + strconv.Itoa(MaxAsks) + " broadcast queries; wait for one to end"}
	}
	b.open[id] = a
	return nil
}

// closeAsk moves a query from open to closed, where its late answers are recognised until
// `until`. The oldest closed ids go first past maxClosedAsks.
func (b *askBook) closeAsk(id string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, id)
	if len(b.order) >= maxClosedAsks {
		delete(b.closed, b.order[0])
		b.order = slices.Delete(b.order, 0, 1)
	}
	b.closed[id] = until
	b.order = append(b.order, id)
}

// result copies a query's result, with its missing agents, sorted.
func (b *askBook) result(id, ended string) *AskResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.open[id]
	res := a.res
	res.Answers = slices.Clone(res.Answers)
	res.Errors = slices.Clone(res.Errors)
	res.Missing = []string{}
	for agent := range a.expect {
		res.Missing = append(res.Missing, agent)
	}
	slices.Sort(res.Missing)
	res.Ended = ended
	if a.reason != "" {
		res.Ended = a.reason
	}
	return &res
}

// offer takes m, a verified response or error from remote, when it answers a query: an open
// query collects it, a closed one drops it. It reports whether m answered a query at all;
// false leaves m to the node's usual path.
func (b *askBook) offer(m *protocol.Message, remote peer.ID, now time.Time) bool {
	qid := m.Envelope.CorrelationID
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.open[qid]
	if !ok {
		until, late := b.closed[qid]
		return late && now.Before(until)
	}
	agent := m.Envelope.Sender.AgentID
	if a.reason != "" || a.answered[agent] {
		a.res.Refused++
		return true
	}
	a.answered[agent] = true
	delete(a.expect, agent)
	lat := now.Sub(a.started)
	if m.Message.Type == protocol.TypeError {
		e := AskError{AgentID: agent, Peer: remote.String(), Code: protocol.CodeOf(replyError(m)), Latency: lat}
		if pe, err := protocol.ErrorOf(m); err == nil {
			e.Message = pe.Message
		}
		a.res.Errors = append(a.res.Errors, e)
	} else {
		var st struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(m.Message.Payload, &st)
		a.res.Answers = append(a.res.Answers, AskAnswer{AgentID: agent, Peer: remote.String(), Status: st.Status,
			Payload: m.Message.Payload, Latency: lat, Message: m})
	}
	switch {
	case len(a.res.Answers)+len(a.res.Errors) >= a.count:
		a.reason = "count"
	case a.waited && len(a.expect) == 0:
		a.reason = "expected"
	default:
		return true
	}
	close(a.done)
	return true
}
