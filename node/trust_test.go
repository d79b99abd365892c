package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/trust"
)

// Open mode: an attacker who spoke first for bob holds bob's pin, but the real bob's
// claim is reported as a conflict (not silently lost), and once the operator forgets the pin
// the real bob is pinned at his next message.
func TestTrustOpen_AnAttackerWhoSpokeFirstIsReportedAsAConflict(t *testing.T) {
	m := newMesh(t, 3, nil, nil)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	posing, _ := protocol.NewBuilder(agentName(1), m.keys[2], nil) // mallory's key, bob's id
	c := dialRaw(t, mallory, alice)
	c.send(event(t, posing, agentName(0)))
	if r, err := c.next(); err != nil || r.Message.Type != protocol.TypeResponse {
		t.Fatalf("mallory's first claim: %v %v", r, err)
	}

	err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0)))
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeIdentityInvalid {
		t.Fatalf("bob's message after mallory's claim: %v, want IDENTITY_INVALID", err)
	}
	cs, total, _ := alice.Trust().Conflicts(0)
	if total != 1 || len(cs) != 1 {
		t.Fatalf("%d conflicts recorded, want 1: %+v", total, cs)
	}
	if c := cs[0]; c.AgentID != agentName(1) || c.Bound != mallory.ID() || c.Claimant != bob.ID() || c.Source != trust.SourceMessage {
		t.Fatalf("conflict %+v, want bob bound to mallory and claimed by bob", c)
	}
	if s := alice.Safety(); s.TrustConflicts != 1 {
		t.Fatalf("Safety().TrustConflicts = %d", s.TrustConflicts)
	}

	if k := alice.Trust().Forget(agentName(1), ""); k != 1 {
		t.Fatalf("forgot %d pins, want 1", k)
	}
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0))); err != nil {
		t.Fatalf("bob after the pin was forgotten: %v", err)
	}
	if p, ok := alice.trust.PeerOf(agentName(1)); !ok || p != bob.ID() {
		t.Fatalf("bob pinned to %s, want %s", p, bob.ID())
	}
}

// Open mode: once the real agent has spoken, an attacker's claim cannot take its
// binding over. The claim is refused and reported, and messages for the agent still reach it.
func TestTrustOpen_AnEstablishedBindingCannotBeTakenOver(t *testing.T) {
	m := newMesh(t, 3, nil, nil)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0))); err != nil {
		t.Fatal(err)
	}
	posing, _ := protocol.NewBuilder(agentName(1), m.keys[2], nil)
	code, _ := dialRaw(t, mallory, alice).refusal(event(t, posing, agentName(0)))
	expectCode(t, code, protocol.CodeIdentityInvalid)
	if cs, _, _ := alice.Trust().Conflicts(0); len(cs) != 1 || cs[0].Claimant != mallory.ID() {
		t.Fatalf("conflicts %+v, want mallory's claim", cs)
	}

	got := make(chan struct{}, 1)
	bob.Handle(protocol.IntentNotify, func(ctx context.Context, r *Request) error {
		got <- struct{}{}
		return nil
	})
	if err := alice.Send(testCtx(t), event(t, alice.Builder(), agentName(1))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("alice's message for bob did not reach bob")
	}
}

// One forged heartbeat claiming carol once redirected every node's messages for carol.
// Gossip alone binds nothing: a heartbeat teaches where an agent is only when its id is
// already bound to the signing peer, and a heartbeat of another peer is a conflict.
func TestTrustOpen_HeartbeatsNeverBind(t *testing.T) {
	m := newMesh(t, 3, nil, nil)
	alice, bob, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	carol := "test:mesh:carol"
	alice.mesh.heardLiveness(pubsub.Transition{AgentID: carol, PeerID: mallory.ID(), From: pubsub.StateOffline, To: pubsub.StateAlive})
	if p, ok := alice.peers.directory.Peek(carol); ok {
		t.Fatalf("a heartbeat alone taught the directory that %s serves carol", p)
	}
	if _, err := alice.peers.resolve(testCtx(t), carol); err == nil {
		t.Fatal("carol resolves after a forged heartbeat")
	}

	if err := bob.Send(testCtx(t), event(t, bob.Builder(), agentName(0))); err != nil {
		t.Fatal(err)
	}
	alice.peers.directory.Remove(agentName(1))
	alice.mesh.heardLiveness(pubsub.Transition{AgentID: agentName(1), PeerID: mallory.ID(), To: pubsub.StateAlive})
	if cs, _, _ := alice.Trust().Conflicts(0); len(cs) != 1 || cs[0].Source != trust.SourceHeartbeat {
		t.Fatalf("conflicts %+v, want one from a heartbeat", cs)
	}
	if _, ok := alice.peers.directory.Peek(agentName(1)); ok {
		t.Fatal("a heartbeat of another peer taught the directory where bob is")
	}
	alice.mesh.heardLiveness(pubsub.Transition{AgentID: agentName(1), PeerID: bob.ID(), To: pubsub.StateAlive})
	if p, ok := alice.peers.directory.Peek(agentName(1)); !ok || p != bob.ID() {
		t.Fatal("bob's own heartbeat did not refresh where bob is")
	}
}
