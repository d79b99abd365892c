package coord

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/iacp-node/iacp-node/protocol"
)

// Step is one step of a pipeline: who is asked (one agent, ordered fallback agents, or any
// agent with a capability), with which intent and own parameters.
type Step struct {
	// Name labels the step in results and errors (default "step N", from 1).
	Name string `json:"name,omitempty"`
	// Agent is the one agent asked (through Call); Agents, ordered candidates (Fallback);
	// Capability, any agent with it (AnyOf). Give exactly one.
	Agent      string          `json:"agent,omitempty"`
	Agents     []string        `json:"agents,omitempty"`
	Capability *Capability     `json:"capability,omitempty"`
	Intent     protocol.Intent `json:"intent"`
	// Payload is the step's own parameters, a JSON object (nil: {}).
	Payload json.RawMessage `json:"payload,omitempty"`
	Channel string          `json:"channel,omitempty"`
}

// StepResult is one step's outcome.
type StepResult struct {
	Name string `json:"name"`
	Result
}

// PipelineResult is a pipeline's outcome: the correlation id every request carried and the
// steps that ran, the last one the failure if any.
type PipelineResult struct {
	CorrelationID string       `json:"correlation_id"`
	Steps         []StepResult `json:"steps"`
	// Output is the last step's response payload (nil unless every step answered).
	Output json.RawMessage `json:"output,omitempty"`
}

// Pipeline runs steps in order (ACP v2 "Pipeline"): the request of step i+1 has as its
// payload the members of step i's response payload, except `status`, overlaid by step i+1's
// own Payload members (the step's own parameters win); the first step's payload is its own
// Payload, overlaid on input (nil: nothing). Every request of the chain, retries and
// failovers included, carries the same correlation_id: correlationID, or a new UUIDv7 when
// empty. The pipeline stops at the first step that fails; its error names the step.
func (c *Coordinator) Pipeline(ctx context.Context, correlationID string, input json.RawMessage, steps []Step, opts CallOptions) (*PipelineResult, error) {
	if len(steps) == 0 || len(steps) > c.cfg.MaxSteps {
		return nil, protocol.Errorf(protocol.CodePayloadInvalid, "a pipeline has 1..%d steps, not %d", c.cfg.MaxSteps, len(steps))
	}
	for i, s := range steps {
		if err := s.validate(); err != nil {
			return nil, protocol.Errorf(protocol.CodePayloadInvalid, "%s: %w", s.label(i), err)
		}
	}
	if err := opts.Retry.Validate(); err != nil {
		return nil, err
	}
	first := Ask{CorrelationID: correlationID}
	if err := first.correlate(); err != nil {
		return nil, err
	}
	correlationID = first.CorrelationID
	out := &PipelineResult{CorrelationID: correlationID}
	prev := input
	for i, s := range steps {
		payload, err := feed(prev, s.Payload)
		if err != nil {
			return out, protocol.Errorf(protocol.CodePayloadInvalid, "%s: its input: %w", s.label(i), err)
		}
		ask := Ask{Intent: s.Intent, Payload: payload, Channel: s.Channel, CorrelationID: correlationID}
		var res Result
		switch {
		case s.Agent != "":
			res.Answer = c.Call(ctx, s.Agent, ask, opts)
			err = res.Answer.Err
			if err != nil {
				res.Tried = []Tried{{AgentID: s.Agent, Attempts: res.Attempts, Code: res.Code(), Message: err.Error()}}
			}
		case len(s.Agents) > 0:
			res, err = c.Fallback(ctx, Targets{Agents: s.Agents}, ask, opts)
		default:
			res, err = c.AnyOf(ctx, *s.Capability, ask, opts)
		}
		out.Steps = append(out.Steps, StepResult{Name: s.label(i), Result: res})
		if err != nil {
			return out, &protocol.Error{Code: protocol.CodeOf(err), Message: fmt.Sprintf("pipeline %s stopped at %s: %v", correlationID, s.label(i), err), Err: err}
		}
		prev = res.Response.Message.Payload
	}
	out.Output = prev
	return out, nil
}

func (s Step) label(i int) string {
	if s.Name != "" {
		return fmt.Sprintf("step %d (%s)", i+1, s.Name)
	}
	return fmt.Sprintf("step %d", i+1)
}

func (s Step) validate() error {
	n := 0
	if s.Agent != "" {
		n++
	}
	if len(s.Agents) > 0 {
		n++
	}
	if s.Capability != nil {
		n++
		if err := s.Capability.validate(); err != nil {
			return err
		}
	}
	if n != 1 {
		return fmt.Errorf("give exactly one of agent, agents or capability")
	}
	return Ask{Intent: s.Intent, Payload: s.Payload}.validate()
}

// feed builds a step's request payload: prev's members except status, then own's.
func feed(prev, own json.RawMessage) (json.RawMessage, error) {
	members := map[string]json.RawMessage{}
	if len(prev) > 0 {
		if err := json.Unmarshal(prev, &members); err != nil || members == nil {
			return nil, fmt.Errorf("the previous payload is not a JSON object")
		}
		delete(members, "status")
	}
	if len(own) > 0 {
		var mine map[string]json.RawMessage
		if err := json.Unmarshal(own, &mine); err != nil || mine == nil {
			return nil, fmt.Errorf("the step's payload is not a JSON object")
		}
		for k, v := range mine {
			members[k] = v
		}
	}
	return json.Marshal(members)
}
