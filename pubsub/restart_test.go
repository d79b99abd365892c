package pubsub

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	ps "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The delivered hook hands the node every broadcast and group message delivered, with its
// replay window entry; a Gossip restored from those entries refuses the replay of a delivered
// broadcast, so that after a restart it reaches no agent.
func TestReplayRestoreRefusesDeliveredBroadcast(t *testing.T) {
	var mu sync.Mutex
	var entries []protocol.ReplayEntry
	hook := func(e protocol.ReplayEntry) { mu.Lock(); entries = append(entries, e); mu.Unlock() }
	m := newMesh(t, 2, func(i int) []Option {
		if i == 1 {
			return []Option{WithDiscovery(nil), WithDeliveredHook(hook)}
		}
		return []Option{WithDiscovery(nil)}
	})
	got := collect(t, m.nodes[1], Filter{Kinds: []Kind{KindEvent}})
	m.waitFormed(t, 20*time.Second) // heartbeats have flowed both ways: the hook skips them
	sent, err := m.nodes[0].Broadcast(ctxT(t, 10*time.Second), protocol.EventPayload{EventType: "deploy.done"})
	if err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "the broadcast at node 1", func() bool { return got.count(withID(sent.Envelope.MessageID)) == 1 })
	mu.Lock()
	saved := append([]protocol.ReplayEntry(nil), entries...)
	mu.Unlock()
	want := protocol.ReplayEntry{ID: sent.Envelope.MessageID, Expires: sent.Expires(), Owner: m.hosts[0].ID().String()}
	if len(saved) != 1 || saved[0].ID != want.ID || !saved[0].Expires.Equal(want.Expires) || saved[0].Owner != want.Owner {
		t.Fatalf("the hook saw %+v, want only %+v", saved, want)
	}

	bc := topicInfo{name: m.nodes[1].broadcastTopic(), kind: kindBroadcast}
	fresh := oneNode(t)
	if _, err := fresh.check(t.Context(), bc, psMsg(t, sent, bc.name, m.hosts[0].ID(), m.hosts[0].ID())); err != nil {
		t.Fatalf("without the restored window the replay is accepted, as expected; got %v", err)
	}
	restored := oneNode(t, WithReplayRestore(saved))
	_, err = restored.check(t.Context(), bc, psMsg(t, sent, bc.name, m.hosts[0].ID(), m.hosts[0].ID()))
	if verdict(err) != "ignore" || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("the replay after a restart: %s %v", verdict(err), err)
	}
	if n := restored.replay.OwnerLen(m.hosts[0].ID().String()); n != 1 {
		t.Fatalf("the restored entry is charged to %d ids of its owner, want 1", n)
	}
}

// A (re)started node is heard at once: it beats again as soon as its heartbeat topic gains
// its first peer, instead of an interval later. Beats here are 300 s apart, so without that
// beat the nodes would not know each other for five minutes. From the node's side a restart
// is a start; that the neighbour then moves the row from offline back to alive is
// TestLivenessRestartAfterGoodbye. (A restart with the same peer id is not run here: after a
// mocknet connection closes, gossipsub sometimes keeps the peer, its stream to it stuck in
// mocknet's pipe, and never speaks to the new run.)
func TestGreetOnFirstPeer(t *testing.T) {
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	ha, ska, hb, skb := mn.Hosts[0], mn.Keys[0], mn.Hosts[1], mn.Keys[1]
	start := func(h host.Host, sk crypto.PrivKey, agent string) *Gossip {
		t.Helper()
		bld, err := protocol.NewBuilder(agent, sk, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(h, bld, WithHeartbeatInterval(MaxHeartbeatInterval), WithCheckInterval(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	a, b := start(ha, ska, "test:a:agent"), start(hb, skb, "test:b:agent")
	if a.heard.Load() || b.heard.Load() {
		t.Fatal("a beat reached a peer before any peer was connected")
	}
	if _, err := mn.ConnectPeers(ha.ID(), hb.ID()); err != nil {
		t.Fatal(err)
	}
	sees := func(g *Gossip, agent string) bool { s, ok := g.Agent(agent); return ok && s.State == StateAlive }
	testsupport.WaitFor(t, 20*time.Second, "each node to hear the other", func() bool {
		return sees(b, "test:a:agent") && sees(a, "test:b:agent")
	})
	// Once a beat went out while a peer was there, the nodes greet no more.
	testsupport.WaitFor(t, 5*time.Second, "both nodes to stop greeting", func() bool { return a.heard.Load() && b.heard.Load() })
}

// A node restarted within seconds heard nobody: its peers still held its last
// beats (draining, offline) and relayed them back when it asked (IWANT), gossipsub counted
// each as an invalid "self originated" message of the honest relayer, and at -100 a message
// graylisted it within a second. Such copies are dropped from the RPC before gossipsub sees
// them; the rest of the RPC is kept.
func TestOwnMessagesRelayedBackAreDroppedBeforeTheRelayerIsBlamed(t *testing.T) {
	m := newMesh(t, 2, nil)
	g := m.nodes[0]
	self, other := m.hosts[0].ID(), m.hosts[1].ID()
	rpc := &ps.RPC{}
	rpc.Publish = []*pb.Message{{From: []byte(self)}, {From: []byte(other)}, {From: []byte(self)}}
	if err := g.dropOwnRelayed(other, rpc); err != nil {
		t.Fatal(err)
	}
	if len(rpc.Publish) != 1 || peer.ID(rpc.Publish[0].From) != other {
		t.Fatalf("kept %d messages; want only the other peer's", len(rpc.Publish))
	}
	if got := g.Stats().OwnRelayed; got != 2 {
		t.Fatalf("OwnRelayed = %d, want 2", got)
	}
}

// New that fails after it started gossipsub (here: one capability more than a node may join)
// returns the error and closes what it started; it panicked on a nil Gossip before. That no
// goroutine of it outlives the host is the package's leak check (TestMain), once the test's
// mocknet closes.
func TestNew_AFailureAfterGossipsubStartedClosesWhatItStarted(t *testing.T) {
	net := testsupport.Mocknet(t, 1, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	b, err := protocol.NewBuilder("test:h0:agent", net.Keys[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	caps := make([]string, maxGroupTopics+1)
	for i := range caps {
		caps[i] = fmt.Sprintf("cap-%d", i)
	}
	g, err := New(net.Hosts[0], b, WithCapabilities(caps))
	if err == nil || g != nil {
		t.Fatalf("New with %d capabilities: %v, %v; want an error and no Gossip", len(caps), g, err)
	}
	if !strings.Contains(err.Error(), "group topics") {
		t.Fatalf("New failed with %v, want the group topic limit", err)
	}
}
