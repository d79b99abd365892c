package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/protocol"
)

// launch starts r's goroutine; the caller holds mu.
func (e *Engine) launch(r *run) {
	ctx, cancel := context.WithCancel(e.ctx)
	r.cancel = cancel
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer cancel()
		e.drive(ctx, r)
	}()
}

// drive runs r's steps as their dependencies complete, at most DefaultParallel at once, and
// ends the workflow when no step can run any more.
func (e *Engine) drive(ctx context.Context, r *run) {
	ended := make(chan struct{}, len(r.st.Steps))
	inFlight := 0
	launched := map[string]bool{} // steps this process runs (a resumed one was running before)
	for {
		e.mu.Lock()
		if ctx.Err() != nil {
			if r.cancelled {
				e.finish(r, Cancelled)
			}
			e.mu.Unlock()
			for ; inFlight > 0; inFlight-- {
				<-ended
			}
			close(r.done) // cancelled, or the engine closes (the workflow resumes at the next New)
			return
		}
		failed := e.skipBlocked(r.st)
		if !failed {
			for _, st := range r.st.Steps {
				if inFlight >= DefaultParallel {
					break
				}
				if !launched[st.ID] && e.ready(r.st, st) {
					launched[st.ID] = true
					if st.Status == Pending {
						st.Started = e.n.Now()
					}
					st.Status = Running
					inFlight++
					go func(id string) { e.exec(ctx, r, id); ended <- struct{}{} }(st.ID)
				}
			}
		}
		if inFlight == 0 {
			status := Completed
			if failed {
				status = Failed
			}
			e.finish(r, status)
			e.mu.Unlock()
			close(r.done)
			return
		}
		e.persist(r.st)
		e.mu.Unlock()
		select {
		case <-ended:
			inFlight--
		case <-ctx.Done():
		}
	}
}

// ready reports whether step st may start: pending, or running when a restart interrupted it
// (drive starts each step once), with every dependency completed. The caller holds mu.
func (e *Engine) ready(s *State, st *StepState) bool {
	if st.Status != Pending && st.Status != Running {
		return false
	}
	_, spec := s.step(st.ID)
	for _, d := range spec.DependsOn {
		if ds, _ := s.step(d); ds.Status != Completed {
			return false
		}
	}
	return true
}

// skipBlocked marks skipped every pending step behind a failed, skipped or cancelled one, and
// reports whether a step failed. The caller holds mu.
func (e *Engine) skipBlocked(s *State) (failed bool) {
	for changed := true; changed; {
		changed = false
		for _, st := range s.Steps {
			if st.Status == Failed {
				failed = true
			}
			if st.Status != Pending {
				continue
			}
			_, spec := s.step(st.ID)
			for _, d := range spec.DependsOn {
				if ds, _ := s.step(d); ds.Status == Failed || ds.Status == Skipped || ds.Status == Cancelled {
					st.Status, changed = Skipped, true
					break
				}
			}
		}
	}
	return failed
}

// finish ends the workflow with status; the caller holds mu.
func (e *Engine) finish(r *run, status Status) {
	for _, st := range r.st.Steps {
		if !st.Status.done() {
			st.Status, st.Request = Skipped, nil
			if status == Cancelled {
				st.Status = Cancelled
			}
		}
		if st.Status == Failed && r.st.Error == "" {
			r.st.Error = fmt.Sprintf("step %s: %s", st.ID, st.Error)
		}
	}
	r.st.Status, r.st.Ended = status, e.n.Now()
	e.persist(r.st)
}

// persist saves s, logging a failure (the run goes on; a restart resumes from the last saved
// state). The caller holds mu.
func (e *Engine) persist(s *State) {
	if err := e.save(s); err != nil {
		e.n.Logger().Error("workflow state not saved", "id", s.Spec.ID, "err", err.Error())
	}
}

