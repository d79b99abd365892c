package coord

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A pipeline's steps run in order, each step's response payload (less status)
// feeding the next step's parameters under its own, one correlation id through the chain;
// a step of ordered agents fails over.
func TestPipeline_FeedsEachStepAndKeepsOneCorrelation(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]json.RawMessage{}
	corr := map[string]bool{}
	r := newRig(t, 4, rigOpts{handle: func(i int, req *node.Request) error {
		mu.Lock()
		seen[i] = req.Msg.Message.Payload
		corr[req.Msg.Envelope.CorrelationID] = true
		mu.Unlock()
		var in map[string]any
		_ = json.Unmarshal(req.Msg.Message.Payload, &in)
		switch i {
		case 1:
			return req.Reply(protocol.ResponseAccepted, map[string]any{"n": in["n"].(float64) + 1, "by1": true})
		case 2:
			return req.Fail(protocol.Errorf(protocol.CodeInternalError, "down"))
		}
		return req.Reply(protocol.ResponseAccepted, map[string]any{"n": in["n"].(float64) * 10})
	}})
	c := r.coordinator(t)
	steps := []Step{
		{Name: "inc", Agent: agentName(1), Intent: protocol.IntentQuery},
		{Name: "times", Agents: []string{agentName(2), agentName(3)}, Intent: protocol.IntentQuery, Payload: json.RawMessage(`{"mode":"x"}`)},
	}
	res, err := c.Pipeline(testCtx(t, 20*time.Second), "", json.RawMessage(`{"n":1}`), steps, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Output, &out); err != nil || out["n"] != 20.0 {
		t.Fatalf("output %s, want n=20 ((1+1)*10)", res.Output)
	}
	var fed map[string]any
	_ = json.Unmarshal(seen[3], &fed)
	if fed["n"] != 2.0 || fed["by1"] != true || fed["mode"] != "x" || fed["status"] != nil {
		t.Fatalf("step 2 got %s: want step 1's answer without status, and its own mode", seen[3])
	}
	if len(corr) != 1 || !corr[res.CorrelationID] {
		t.Fatalf("correlation ids %v, want only %s", corr, res.CorrelationID)
	}
	if len(res.Steps) != 2 || len(res.Steps[1].Tried) != 1 || res.Steps[1].AgentID != agentName(3) {
		t.Fatalf("steps %+v", res.Steps)
	}

	// A failing step stops the chain and is named.
	_, err = c.Pipeline(testCtx(t, 20*time.Second), "chain-1", nil, []Step{{Agent: agentName(2), Intent: protocol.IntentQuery}, steps[0]}, CallOptions{})
	if protocol.CodeOf(err) != protocol.CodeInternalError || !contains(err.Error(), "step 1") || !corr["chain-1"] {
		t.Fatalf("%v: want step 1's INTERNAL_ERROR, under correlation chain-1", err)
	}
	for name, bad := range map[string][]Step{
		"none":     nil,
		"two ways": {{Agent: agentName(1), Agents: []string{agentName(2)}, Intent: protocol.IntentQuery}},
		"intent":   {{Agent: agentName(1), Intent: "bogus"}},
		"payload":  {{Agent: agentName(1), Intent: protocol.IntentQuery, Payload: json.RawMessage(`[1]`)}},
	} {
		if _, err := c.Pipeline(testCtx(t, time.Second), "", nil, bad, CallOptions{}); protocol.CodeOf(err) != protocol.CodePayloadInvalid {
			t.Errorf("%s: %v, want PAYLOAD_INVALID", name, err)
		}
	}
}
