package workflow

import (
	"encoding/json"
	"time"
)

// Status of a workflow or a step.
type Status string

// The statuses. A workflow is running until every step completed (completed), one step
// failed (failed: the steps after it are skipped), or it was cancelled.
const (
	Pending   Status = "pending"
	Running   Status = "running"
	Completed Status = "completed"
	Failed    Status = "failed"
	Skipped   Status = "skipped"
	Cancelled Status = "cancelled"
)

func (s Status) done() bool { return s == Completed || s == Failed || s == Skipped || s == Cancelled }

// State is a workflow as the store keeps it: its declaration, and where each step stands.
type State struct {
	Spec    Spec         `json:"spec"`
	Status  Status       `json:"status"`
	Error   string       `json:"error,omitempty"`
	Started time.Time    `json:"started"`
	Ended   time.Time    `json:"ended,omitzero"`
	Steps   []*StepState `json:"steps"`
	// Resumed counts the restarts of its coordinator that it went on after.
	Resumed int `json:"resumed,omitempty"`
}

// StepState is where one step stands.
type StepState struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Agent is the agent asked last (the answering one once completed).
	Agent string `json:"agent,omitempty"`
	// Candidates are the agents a capability step found by discovery, kept so that a resumed
	// step asks the same ones.
	Candidates []string `json:"candidates,omitempty"`
	// Candidate indexes Agent in the step's agents (its agent or candidates, then fallbacks).
	Candidate int `json:"candidate"`
	// Attempts counts the requests sent, resends of the same request included.
	Attempts int `json:"attempts"`
	// Tries counts the attempts at the current candidate.
	Tries   int       `json:"tries"`
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	Code    string    `json:"code,omitempty"`
	Error   string    `json:"error,omitempty"`
	// Result is the answer's payload.
	Result json.RawMessage `json:"result,omitempty"`
	// MessageID and Request are the signed request in flight, kept before it is sent: a
	// resumed coordinator sends it again, same id, and gets the answer the agent gave.
	MessageID string          `json:"message_id,omitempty"`
	Request   json.RawMessage `json:"request,omitempty"`
}

func newState(spec Spec, now time.Time) *State {
	st := &State{Spec: spec, Status: Running, Started: now}
	for _, s := range spec.Steps {
		st.Steps = append(st.Steps, &StepState{ID: s.ID, Status: Pending})
	}
	return st
}

func (s *State) step(id string) (*StepState, *Step) {
	for i, st := range s.Steps {
		if st.ID == id {
			return st, &s.Spec.Steps[i]
		}
	}
	return nil, nil
}

// clone is a deep copy for callers (Status, List): the run goroutines keep changing s.
func (s *State) clone() State {
	raw, _ := json.Marshal(s)
	var c State
	_ = json.Unmarshal(raw, &c)
	return c
}
