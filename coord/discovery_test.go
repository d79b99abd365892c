package coord

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// Any-of's default candidates come from the DHT: with discovery on, the providers of
// tool:terminal answer, and the caller's own agent, a provider too, is left out.
func TestAnyOf_CandidatesFromDiscovery(t *testing.T) {
	net := testsupport.Mocknet(t, 4, testsupport.FirstPort(7500), testsupport.LinkOnly())
	var nodes []*node.Node
	var boot string
	for i := range 4 {
		opts := []node.Option{
			node.WithHost(net.Hosts[i], net.Keys[i]),
			node.WithAgent(agentName(i), protocol.Manifest{Tools: []string{"terminal"}}),
			node.WithDataDir(t.TempDir()), node.WithLogger(slog.New(slog.DiscardHandler)),
			node.WithHeartbeatInterval(time.Second),
		}
		if i > 0 {
			opts = append(opts, node.WithBootstrap(boot))
		}
		nd, err := node.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		if i == 0 {
			boot = nd.Addrs()[0].String()
		}
		nd.Handle(protocol.IntentQuery, func(_ context.Context, r *node.Request) error {
			return r.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
		})
		nodes = append(nodes, nd)
	}
	ctx := testCtx(t, 60*time.Second)
	// Provider records do not always reach a 4-node DHT soon (they are republished at half
	// their TTL; see api's TestE2E_MeshDiscoveryAndEvents): wait for one other provider.
	testsupport.WaitFor(t, 30*time.Second, "discovery finds another provider of tool:terminal", func() bool {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		recs, err := nodes[0].FindByCapability(lctx, "tool", "terminal")
		for _, r := range recs {
			if err == nil && r.AgentID != agentName(0) {
				return true
			}
		}
		return false
	})
	c, err := New(nodes[0], WithRand(rand.New(rand.NewPCG(3, 4))))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 30 {
		res, err := c.AnyOf(ctx, Capability{"tool", "terminal"}, query, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen[by(t, res.Response)] = true
	}
	if seen[agentName(0)] || len(seen) == 0 {
		t.Fatalf("answered by %v: want other agents, never the caller", seen)
	}
	t.Logf("answered by %v", seen)
}
