package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/iacp-node/iacp-node/protocol"
)

// Bounds and defaults of a declaration.
const (
	// MaxSteps is the most steps a workflow may have.
	MaxSteps = 64
	// MaxSpecBytes bounds a declaration, YAML or JSON.
	MaxSpecBytes = 256 << 10
	// DefaultStepTimeout bounds one attempt of a step when the step gives none.
	DefaultStepTimeout = 30 * time.Second
	// MaxAttempts bounds a step's attempts per agent.
	MaxAttempts = 10
)

// Spec declares a workflow. Its member names follow IaCP 1.0's `workflow_start` payload
// (workflow_id, workflow_name, description, participants); the steps are this node's
// execution plan (docs/coordination.md).
type Spec struct {
	// ID names the workflow (empty: a new UUIDv7).
	ID           string        `json:"workflow_id,omitempty"`
	Name         string        `json:"workflow_name,omitempty"`
	Description  string        `json:"description,omitempty"`
	Participants []Participant `json:"participants,omitempty"`
	Steps        []Step        `json:"steps"`
}

// Participant is an agent of the workflow and its role (coordinator, worker, specialist).
type Participant struct {
	AgentID          string   `json:"agent_id"`
	Role             string   `json:"role,omitempty"`
	Responsibilities []string `json:"responsibilities,omitempty"`
}

// Step is one request of the plan.
type Step struct {
	// ID names the step within the workflow.
	ID string `json:"id"`
	// Agent is asked first, or the agents with Capability (give one of the two: found by
	// discovery when the step starts, in the order it returns them); Fallback are asked in
	// order after them.
	Agent      string      `json:"agent,omitempty"`
	Capability *Capability `json:"capability,omitempty"`
	Fallback   []string    `json:"fallback,omitempty"`
	// Intent of the request (default handoff).
	Intent protocol.Intent `json:"intent,omitempty"`
	// Payload is the step's own parameters, a JSON object. The request's payload is it plus
	// `inputs`: the result payload of every step it depends on, by step id.
	Payload json.RawMessage `json:"payload,omitempty"`
	// DependsOn names the steps whose results this one needs.
	DependsOn []string `json:"depends_on,omitempty"`
	// Timeout bounds each attempt, a duration such as "30s" (default 30 s).
	Timeout Duration `json:"timeout,omitempty"`
	// Attempts per agent (default 1): a timeout or an unreachable agent is tried again with
	// the same request, a retryable error reply with a new one.
	Attempts int `json:"attempts,omitempty"`
}

// Capability names the capability a step's agents have: kind tool, model or domain, and name.
type Capability struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Duration is a time.Duration written as a string ("30s", "2m").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "30s" (or a number of seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err := json.Unmarshal(b, &secs); err != nil {
			return fmt.Errorf("a duration is a string such as \"30s\"")
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Parse reads a declaration in YAML or JSON (JSON is YAML) and validates it.
func Parse(data []byte) (Spec, error) {
	var s Spec
	if len(data) > MaxSpecBytes {
		return s, protocol.Errorf(protocol.CodePayloadInvalid, "the workflow is %d bytes; at most %d", len(data), MaxSpecBytes)
	}
	js, err := protocol.YAMLToJSONLimit(data, MaxSpecBytes*4)
	if err != nil {
		return s, protocol.Errorf(protocol.CodePayloadInvalid, "the workflow is neither YAML nor JSON: %v", err)
	}
	if js, err = fromWorkflowStart(js); err != nil {
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, protocol.Errorf(protocol.CodePayloadInvalid, "workflow: %v", err)
	}
	return s, s.Validate()
}

// workflowStart is an IaCP 1.0 `workflow_start` message (section 4.5.1): its payload is the
// declaration, with the plan under execution_plan. The draft leaves the plan's shape open;
// this node reads execution_plan.steps as its steps, execution_plan.dependencies as
// {"step": ["dependency", ...]} and execution_plan.timeouts as {"step": "30s"}, each merged
// into the step's own depends_on and timeout.
type workflowStart struct {
	MessageType string `json:"message_type"`
	Payload     struct {
		ID           string          `json:"workflow_id"`
		Name         string          `json:"workflow_name"`
		Description  string          `json:"description"`
		Participants []Participant   `json:"participants"`
		Plan         json.RawMessage `json:"execution_plan"`
	} `json:"payload"`
}

// fromWorkflowStart turns an IaCP 1.0 workflow_start message into a declaration; any other
// document is returned as it is.
func fromWorkflowStart(js []byte) ([]byte, error) {
	var probe struct {
		MessageType string `json:"message_type"`
	}
	if json.Unmarshal(js, &probe) != nil || probe.MessageType == "" {
		return js, nil
	}
	bad := func(format string, a ...any) error { return protocol.Errorf(protocol.CodePayloadInvalid, format, a...) }
	if probe.MessageType != "workflow_start" {
		return nil, bad("an IaCP 1.0 %s message is no workflow: send a workflow_start", probe.MessageType)
	}
	var ws workflowStart
	if err := json.Unmarshal(js, &ws); err != nil {
		return nil, bad("workflow_start: %v", err)
	}
	var plan struct {
		Steps        []map[string]json.RawMessage `json:"steps"`
		Dependencies map[string][]string          `json:"dependencies"`
		Timeouts     map[string]json.RawMessage   `json:"timeouts"`
	}
	if len(ws.Payload.Plan) == 0 {
		return nil, bad("workflow_start: payload.execution_plan.steps is missing")
	}
	if err := json.Unmarshal(ws.Payload.Plan, &plan); err != nil {
		return nil, bad("workflow_start: execution_plan: %v (steps is a list, dependencies {step: [steps]}, timeouts {step: duration})", err)
	}
	for _, st := range plan.Steps {
		var id string
		_ = json.Unmarshal(st["id"], &id)
		if deps, ok := plan.Dependencies[id]; ok {
			var own []string
			_ = json.Unmarshal(st["depends_on"], &own)
			st["depends_on"], _ = json.Marshal(append(own, deps...))
		}
		if t, ok := plan.Timeouts[id]; ok {
			st["timeout"] = t
		}
	}
	return json.Marshal(map[string]any{"workflow_id": ws.Payload.ID, "workflow_name": ws.Payload.Name,
		"description": ws.Payload.Description, "participants": ws.Payload.Participants, "steps": plan.Steps})
}

// Validate checks the declaration and fills its defaults: an id, each step's intent,
// timeout and attempts. Its errors name the step and the member.
func (s *Spec) Validate() error {
	bad := func(format string, a ...any) error { return protocol.Errorf(protocol.CodePayloadInvalid, format, a...) }
	if s.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return protocol.Errorf(protocol.CodeInternalError, "workflow id: %v", err)
		}
		s.ID = id.String()
	}
	if len(s.ID) > protocol.MaxCorrelationIDLen {
		return bad("workflow_id is %d characters; at most %d", len(s.ID), protocol.MaxCorrelationIDLen)
	}
	if len(s.Steps) == 0 || len(s.Steps) > MaxSteps {
		return bad("a workflow has 1 to %d steps; this one has %d", MaxSteps, len(s.Steps))
	}
	ids := map[string]bool{}
	for i := range s.Steps {
		st := &s.Steps[i]
		if err := st.validate(i); err != nil {
			return err
		}
		if ids[st.ID] {
			return bad("step %q: two steps have this id", st.ID)
		}
		ids[st.ID] = true
	}
	for _, st := range s.Steps {
		for i, d := range st.DependsOn {
			if !ids[d] {
				return bad("step %q depends on %q, which is no step of this workflow", st.ID, d)
			}
			if slices.Contains(st.DependsOn[:i], d) {
				return bad("step %q names %q twice in depends_on", st.ID, d)
			}
		}
	}
	if cyc := s.cycle(); cyc != nil {
		return bad("the dependencies form a cycle: %v", cyc)
	}
	return nil
}

