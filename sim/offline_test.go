package sim

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// A message the offline step counts lost is explained: still queued at its sender, or not (an
// event that finds no handler is taken as it is: the simulated nodes have no inbox).
func TestOffline_SaysWhereALostMessageIs(t *testing.T) {
	sc, err := Parse([]byte("nodes: 2\nsteps: [{join: {}}]"))
	if err != nil {
		t.Fatal(err)
	}
	c := testCluster(t, sc, 0, 1)
	ctx := context.Background()
	sender, target := c.node(0), c.slots[1].agentID
	event := func(to string, intent protocol.Intent) *offlineMsg {
		m, err := sender.Builder().Event(to, intent, protocol.EventPayload{EventType: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return &offlineMsg{from: 0, m: m}
	}
	unhandled := event(target, "x-unhandled") // the synthetic agent handles no such intent
	nowhere := event("sim:nobody:agent", protocol.IntentNotify)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sender.Send(sctx, unhandled.m, node.QueueUnknown()); err != nil {
		t.Fatal(err)
	}
	if err := sender.Send(sctx, nowhere.m, node.QueueUnknown()); err != nil {
		t.Fatalf("a message to an agent nobody serves is queued: %v", err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the unhandled event delivered", func() bool {
		entries, _ := sender.OutboxEntries()
		return len(entries) == 1
	})
	res := &StepResult{Errors: map[string]int{}}
	c.explainLost([]*offlineMsg{unhandled, nowhere}, res)
	for code, want := range map[string]int{"LOST_QUEUED_AT_SENDER": 1, "LOST_NOT_QUEUED": 1} {
		if res.Errors[code] != want {
			t.Fatalf("errors %v, want %s=%d", res.Errors, code, want)
		}
	}
}
