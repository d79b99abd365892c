package pubsub

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/discovery/mocks"
)

// ttlDiscovery gives every advertisement a TTL: the mock server expires one without at once.
type ttlDiscovery struct{ *mocks.MockDiscoveryClient }

func (d ttlDiscovery) Advertise(ctx context.Context, ns string, opts ...discovery.Option) (time.Duration, error) {
	return d.MockDiscoveryClient.Advertise(ctx, ns, append([]discovery.Option{discovery.TTL(time.Hour)}, opts...)...)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// hostPort is the port of host 0's mocknet address; host i has hostPort+i.
const hostPort = 20000

// mesh is n gossip nodes on a mocknet, sparsely connected: a ring plus a chord to i+n/4.
type mesh struct {
	mn     *testsupport.Net
	hosts  []host.Host
	keys   []crypto.PrivKey
	nodes  []*Gossip
	agents []string
	disc   *mocks.MockDiscoveryServer
	closed []bool
}

// newMesh builds n nodes; opts(i) gives node i's options on top of the mesh defaults
// (1 s heartbeats, the shared mock discovery).
func newMesh(tb testing.TB, n int, opts func(i int) []Option) *mesh {
	tb.Helper()
	net := testsupport.Mocknet(tb, n, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	m := &mesh{mn: net, hosts: net.Hosts, keys: net.Keys, disc: mocks.NewDiscoveryServer(wallClock{}), closed: make([]bool, n)}
	for i := range n {
		m.agents = append(m.agents, fmt.Sprintf("test:h%d:agent", i))
	}
	for i := range n {
		for _, j := range []int{(i + 1) % n, (i + max(n/4, 2)) % n} {
			if j != i {
				if _, err := m.mn.ConnectPeers(m.hosts[i].ID(), m.hosts[j].ID()); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	tb.Cleanup(m.close)
	for i := range n {
		b, err := protocol.NewBuilder(m.agents[i], m.keys[i], nil)
		if err != nil {
			tb.Fatal(err)
		}
		o := []Option{WithHeartbeatInterval(time.Second), WithScoreInspection(time.Second),
			WithDiscovery(ttlDiscovery{mocks.NewDiscoveryClient(m.hosts[i], m.disc)})}
		if opts != nil {
			o = append(o, opts(i)...)
		}
		g, err := New(m.hosts[i], b, o...)
		if err != nil {
			tb.Fatal(err)
		}
		m.nodes = append(m.nodes, g)
	}
	return m
}

// stop closes node i's gossip and host, as a crash would.
func (m *mesh) stop(i int) {
	if m.closed[i] {
		return
	}
	m.closed[i] = true
	m.nodes[i].Close()
	m.hosts[i].Close()
}

// close closes the gossip nodes still running; the mocknet closes after them.
func (m *mesh) close() {
	var wg sync.WaitGroup
	for i, g := range m.nodes {
		if !m.closed[i] {
			wg.Add(1)
			go func() { defer wg.Done(); g.Close() }()
		}
	}
	wg.Wait()
}

// waitFormed waits until every live node has heard every other live node beat: the
// heartbeat mesh reaches everyone.
func (m *mesh) waitFormed(tb testing.TB, d time.Duration) {
	tb.Helper()
	testsupport.WaitFor(tb, d, "every node to hear every other", func() bool {
		for i, g := range m.nodes {
			if m.closed[i] {
				continue
			}
			for j, id := range m.agents {
				if j == i || m.closed[j] {
					continue
				}
				if a, ok := g.Agent(id); !ok || a.State != StateAlive {
					return false
				}
			}
		}
		return true
	})
}

// collector drains a subscription into a slice, for assertions after the fact.
type collector struct {
	mu    sync.Mutex
	items []Item
	done  chan struct{}
}

func collect(tb testing.TB, g *Gossip, f Filter) *collector {
	tb.Helper()
	s, err := g.Subscribe(f, 4096)
	if err != nil {
		tb.Fatal(err)
	}
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for it := range s.C() {
			c.mu.Lock()
			c.items = append(c.items, *it)
			c.mu.Unlock()
		}
	}()
	tb.Cleanup(func() { s.Cancel(); <-c.done })
	return c
}

func (c *collector) snapshot() []Item {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Item(nil), c.items...)
}

func (c *collector) count(pred func(Item) bool) int {
	n := 0
	for _, it := range c.snapshot() {
		if pred(it) {
			n++
		}
	}
	return n
}

func withID(id string) func(Item) bool {
	return func(it Item) bool { return it.Message != nil && it.Message.Envelope.MessageID == id }
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
