package node

import (
	"context"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// An agent this node exchanges a message with is watched on both sides: probed directly every
// interval, its row judged on this node's own interval (docs/scale.md).
func TestWatch_AgentsThatExchangeMessagesWatchEachOther(t *testing.T) {
	m := newMesh(t, 3, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)}, nil)
	alice, bob, carol := m.nodes[0], m.nodes[1], m.nodes[2]
	bob.Handle(protocol.IntentHandoff, func(_ context.Context, r *Request) error {
		return r.Reply(protocol.ResponseAccepted, nil)
	})
	req, _ := alice.Builder().Request(bob.AgentID(), protocol.IntentHandoff, nil)
	if _, err := alice.Request(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "alice and bob watching each other", func() bool {
		a, _ := alice.Agent(bob.AgentID())
		b, _ := bob.Agent(alice.AgentID())
		return a.Watched && b.Watched && a.Staleness == 3*time.Second
	})
	if c, _ := alice.Agent(carol.AgentID()); c.Watched {
		t.Fatal("alice watches carol, whom she never dealt with")
	}
}
