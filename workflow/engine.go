package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// RecordKind is the kind of the node's records (node.PutRecord) that hold workflows.
const RecordKind = "workflow"

// Defaults of an Engine.
const (
	// DefaultParallel is how many steps of one workflow run at once.
	DefaultParallel = 8
	// DefaultKeepFinished is how many finished workflows the store keeps for status; the
	// oldest finished one is forgotten when a new one starts past it.
	DefaultKeepFinished = 256
	// MaxRunning bounds the workflows running at once on one node.
	MaxRunning = 256
)

// Engine coordinates the workflows started on one node. Build it over the node with New
// (which resumes the workflows its store left running); Close stops the runs, which resume
// at the next New.
type Engine struct {
	n      *node.Node
	find   func(ctx context.Context, c Capability) ([]string, error)
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards runs and every State they hold, and orders the store writes
	runs   map[string]*run
	closed bool
}

// run is one workflow of the engine: its state, and its goroutine's cancel and end.
type run struct {
	st        *State
	cancel    context.CancelFunc
	cancelled bool // by Cancel (not by Close: then it resumes)
	done      chan struct{}
}

// Option changes an Engine.
type Option func(*Engine)

// WithCandidates makes capability steps take their agents from find instead of discovery
// (node.FindByCapability, the default): a static list, or another directory.
func WithCandidates(find func(ctx context.Context, c Capability) ([]string, error)) Option {
	return func(e *Engine) { e.find = find }
}

// New builds the engine of n and resumes every workflow its store holds as running.
func New(n *node.Node, opts ...Option) (*Engine, error) {
	recs, err := n.Records(RecordKind)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Engine{n: n, ctx: ctx, stop: stop, runs: map[string]*run{}}
	e.find = e.providers
	for _, o := range opts {
		o(e)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, raw := range recs {
		var st State
		if err := json.Unmarshal(raw, &st); err != nil || st.Spec.ID != id {
			n.Logger().Warn("workflow record does not decode: left alone", "id", id)
			continue
		}
		r := &run{st: &st, done: make(chan struct{})}
		e.runs[id] = r
		if st.Status.done() {
			close(r.done)
			continue
		}
		st.Resumed++
		if err := e.save(&st); err != nil {
			stop()
			return nil, err
		}
		e.launch(r)
	}
	return e, nil
}

// Start validates spec, stores it and starts running it; it returns the workflow's first
// state. An id already known is DUPLICATE.
func (e *Engine) Start(spec Spec) (State, error) {
	if err := spec.Validate(); err != nil {
		return State{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return State{}, protocol.Errorf(protocol.CodeInternalError, "the workflow engine is closed")
	}
	if _, ok := e.runs[spec.ID]; ok {
		return State{}, protocol.Errorf(protocol.CodeDuplicate, "workflow %s exists: give another workflow_id", spec.ID)
	}
	running := 0
	for _, r := range e.runs {
		if !r.st.Status.done() {
			running++
		}
	}
	if running >= MaxRunning {
		return State{}, protocol.Errorf(protocol.CodeRateLimited, "%d workflows are running, the limit: wait for some to end or cancel them", running)
	}
	e.forgetOldFinished()
	st := newState(spec, e.n.Now())
	if err := e.save(st); err != nil {
		return State{}, err
	}
	r := &run{st: st, done: make(chan struct{})}
	e.runs[spec.ID] = r
	e.launch(r)
	return st.clone(), nil
}

// Status returns a workflow's state.
func (e *Engine) Status(id string) (State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.runs[id]
	if !ok {
		return State{}, protocol.Errorf(protocol.CodeAgentNotFound, "no workflow %s on this node (iacp-node workflow list)", id)
	}
	return r.st.clone(), nil
}

// List returns every workflow the engine knows, the latest started first.
func (e *Engine) List() []State {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]State, 0, len(e.runs))
	for _, r := range e.runs {
		out = append(out, r.st.clone())
	}
	slices.SortFunc(out, func(a, b State) int { return b.Started.Compare(a.Started) })
	return out
}

// Wait blocks until the workflow ended (or ctx did) and returns its state.
func (e *Engine) Wait(ctx context.Context, id string) (State, error) {
	e.mu.Lock()
	r, ok := e.runs[id]
	e.mu.Unlock()
	if !ok {
		return State{}, protocol.Errorf(protocol.CodeAgentNotFound, "no workflow %s on this node", id)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		st, _ := e.Status(id)
		return st, protocol.Errorf(protocol.CodeTimeout, "workflow %s is still %s", id, st.Status)
	}
	return e.Status(id)
}

// Cancel stops a running workflow: its steps in flight are abandoned (an agent may still
// finish one), the others are cancelled. It returns the final state.
func (e *Engine) Cancel(ctx context.Context, id string) (State, error) {
	e.mu.Lock()
	r, ok := e.runs[id]
	if ok && !r.st.Status.done() && r.cancel != nil {
		r.cancelled = true
		r.cancel()
	}
	e.mu.Unlock()
	if !ok {
		return State{}, protocol.Errorf(protocol.CodeAgentNotFound, "no workflow %s on this node", id)
	}
	return e.Wait(ctx, id)
}

// Close stops every run and waits for them; the running workflows resume at the next New
// over the same store.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stop()
	e.wg.Wait()
	return nil
}

// save writes st to the store; the caller holds mu.
func (e *Engine) save(st *State) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return e.n.PutRecord(RecordKind, st.Spec.ID, raw)
}

// forgetOldFinished deletes the oldest finished workflows past DefaultKeepFinished; the caller
// holds mu.
func (e *Engine) forgetOldFinished() {
	var done []*State
	for _, r := range e.runs {
		if r.st.Status.done() {
			done = append(done, r.st)
		}
	}
	if len(done) < DefaultKeepFinished {
		return
	}
	slices.SortFunc(done, func(a, b *State) int { return a.Started.Compare(b.Started) })
	for _, st := range done[:len(done)-DefaultKeepFinished+1] {
		if err := e.n.DeleteRecord(RecordKind, st.Spec.ID); err != nil && !errors.Is(err, context.Canceled) {
			e.n.Logger().Warn("forget a finished workflow", "id", st.Spec.ID, "err", err.Error())
			continue
		}
		delete(e.runs, st.Spec.ID)
	}
}

// providers are the agents discovery knows with capability c, this node's own left out.
func (e *Engine) providers(ctx context.Context, c Capability) ([]string, error) {
	recs, err := e.n.FindByCapability(ctx, c.Kind, c.Name)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range recs {
		if r.AgentID != e.n.AgentID() {
			ids = append(ids, r.AgentID)
		}
	}
	return ids, nil
}
