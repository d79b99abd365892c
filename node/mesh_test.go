package node

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// A node joins through a bootstrap peer and reaches an agent it has never met: the recipient
// is resolved through its DHT agent record. A broadcast reaches every other node.
func TestMesh_ReachAgentNeverMetThroughDHT(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	const n = 5
	var nodes []*Node
	var boot string
	for i := 0; i < n; i++ {
		sk, _, _ := crypto.GenerateEd25519Key(nil)
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 5000+i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := mn.LinkAll(); err != nil {
			t.Fatal(err)
		}
		opts := []Option{
			WithHost(h, sk),
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
		sub, err := nd.Gossip().Subscribe(pubsubEvents(), 16)
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
		if _, err := nodes[1].Gossip().Broadcast(ctx, protocol.EventPayload{EventType: "deploy.done"}); err != nil {
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

func pubsubEvents() pubsub.Filter { return pubsub.Filter{Kinds: []pubsub.Kind{pubsub.KindEvent}} }
