package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/iacp-node/iacp-node/sim/internal/mocknet"
)

// mockNet is the in-memory network. Two nodes are linked when one first dials the other, if
// they may reach each other then (both have a host, and the cluster's reachable says so: the
// same side of any partition), not every pair up front: a mesh of 1000 nodes would hold half
// a million links, and a node dials a few hundred others at most. A pair's link has the
// scenario's bandwidth and latency; with jitter, the pair's latency is drawn from the seed and
// the pair, uniformly within Latency±Jitter, the same whenever the pair links again (delays
// differ between pairs, not from packet to packet). link allows a pair explicitly (an
// intruder, a test). The hosts, the explicit pairs and the flags are guarded by mu.
type mockNet struct {
	mn   mocknet.Mocknet
	spec NetworkSpec
	seed uint64

	mu        sync.Mutex
	hosts     map[int]host.Host
	slots     map[peer.ID]int     // the index of each peer that had a host
	explicit  map[[2]int]bool     // pairs link allowed, whatever reachable says
	reachable func(i, j int) bool // pairs that may link on a dial; nil: the explicit ones only
	closing   bool                // isolateAll: no more links
}

func newMockNet(spec NetworkSpec, seed uint64) *mockNet {
	mn := mocknet.New()
	mn.SetLinkDefaults(mocknet.LinkOptions{Latency: spec.Latency.D(), Bandwidth: spec.Bandwidth})
	m := &mockNet{mn: mn, spec: spec, seed: seed, hosts: map[int]host.Host{}, slots: map[peer.ID]int{}, explicit: map[[2]int]bool{}}
	mn.SetLinker(m.linker)
	return m
}

// mockAddr is node i's (fake) address on the mocknet.
func mockAddr(i int) ma.Multiaddr {
	return ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", (i>>16)&0xff, (i>>8)&0xff, i&0xff))
}

// addPeer creates node i's host (again, after a kill: mocknet replaces the old one).
func (m *mockNet) addPeer(i int, sk crypto.PrivKey) (host.Host, error) {
	h, err := m.mn.AddPeer(sk, mockAddr(i))
	if err != nil {
		return nil, fmt.Errorf("mocknet peer %d: %w", i, err)
	}
	m.mu.Lock()
	m.hosts[i], m.slots[h.ID()] = h, i
	m.mu.Unlock()
	return h, nil
}

func pairKey(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}

// linker is the mocknet's: a dial from a to b links them when both have a host, the network
// is not closing, and the pair is allowed (explicitly, or by reachable).
func (m *mockNet) linker(a, b peer.ID) (mocknet.LinkOptions, bool) {
	m.mu.Lock()
	i, iok := m.slots[a]
	j, jok := m.slots[b]
	_, iup := m.hosts[i]
	_, jup := m.hosts[j]
	ok := iok && jok && iup && jup && !m.closing
	explicit, reachable := m.explicit[pairKey(i, j)], m.reachable
	m.mu.Unlock()
	if !ok || !explicit && (reachable == nil || !reachable(i, j)) {
		return mocknet.LinkOptions{}, false
	}
	return mocknet.LinkOptions{Latency: m.latency(i, j), Bandwidth: m.spec.Bandwidth}, true
}

// latency is the one-way latency of the pair i, j: Latency, or with jitter a value drawn from
// the seed and the pair, uniformly within Latency±Jitter.
func (m *mockNet) latency(i, j int) time.Duration {
	jit := m.spec.Jitter.D()
	if jit <= 0 {
		return m.spec.Latency.D()
	}
	k := pairKey(i, j)
	r := rand.New(rand.NewPCG(m.seed, uint64(k[0])<<32|uint64(k[1])))
	return m.spec.Latency.D() - jit + time.Duration(r.Int64N(int64(2*jit)+1))
}

// link allows i and j to link whatever reachable says (they link when one dials the other).
func (m *mockNet) link(i, j int, _, _ peer.ID) error {
	m.mu.Lock()
	m.explicit[pairKey(i, j)] = true
	m.mu.Unlock()
	return nil
}

// cut removes the link between i and j and closes their connections: from now on neither
// can reach the other (as long as reachable says so), as after a cable is pulled.
func (m *mockNet) cut(i, j int, pj peer.ID) {
	m.mu.Lock()
	delete(m.explicit, pairKey(i, j))
	h := m.hosts[i]
	m.mu.Unlock()
	if h != nil {
		_ = m.mn.UnlinkPeers(h.ID(), pj)
		_ = h.Network().ClosePeer(pj)
	}
}

// isolate cuts every link of node i and closes its connections: a crash, as the rest of the
// mesh sees it. The caller then forgets i (no more links: it has no host).
func (m *mockNet) isolate(i int) {
	m.mu.Lock()
	h := m.hosts[i]
	m.mu.Unlock()
	if h == nil {
		return
	}
	m.mn.UnlinkPeer(h.ID())
	for _, p := range h.Network().Peers() {
		_ = h.Network().ClosePeer(p)
	}
}

