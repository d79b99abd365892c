package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
)

// A node joins through a bootstrap peer and reaches an agent it has never met: the recipient
// is resolved through its DHT agent record. A broadcast reaches every other node.
func TestMesh_ReachAgentNeverMetThroughDHT(t *testing.T) {
	const n = 5
	mn := testsupport.Mocknet(t, n, testsupport.FirstPort(5000), testsupport.LinkOnly())
	var nodes []*Node
	var boot string
	for i := 0; i < n; i++ {
		opts := []Option{
			WithHost(mn.Hosts[i], mn.Keys[i]),
			WithAgent(fmt.Sprintf("test:dht:agent%d", i), protocol.Manifest{Tools: []string{"terminal"}}),
			WithDataDir(t.TempDir()),
			WithLogger(slog.New(slog.DiscardHandler)),
			WithHeartbeatInterval(time.Second),
		}
		if i > 0 {
			opts = append(opts, WithBootstrap(boot))
		}
		nd, err := New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		if i == 0 {
			boot = nd.Addrs()[0].String()
		}
		nodes = append(nodes, nd)
	}
	got := make(chan string, n)
	for _, nd := range nodes[1:] {
		nd.Handle(protocol.IntentHandoff, func(ctx context.Context, r *Request) error {
			return r.Reply(protocol.ResponseAccepted, nil)
		})
		sub, err := nd.Subscribe(broadcastEvents(), 16)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sub.Cancel)
		go func(nd *Node) {
			for it := range sub.C() {
				if it.Event.EventType == "deploy.done" {
					got <- nd.AgentID()
					return
				}
			}
		}(nd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// node 4 has never heard of agent 3: only the DHT knows where it is.
	var lastErr error
	for ctx.Err() == nil {
		req, _ := nodes[4].Builder().Request("test:dht:agent3", protocol.IntentHandoff, nil)
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		_, lastErr = nodes[4].Request(rctx, req)
		rcancel()
		if lastErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("agent never reachable through the DHT: %v", lastErr)
	}
	// Broadcast until gossip meshes have formed: nodes 2, 3 and 4 (subscribed, not the
	// sender) must each hear it.
	heard := map[string]bool{}
	for ctx.Err() == nil && len(heard) < n-2 {
		if _, err := nodes[1].Broadcast(ctx, protocol.EventPayload{EventType: "deploy.done"}); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-got:
			heard[id] = true
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(heard) < n-2 {
		t.Fatalf("broadcast heard by %d of %d nodes", len(heard), n-2)
	}
}

func broadcastEvents() EventFilter { return EventFilter{Kinds: []EventKind{EventKindEvent}} }

// Nothing saved the gossip replay window, so after a restart any peer could replay
// broadcasts still within their TTL. The ids of delivered broadcasts are journaled in the
// store, and a node started again on the same data directory restores them.
func TestMesh_DeliveredBroadcastIDsSurviveARestart(t *testing.T) {
	mn := testsupport.Mocknet(t, 2, testsupport.FirstPort(5100))
	dirs := []string{t.TempDir(), t.TempDir()}
	keys := mn.Keys
	nodes := make([]*Node, 2)
	for i := range nodes {
		var err error
		nodes[i], err = New(WithHost(mn.Hosts[i], keys[i]), WithAgent(fmt.Sprintf("test:journal:agent%d", i), protocol.Manifest{}),
			WithDataDir(dirs[i]), WithLogger(slog.New(slog.DiscardHandler)), WithHeartbeatInterval(time.Second), WithDiscovery(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nodes[i].Close() })
	}
	sub, err := nodes[1].Subscribe(broadcastEvents(), 16)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sent *protocol.Message
	for sent == nil && ctx.Err() == nil {
		m, err := nodes[0].Broadcast(ctx, protocol.EventPayload{EventType: "deploy.done"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case it := <-sub.C():
			if it.Message.Envelope.MessageID == m.Envelope.MessageID {
				sent = m
			}
		case <-time.After(500 * time.Millisecond):
		}
	}
	if sent == nil {
		t.Fatal("the broadcast never arrived")
	}
	sub.Cancel()
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	h, err := mn.AddPeer(keys[1], ma.StringCast("/ip4/127.0.0.1/tcp/5101"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := New(WithHost(h, keys[1]), WithAgent("test:journal:agent1", protocol.Manifest{}), WithDataDir(dirs[1]),
		WithLogger(slog.New(slog.DiscardHandler)), WithHeartbeatInterval(time.Second), WithDiscovery(false))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	seen, err := keptOf(t, again).store.GossipSeen(again.now())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range seen {
		if e.ID == sent.Envelope.MessageID {
			return
		}
	}
	t.Fatalf("the delivered broadcast %s is not in the restored gossip window (%d ids)", sent.Envelope.MessageID, len(seen))
}

// Bootstrap peers are peers the node keeps connected (protected, pinged, redialled within a
// second) only when it runs without discovery, where they are its one way into the mesh.
// With discovery the DHT redials them while its routing table is small and leaves them alone
// after: kept by every node of a large mesh, a bootstrap peer would trim the connections of
// thousands and take each one back a second later.
func TestMesh_BootstrapPeersAreKeptOnlyWithoutDiscovery(t *testing.T) {
	mn := testsupport.Mocknet(t, 3, testsupport.FirstPort(5200), testsupport.LinkOnly())
	boot, err := startNode(t, mn.Hosts[0], mn.Keys[0], agentName(0), WithDiscovery(true))
	if err != nil {
		t.Fatal(err)
	}
	addr := boot.Addrs()[0].String()
	withDHT, err := startNode(t, mn.Hosts[1], mn.Keys[1], agentName(1), WithDiscovery(true), WithBootstrap(addr))
	if err != nil {
		t.Fatal(err)
	}
	alone, err := startNode(t, mn.Hosts[2], mn.Keys[2], agentName(2), WithBootstrap(addr))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(withDHT.peers.neededPeers(), boot.ID()) {
		t.Error("with discovery, the node keeps its bootstrap peer connected itself; discovery owns its redials")
	}
	if !slices.Contains(alone.peers.neededPeers(), boot.ID()) {
		t.Fatal("without discovery, the node does not keep its bootstrap peer connected")
	}
	// The one kept is redialled when its connection drops.
	waitConnected := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for alone.host.Network().Connectedness(boot.ID()) != network.Connected {
			if time.Now().After(deadline) {
				t.Fatal("the bootstrap peer was not redialled within 10 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitConnected()
	if err := boot.host.Network().ClosePeer(alone.ID()); err != nil {
		t.Fatal(err)
	}
	waitConnected()
}