// exec runs one step to its end: each candidate agent in turn, each up to the step's attempts.
func (e *Engine) exec(ctx context.Context, r *run, id string) {
	if err := e.discover(ctx, r, id); err != nil {
		return
	}
	for {
		m, timeout, err := e.prepare(r, id)
		if err != nil {
			return // the step ended (no candidate left): prepare marked it
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := e.n.RequestOnce(actx, m)
		cancel()
		if ctx.Err() != nil {
			return // cancelled, or the engine closes: the request stays kept for a resume
		}
		if !e.settle(r, id, resp, err) {
			return
		}
		e.mu.Lock()
		st, _ := r.st.step(id)
		wait := stepRetry.Delay(st.Tries+1, rand.Int64N)
		e.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// prepare returns the request of the step's next attempt: the one kept (sent again, same id,
// unless it expired), or a new one to the current candidate, kept in the store before it is
// returned. With no candidate left it fails the step and returns an error.
func (e *Engine) prepare(r *run, id string) (*protocol.Message, time.Duration, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, spec := r.st.step(id)
	timeout := time.Duration(spec.Timeout)
	if st.Request != nil {
		if m, err := protocol.DecodeJSON(st.Request); err == nil && e.n.Now().Before(m.Expires()) {
			st.Attempts++
			e.persist(r.st)
			return m, timeout, nil
		}
		st.Request, st.MessageID = nil, ""
	}
	first := st.Candidates // a capability step's agents; else its one agent
	if spec.Agent != "" {
		first = []string{spec.Agent}
	}
	agents := slices.Concat(first, spec.Fallback)
	if st.Candidate >= len(agents) {
		st.Status, st.Ended = Failed, e.n.Now()
		e.persist(r.st)
		return nil, 0, fmt.Errorf("no candidate left")
	}
	st.Agent = agents[st.Candidate]
	payload, err := e.payload(r.st, spec)
	var m *protocol.Message
	if err == nil {
		ttl := timeout*time.Duration(spec.Attempts) + time.Minute
		m, err = e.n.Builder().Request(st.Agent, spec.Intent, payload, protocol.WithCorrelation(r.st.Spec.ID), protocol.WithTTL(ttl))
	}
	var raw []byte
	if err == nil {
		raw, err = protocol.EncodeJSON(m)
	}
	if err != nil {
		st.Status, st.Ended, st.Code, st.Error = Failed, e.n.Now(), string(protocol.CodeOf(err)), err.Error()
		e.persist(r.st)
		return nil, 0, err
	}
	st.Request, st.MessageID = raw, m.Envelope.MessageID
	st.Attempts++
	if err := e.save(r.st); err != nil { // the request is on disk before it leaves
		st.Status, st.Ended, st.Code, st.Error = Failed, e.n.Now(), string(protocol.CodeOf(err)), "the step's request could not be kept: "+err.Error()
		e.persist(r.st)
		return nil, 0, err
	}
	return m, timeout, nil
}

// discover finds a capability step's candidates, once (they are kept with the step); with
// none, and no fallback, the step fails AGENT_NOT_FOUND.
func (e *Engine) discover(ctx context.Context, r *run, id string) error {
	e.mu.Lock()
	st, spec := r.st.step(id)
	need := spec.Capability != nil && st.Candidates == nil
	e.mu.Unlock()
	if !need {
		return nil
	}
	ids, err := e.find(ctx, *spec.Capability)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil && len(ids) == 0 && len(spec.Fallback) == 0 {
		err = protocol.Errorf(protocol.CodeAgentNotFound, "no agent with %s:%s was found", spec.Capability.Kind, spec.Capability.Name)
	}
	if err != nil {
		if ctx.Err() == nil {
			st.Status, st.Ended, st.Code, st.Error = Failed, e.n.Now(), string(protocol.CodeOf(err)), err.Error()
			e.persist(r.st)
		}
		return err
	}
	st.Candidates = append([]string{}, ids...)
	e.persist(r.st)
	return nil
}

// payload is the step's own payload plus `inputs`, the results of its dependencies.
func (e *Engine) payload(s *State, spec *Step) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if len(spec.Payload) > 0 {
		if err := json.Unmarshal(spec.Payload, &out); err != nil {
			return nil, protocol.Errorf(protocol.CodePayloadInvalid, "step %s: payload: %v", spec.ID, err)
		}
	}
	if len(spec.DependsOn) > 0 {
		inputs := map[string]json.RawMessage{}
		for _, d := range spec.DependsOn {
			ds, _ := s.step(d)
			inputs[d] = ds.Result
		}
		raw, err := json.Marshal(inputs)
		if err != nil {
			return nil, err
		}
		out["inputs"] = raw
	}
	return out, nil
}

// settle records an attempt's outcome and reports whether the step goes on (another attempt
// or candidate). An answer completes it. No answer (timeout, unreachable, the agent still
// busy with it: DUPLICATE) keeps the request, to be sent again with its id; an error answer
// drops it (a new request next time), and one that is not retryable moves to the next
// candidate at once.
func (e *Engine) settle(r *run, id string, resp *protocol.Message, err error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, spec := r.st.step(id)
	if err == nil {
		st.Status, st.Ended, st.Code, st.Error = Completed, e.n.Now(), "", ""
		st.Result, st.Request = resp.Message.Payload, nil
		e.persist(r.st)
		return false
	}
	code := protocol.CodeOf(err)
	st.Code, st.Error = string(code), err.Error()
	answered := resp != nil && code != protocol.CodeDuplicate
	if answered {
		st.Request, st.MessageID = nil, ""
	}
	st.Tries++
	if st.Tries >= spec.Attempts || (answered && !code.Retryable()) {
		st.Candidate, st.Tries = st.Candidate+1, 0
		st.Request, st.MessageID = nil, ""
	}
	e.persist(r.st)
	return true
}

// stepRetry is the wait before a step's next attempt, on the node's one retry schedule
// (internal/retry): 200 ms doubled per try, at most 5 s, jittered so that the steps of many
// workflows that failed together do not retry together.
var stepRetry = retry.Backoff{Min: 200 * time.Millisecond, Max: 5 * time.Second}