// isolateAll cuts every link and closes every connection: the whole mesh crashes at once, and
// no link is made from then on. Closing the nodes one by one afterwards sends nothing and finds
// nothing to cut, where isolating each in turn would walk the link table once per node while
// the rest of the mesh kept reacting to each departure. The connections of width hosts close
// at a time.
func (m *mockNet) isolateAll(width int) {
	m.mu.Lock()
	m.closing = true
	hosts := make([]host.Host, 0, len(m.hosts))
	for _, h := range m.hosts {
		hosts = append(hosts, h)
	}
	m.mu.Unlock()
	m.mn.UnlinkAll()
	// Dials that passed mocknet's link check before the cut complete after it: close again
	// until none is left (no new dial can link).
	for range 10 {
		var wg sync.WaitGroup
		var closed atomic.Int64
		sem := make(chan struct{}, width)
		for _, h := range hosts {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				for _, c := range h.Network().Conns() {
					_ = c.Close()
					closed.Add(1)
				}
			})
		}
		wg.Wait()
		if closed.Load() == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// forget drops node i's host after it closed.
func (m *mockNet) forget(i int) {
	m.mu.Lock()
	delete(m.hosts, i)
	m.mu.Unlock()
}

// Close closes the mocknet (and any host still open).
func (m *mockNet) Close() error { return m.mn.Close() }

// simHost is a mocknet host as a deployed node's host would be: it has a connection manager
// (mocknet's hosts have none, so every connection a DHT walk opens would stay open, with its
// gossipsub and DHT streams, and a node's memory would grow with the mesh).
type simHost struct {
	host.Host
	cm *connmgr.BasicConnMgr
	// sent counts what this host's streams write (nil: not counted), shared by the hosts of a
	// run: what the nodes send each other, every protocol the node speaks (identify, which
	// the host runs itself, aside).
	sent *traffic

	closeOnce sync.Once
	closeErr  error
}

// newSimHost wraps h and gives it a connection manager with the given watermarks and grace
// period; h must not have a connection yet. Close closes both.
func newSimHost(h host.Host, low, high int, grace time.Duration, sent *traffic) (*simHost, error) {
	cm, err := connmgr.NewConnManager(low, high, connmgr.WithGracePeriod(grace))
	if err != nil {
		return nil, fmt.Errorf("connection manager: %w", err)
	}
	h.Network().Notify(cm.Notifee())
	return &simHost{Host: h, cm: cm, sent: sent}, nil
}

// ConnManager returns the host's connection manager, which the DHT, gossipsub and the node tag
// and protect peers with.
func (h *simHost) ConnManager() coreconnmgr.ConnManager { return h.cm }

// Close stops the connection manager, then closes the host (the order of libp2p's own hosts).
// Closing again returns the first result.
func (h *simHost) Close() error {
	h.closeOnce.Do(func() { h.closeErr = errors.Join(h.cm.Close(), h.Host.Close()) })
	return h.closeErr
}

// NewStream opens a stream as the host does, and refuses one that mocknet opened on a
// connection that closed meanwhile: mocknet does not check, and such a stream outlives its
// connection, carrying traffic across a cut link (gossip crossed partitions that way).
func (h *simHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	if s.Conn().IsClosed() {
		_ = s.Reset()
		return nil, fmt.Errorf("stream to %s: its connection closed: %w", p, network.ErrReset)
	}
	return h.counted(s), nil
}

// SetStreamHandler sets a handler as the host does, on streams whose writes are counted.
func (h *simHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, func(s network.Stream) { handler(h.counted(s)) })
}

// SetStreamHandlerMatch sets a handler as the host does, on streams whose writes are counted.
func (h *simHost) SetStreamHandlerMatch(pid protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, func(s network.Stream) { handler(h.counted(s)) })
}

func (h *simHost) counted(s network.Stream) network.Stream {
	if h.sent == nil {
		return s
	}
	return countedStream{Stream: s, sent: h.sent}
}

// traffic counts what the nodes' streams wrote: bytes and writes (messages, as the CPU cost
// model charges them).
type traffic struct {
	bytes, writes atomic.Uint64
}

// countedStream adds what it writes to sent.
type countedStream struct {
	network.Stream
	sent *traffic
}

func (s countedStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.sent.bytes.Add(uint64(n))
	s.sent.writes.Add(1)
	return n, err
}

// setSides partitions the cluster: side[i] for every slot. Links across sides are cut; on
// heal (all sides 0) every missing link between running nodes is restored.
func (c *cluster) setSides(side []int) error {
	if c.net == nil {
		return errors.New("partition and heal need transport mocknet: loopback sockets cannot be cut from inside the process")
	}
	c.mu.Lock()
	copy(c.side, side)
	var run []*simNode
	for _, s := range c.slots {
		if s.nd != nil {
			run = append(run, s)
		}
	}
	c.mu.Unlock()
	// Pairs across the cut lose their links and connections; pairs on one side (all of them,
	// on heal) link again when one dials the other.
	for a := 0; a < len(run); a++ {
		for b := a + 1; b < len(run); b++ {
			if i, j := run[a].idx, run[b].idx; side[i] != side[j] {
				c.net.cut(i, j, run[b].pid)
				c.net.cut(j, i, run[a].pid)
			}
		}
	}
	return nil
}