// validate checks step i and fills its defaults (intent, timeout, attempts).
func (st *Step) validate(i int) error {
	bad := func(format string, a ...any) error { return protocol.Errorf(protocol.CodePayloadInvalid, format, a...) }
	where := fmt.Sprintf("steps[%d]", i)
	if st.ID == "" || len(st.ID) > 64 {
		return bad("%s.id: give each step an id of 1 to 64 characters", where)
	}
	where = fmt.Sprintf("step %q", st.ID)
	agents := st.Fallback
	switch {
	case (st.Agent == "") == (st.Capability == nil):
		return bad("%s: give agent or capability (one of the two)", where)
	case st.Capability != nil:
		if c := st.Capability; (c.Kind != "tool" && c.Kind != "model" && c.Kind != "domain") || c.Name == "" {
			return bad("%s.capability: kind is tool, model or domain, and name is not empty", where)
		}
	default:
		agents = append([]string{st.Agent}, agents...)
	}
	for _, a := range agents {
		if err := protocol.ValidateAgentID(a); err != nil {
			return bad("%s.agent %q: %v", where, a, err)
		}
	}
	if st.Intent == "" {
		st.Intent = protocol.IntentHandoff
	}
	if !protocol.IntentAllowed(protocol.TypeRequest, st.Intent) {
		return bad("%s.intent %q is not one a request may carry (handoff, query, negotiate, notify or x-...)", where, st.Intent)
	}
	if len(st.Payload) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(st.Payload, &obj); err != nil || obj == nil {
			return bad("%s.payload must be a JSON object", where)
		}
		if _, ok := obj["inputs"]; ok {
			return bad("%s.payload: the member inputs is the node's (the results of the steps it depends on)", where)
		}
	}
	if st.Timeout == 0 {
		st.Timeout = Duration(DefaultStepTimeout)
	}
	if time.Duration(st.Timeout) < time.Second || time.Duration(st.Timeout) > time.Hour {
		return bad("%s.timeout %v: 1s to 1h", where, time.Duration(st.Timeout))
	}
	if st.Attempts == 0 {
		st.Attempts = 1
	}
	if st.Attempts < 1 || st.Attempts > MaxAttempts {
		return bad("%s.attempts %d: 1 to %d", where, st.Attempts, MaxAttempts)
	}
	return nil
}

// cycle returns the steps of a dependency cycle, or nil for a DAG (Kahn's algorithm: what
// is left when no step without pending dependencies remains).
func (s *Spec) cycle() []string {
	pending := map[string]int{}
	users := map[string][]string{}
	for _, st := range s.Steps {
		pending[st.ID] = len(st.DependsOn)
		for _, d := range st.DependsOn {
			users[d] = append(users[d], st.ID)
		}
	}
	var ready []string
	for _, st := range s.Steps {
		if pending[st.ID] == 0 {
			ready = append(ready, st.ID)
		}
	}
	for len(ready) > 0 {
		id := ready[0]
		ready = ready[1:]
		delete(pending, id)
		for _, u := range users[id] {
			if pending[u]--; pending[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if len(pending) == 0 {
		return nil
	}
	var left []string
	for id := range pending {
		left = append(left, id)
	}
	slices.Sort(left)
	return left
}
