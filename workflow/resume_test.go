package workflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The coordinator crashes while step b is with its agent; b's agent answers after the crash.
// Restarted over the same store, the coordinator resumes: b's request goes out again with its
// id, the answer the agent gave comes back, and d runs. Every step's agent ran it once.
func TestWorkflow_CoordinatorCrashMidRunResumes(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	w := newWorkers(t, 4, func(i int, r *node.Request) error {
		if i == 2 {
			started <- struct{}{}
			<-release
		}
		return r.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i), "got": r.Msg.Message.Payload})
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	dir, key := t.TempDir(), newKey(t)
	c1 := startNode(t, 0, dir, key)
	w.introduce(c1)
	e1, err := New(c1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Start(diamond("wf-crash")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("step b never reached its agent")
	}
	// A crash: nothing more reaches the store (the engine's runs stop without recording
	// anything), then the host goes as in a kill.
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c1.Crash()
	close(release) // b's agent answers a coordinator that is gone

	c2 := startNode(t, 0, dir, key)
	t.Cleanup(func() { c2.Close() })
	w.introduce(c2)
	e2, err := New(c2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	st, err := e2.Wait(testCtx(t), "wf-crash")
	if err != nil || st.Status != Completed || st.Resumed != 1 {
		t.Fatalf("resumed workflow: %s (%s), resumed %d, %v", st.Status, st.Error, st.Resumed, err)
	}
	for i, s := range []string{"a", "b", "c", "d"} {
		if n := w.ran(fmtKey(i+1, s)); n != 1 {
			t.Fatalf("step %s ran %d times, want once", s, n)
		}
	}
	b, _ := st.step("b")
	var res struct {
		By string `json:"by"`
	}
	if json.Unmarshal(b.Result, &res) != nil || res.By != agentName(2) || b.Attempts < 2 {
		t.Fatalf("b: result %s after %d attempts, want agent 2's answer to a resent request", b.Result, b.Attempts)
	}
}

// Cancel stops a running workflow: the step in flight and those after it are cancelled.
func TestWorkflow_Cancel(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	w := newWorkers(t, 4, func(i int, r *node.Request) error {
		if i == 2 {
			started <- struct{}{}
			<-release
		}
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	t.Cleanup(func() { close(release) })
	c := startNode(t, 0, t.TempDir(), newKey(t))
	t.Cleanup(func() { c.Close() })
	w.introduce(c)
	e, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.Start(diamond("wf-cancel")); err != nil {
		t.Fatal(err)
	}
	<-started
	st, err := e.Cancel(testCtx(t), "wf-cancel")
	if err != nil || st.Status != Cancelled {
		t.Fatalf("cancel: %s, %v", st.Status, err)
	}
	if d, _ := st.step("d"); d.Status != Cancelled {
		t.Fatalf("step d is %s after cancel", d.Status)
	}
	if _, err := e.Start(diamond("wf-cancel")); protocol.CodeOf(err) != protocol.CodeDuplicate {
		t.Fatalf("starting a known id: %v", err)
	}
}
