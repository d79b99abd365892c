package node

import (
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// The event stream hands out node's own items, converted from gossip's as they come: a
// reader that falls behind loses items, counted, and Cancel closes the channel.
func TestMeshFace_EventStreamIsNodesOwnAndBounded(t *testing.T) {
	m := newMesh(t, 2, []Option{WithGossip(true), WithHeartbeatInterval(time.Second)}, nil)
	sub, err := m.nodes[1].Subscribe(EventFilter{Kinds: []EventKind{EventKindHeartbeat}, AgentID: agentName(0)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 20*time.Second, "a beat that did not fit in the buffer of one", func() bool { return sub.Dropped() > 0 })
	it := <-sub.C()
	if it.Kind != EventKindHeartbeat || it.Kind.String() != "heartbeat" || it.Author != m.nodes[0].ID() ||
		it.Message == nil || it.Message.Envelope.Sender.AgentID != agentName(0) || it.Heartbeat.Status != protocol.StatusAlive {
		t.Fatalf("item %+v; want node 0's alive beat", it)
	}
	sub.Cancel()
	sub.Cancel()
	for range sub.C() { // what was buffered, then the close
	}
	if a, ok := m.nodes[1].Agent(agentName(0)); !ok || a.State != StateAlive || a.PeerID != m.nodes[0].ID() {
		t.Fatalf("liveness row %+v, %v; want node 0 alive", a, ok)
	}
}

// A node with gossip and discovery off answers as their do-nothing stand-ins do: nothing
// known, nothing published, and CAPABILITY_MISMATCH, naming the part, for what needs one.
func TestMeshFace_PartsSwitchedOffDoNothingAndSaySo(t *testing.T) {
	nd := newMesh(t, 1, []Option{WithDurable(false)}, nil).nodes[0]
	ctx := testCtx(t)
	if nd.GossipOn() || nd.DiscoveryOn() {
		t.Fatal("a part switched off says it is on")
	}
	refused := func(what string, err error, part string) {
		t.Helper()
		if protocol.CodeOf(err) != protocol.CodeCapabilityMismatch || !contains(err.Error(), part) {
			t.Fatalf("%s: %v; want CAPABILITY_MISMATCH naming %s", what, err, part)
		}
	}
	_, err := nd.Subscribe(EventFilter{}, 0)
	refused("subscribe", err, "gossip")
	_, err = nd.Broadcast(ctx, protocol.EventPayload{EventType: "test.off"})
	refused("broadcast", err, "gossip")
	_, err = nd.SendToGroup(ctx, "terminal", protocol.IntentQuery, nil)
	refused("group message", err, "gossip")
	_, err = nd.Ask(ctx, AskOptions{Deadline: -1}) // refused before its options are read
	refused("ask", err, "a broadcast query needs gossip")
	_, err = nd.Resolve(ctx, agentName(1))
	refused("resolve", err, "discovery")
	_, err = nd.Query(ctx, protocol.CapabilityQuery{})
	refused("query", err, "discovery")
	_, err = nd.FindByCapability(ctx, "tool", "terminal")
	refused("find", err, "discovery")
	refused("put record", nd.PutRecord("k", "id", []byte("v")), "store")
	_, err = nd.Records("k")
	refused("records", err, "store")
	refused("delete record", nd.DeleteRecord("k", "id"), "store")

	if a := nd.Agents(); a != nil {
		t.Fatalf("liveness table %v without gossip", a)
	}
	if _, ok := nd.Agent(agentName(1)); ok {
		t.Fatal("an agent known without gossip")
	}
	if hb, b := nd.GossipPeers(); hb != 0 || b != 0 {
		t.Fatalf("gossip peers %d, %d without gossip", hb, b)
	}
	if st, ok := nd.DiscoveryStatus(); ok || st.Bootstrapped {
		t.Fatalf("discovery status %+v, %v without discovery", st, ok)
	}
	if err := nd.SetStatus(protocol.StatusBusy, 0.5, 1); err != nil || nd.Status().Status != protocol.StatusBusy {
		t.Fatalf("set status without gossip: %v", err)
	}
	if s := nd.Safety(); s.Gossip != (GossipStats{}) || s.LocalHealth != (GossipHealth{}) || s.DHTStore != (DHTStoreStats{}) {
		t.Fatalf("mesh counters %+v without the mesh", s)
	}
}
