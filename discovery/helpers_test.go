package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/internal/testsupport"
	"github.com/iacp-node/iacp-node/protocol"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// mesh is n mocknet hosts, all linked, each with a Discovery; the first nBoot are the bootstrap
// peers of the others (and of each other).
type mesh struct {
	mn    *testsupport.Net
	hosts []host.Host
	keys  []crypto.PrivKey
	ds    []*Discovery
	boot  []peer.AddrInfo
}

var quiet = slog.New(slog.DiscardHandler)

// hostPort is the port of host 0's mocknet address; host i has hostPort+i.
const hostPort = 20000

func newMesh(tb testing.TB, n, nBoot int, opts ...Option) *mesh {
	tb.Helper()
	return newMeshWith(tb, n, nBoot, nil, opts...)
}

// newMeshWith is newMesh with node i also given perNode(i, its peer id), when perNode is set.
func newMeshWith(tb testing.TB, n, nBoot int, perNode func(i int, id peer.ID) []Option, opts ...Option) *mesh {
	tb.Helper()
	net := testsupport.Mocknet(tb, n, testsupport.FirstPort(hostPort), testsupport.LinkOnly())
	m := &mesh{mn: net, hosts: net.Hosts, keys: net.Keys}
	tb.Cleanup(func() { m.close() })
	for i := range nBoot {
		m.boot = append(m.boot, peer.AddrInfo{ID: m.hosts[i].ID(), Addrs: m.hosts[i].Addrs()})
	}
	for i, h := range m.hosts {
		o := append([]Option{WithLogger(quiet), WithBootstrapPeers(m.boot), WithBackoff(5*time.Millisecond, 50*time.Millisecond)}, opts...)
		if perNode != nil {
			o = append(o, perNode(i, h.ID())...)
		}
		d, err := New(h, m.keys[i], o...)
		if err != nil {
			tb.Fatal(err)
		}
		m.ds = append(m.ds, d)
	}
	return m
}

// waitJoined waits until every Discovery (each started by New) has joined and settled (its
// routing table refreshed since), so that its lookups are cached.
func (m *mesh) waitJoined(tb testing.TB) {
	tb.Helper()
	for i, d := range m.ds {
		testsupport.WaitFor(tb, 30*time.Second, fmt.Sprintf("node %d joined", i), func() bool {
			s := d.Status()
			return s.Bootstrapped && s.RoutingTableSize > 0 && d.settled()
		})
	}
}

// publishAll publishes manifestFor(i) on every node, a few at a time.
func (m *mesh) publishAll(tb testing.TB, ctx context.Context) {
	tb.Helper()
	m.parallel(tb, 8, len(m.ds), func(i int) error { return m.ds[i].Publish(ctx, manifestFor(i)) })
}

// publish publishes manifestFor(i) on each of nodes, in turn.
func (m *mesh) publish(tb testing.TB, ctx context.Context, nodes ...int) {
	tb.Helper()
	for _, i := range nodes {
		if err := m.ds[i].Publish(ctx, manifestFor(i)); err != nil {
			tb.Fatalf("publish on node %d: %v", i, err)
		}
	}
}

// parallel runs f(0..n-1) with at most width at a time and fails on the first error.
func (m *mesh) parallel(tb testing.TB, width, n int, f func(i int) error) {
	tb.Helper()
	sem := make(chan struct{}, width)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() { defer func() { <-sem }(); errs[i] = f(i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("item %d: %v", i, err)
		}
	}
}

func (m *mesh) close() {
	for _, d := range m.ds {
		_ = d.Close()
	}
	_ = m.mn.Close()
}

func agentID(i int) string { return fmt.Sprintf("test:n%03d:agent", i) }

// manifestFor gives agent i a spread of capabilities: every agent has the terminal tool; even
// ones web; every third one browser; every fourth one the llama3 model; every fifth one the
// security domain; odd ones compliance. Even ones are on-prem, odd ones cloud.
func manifestFor(i int) protocol.Manifest {
	m := protocol.Manifest{AgentID: agentID(i), Tools: []string{"terminal"}, Deployment: "cloud", Version: "1.0.0"}
	if i%2 == 0 {
		m.Tools = append(m.Tools, "web")
		m.Deployment = "on-prem"
	}
	if i%3 == 0 {
		m.Tools = append(m.Tools, "browser")
	}
	if i%4 == 0 {
		m.Models = append(m.Models, "llama3")
	}
	if i%5 == 0 {
		m.Domains = append(m.Domains, "security")
	}
	if i%2 == 1 {
		m.Domains = append(m.Domains, "compliance")
	}
	return m
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// loads is a LoadSource backed by a map; a missing agent is unknown.
type loads map[string]struct {
	load  float64
	alive bool
}

func (l loads) Load(id string) (float64, bool, bool) {
	v, ok := l[id]
	return v.load, v.alive, ok
}

// isolate cuts every mocknet link and connection of a host, as if it were switched off.
func (m *mesh) isolate(id peer.ID) {
	for _, p := range m.mn.Peers() {
		if p != id {
			_ = m.mn.DisconnectPeers(id, p)
			_ = m.mn.UnlinkPeers(id, p)
		}
	}
}

// linkTo links a new host to every other host except those in skip.
func (m *mesh) linkTo(tb testing.TB, id peer.ID, skip ...peer.ID) {
	tb.Helper()
	for _, p := range m.mn.Peers() {
		ok := p != id
		for _, s := range skip {
			ok = ok && p != s
		}
		if ok {
			if _, err := m.mn.LinkPeers(id, p); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// addAttacker joins a hostile DHT server to the mesh: it stores whatever it is given (its
// validator accepts everything), so tests can plant forged records and see what honest nodes
// make of them. It returns the server, its host and its key; the server closes with the test.
func (m *mesh) addAttacker(t *testing.T, ctx context.Context) (*dht.IpfsDHT, host.Host, crypto.PrivKey) {
	t.Helper()
	h, sk := m.mn.AddHost(t, hostPort+99)
	if err := m.mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	evil, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix("/iacp"),
		dht.Validator(record.NamespacedValidator{AgentNamespace: acceptAll{}, PeerNamespace: acceptAll{}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evil.Close() })
	if err := h.Connect(ctx, peer.AddrInfo{ID: m.hosts[0].ID(), Addrs: m.hosts[0].Addrs()}); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 10*time.Second, "attacker routing table", func() bool { return evil.RoutingTable().Size() > 0 })
	if err := <-evil.RefreshRoutingTable(); err != nil {
		t.Logf("attacker refresh: %v", err)
	}
	return evil, h, sk
}
