package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

var portBase atomic.Int32

func agentName(i int) string { return fmt.Sprintf("test:coord:agent%d", i) }

// rig is nodes on one mocknet, every one knowing where the others are; node 0 is the caller.
type rig struct {
	net   *testsupport.Net
	nodes []*node.Node
	// hits counts the requests each agent's handler took.
	hits []atomic.Int64
	// release ends every blocking handler; closed before the nodes close.
	release chan struct{}
}

type rigOpts struct {
	gossip bool
	// handle answers agent i's requests (default: reply accepted, by = its name).
	handle func(i int, r *node.Request) error
	// node adds options to every node.
	node []node.Option
}

func newRig(t testing.TB, n int, o rigOpts) *rig {
	t.Helper()
	net := testsupport.Mocknet(t, n, testsupport.FirstPort(7000+int(portBase.Add(int32(n)))))
	r := &rig{net: net, hits: make([]atomic.Int64, n), release: make(chan struct{})}
	for i := range n {
		opts := []node.Option{
			node.WithHost(net.Hosts[i], net.Keys[i]),
			node.WithAgent(agentName(i), protocol.Manifest{Tools: []string{"terminal"}}),
			node.WithDataDir(t.TempDir()),
			node.WithLogger(slog.New(slog.DiscardHandler)),
			node.WithDiscovery(false),
		}
		if o.gossip {
			opts = append(opts, node.WithHeartbeatInterval(time.Second))
		} else {
			opts = append(opts, node.WithGossip(false))
		}
		nd, err := node.New(append(opts, o.node...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		nd.Handle(protocol.IntentQuery, func(ctx context.Context, req *node.Request) error {
			r.hits[i].Add(1)
			if o.handle != nil {
				return o.handle(i, req)
			}
			return req.Reply(protocol.ResponseAccepted, map[string]any{"by": agentName(i)})
		})
		r.nodes = append(r.nodes, nd)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(r.release) }) }) // runs before the nodes close
	for i, a := range r.nodes {
		for j, b := range r.nodes {
			if i != j {
				a.AddPeer(agentName(j), peer.AddrInfo{ID: b.ID(), Addrs: b.ListenAddrs()})
			}
		}
	}
	return r
}

// coordinator builds node 0's coordinator with a seeded randomness, whose candidates for
// tool:terminal are agents 1..n-1.
func (r *rig) coordinator(t testing.TB, opts ...Option) *Coordinator {
	t.Helper()
	var ids []string
	for i := 1; i < len(r.nodes); i++ {
		ids = append(ids, agentName(i))
	}
	src := func(_ context.Context, c Capability) ([]string, error) {
		if c != (Capability{"tool", "terminal"}) {
			return nil, nil
		}
		return ids, nil
	}
	opts = append([]Option{WithCandidates(src), WithRand(rand.New(rand.NewPCG(1, 2)))}, opts...)
	c, err := New(r.nodes[0], opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// block is a handler that answers only when the rig is released.
func (r *rig) block(req *node.Request) error {
	<-r.release
	return req.Reply(protocol.ResponseAccepted, nil)
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var query = Ask{Intent: protocol.IntentQuery, Payload: json.RawMessage(`{"q":"ping"}`)}

// by returns who answered, from a response's "by" member.
func by(t testing.TB, m *protocol.Message) string {
	t.Helper()
	var p struct {
		By string `json:"by"`
	}
	if err := json.Unmarshal(m.Message.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.By
}

// clock is a settable clock for the breakers.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
