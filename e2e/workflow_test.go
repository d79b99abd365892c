package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A workflow's coordinator is SIGKILLed while a step is with its agent, the agent
// answers the dead coordinator, and the coordinator is started again: the workflow resumes
// and completes, and the agent ran each of the four steps (a diamond) exactly once.
func TestWorkflow_CoordinatorKilledMidRunResumes(t *testing.T) {
	w := newProc(t, "worker", "e2e:lab:worker")
	w.start()
	c := joinProc(t, "coord", "e2e:lab:coord", w)
	c.boot = w.peerAddr()
	c.start()
	step := func(id string, deps ...string) map[string]any {
		return map[string]any{"id": id, "agent": "e2e:lab:worker", "payload": map[string]any{"step": id}, "depends_on": deps, "timeout": "5s", "attempts": 5}
	}
	decl := map[string]any{"workflow_id": "wf-e2e", "steps": []any{step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c")}}
	if code, body, err := c.do("POST", "/v1/workflows", decl); err != nil || code != 202 {
		t.Fatalf("start: %d %s %v", code, body, err)
	}
	ran := map[string]int{}
	killed := false
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if s := status(t, c); s == "completed" || s == "failed" {
			break
		}
		msgs, err := w.inbox()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			var p struct {
				Step string `json:"step"`
			}
			_ = json.Unmarshal(m.Message.Message.Payload, &p)
			id := m.Message.Envelope.MessageID
			if m.Message.Message.Type != "request" {
				_ = w.ack(id)
				continue
			}
			ran[p.Step]++
			if p.Step == "b" && !killed {
				c.kill() // the coordinator dies waiting for b's answer
				killed = true
			}
			answer(t, w, id, p.Step)
			if err := w.ack(id); err != nil {
				t.Fatal(err)
			}
			if p.Step == "b" {
				c.start() // b's answer went to a dead coordinator; it resumes
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := status(t, c); got != "completed" || !killed {
		t.Fatalf("workflow %s after the kill (killed: %v); steps ran %v", got, killed, ran)
	}
	for _, s := range []string{"a", "b", "c", "d"} {
		if ran[s] != 1 {
			t.Fatalf("step %s ran %d times, want exactly once (%v)", s, ran[s], ran)
		}
	}
}

// answer posts the worker agent's response to request id.
func answer(t *testing.T, w *proc, id, step string) {
	t.Helper()
	doc := map[string]any{
		"envelope": map[string]any{"recipient": map[string]any{"agent_id": "e2e:lab:coord"}, "correlation_id": id},
		"message":  map[string]any{"type": "response", "intent": "handoff", "payload": map[string]any{"status": "accepted", "done": step}},
	}
	if code, body, err := w.do("POST", "/.well-known/iacp/v1/message", doc); err != nil || code/100 != 2 {
		t.Fatalf("answer %s: %d %s %v", step, code, body, err)
	}
}

func status(t *testing.T, c *proc) string {
	t.Helper()
	if c.cmd == nil {
		return "down"
	}
	code, body, err := c.do("GET", "/v1/workflows/wf-e2e", nil)
	if err != nil || code != 200 {
		return fmt.Sprintf("unknown (%d %v)", code, err)
	}
	var st struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &st)
	return st.Status
}
