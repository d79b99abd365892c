package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// simNode is one slot of the cluster: a fixed identity and agent, and the running node when
// it is up.
type simNode struct {
	idx      int
	agentID  string
	key      crypto.PrivKey
	pid      peer.ID
	dir      string
	manifest protocol.Manifest
	caps     []CapabilityWeight
	delay    Range
	seed     uint64 // for the node's discovery backoff jitter

	// cert is the agent certificate it received when it joined by invitation (authority
	// mode, every node but 0, which holds the authority and certifies itself); kept across
	// restarts, as a deployed node keeps agent.cert.
	cert string

	listen   string     // loopback: the address it listened on first, kept across restarts
	nd       *node.Node // nil when down; guarded by cluster.mu
	bootAddr string     // its address, once started; guarded by cluster.mu
	sub      *node.Subscription
	obsDone  chan struct{}
}

// cluster holds the nodes of one run. The node table (simNode.nd, bootAddr, side) is
// guarded by mu; slots and identities are fixed after newCluster. rng is owned by the
// runner goroutine: steps run one at a time and draw their choices before starting any
// goroutine.
type cluster struct {
	sc    *Scenario
	rng   *rand.Rand
	log   *slog.Logger
	dir   string
	net   *mockNet // nil on loopback
	rec   *recorder
	start time.Time
	slots []*simNode
	ids   map[string]int // agent id -> slot
	// auth is the mesh authority (authority mode; nil when open), held by node 0, and
	// authKey its key, from which the trust step makes copies with another clock.
	auth    *authority.Authority
	authKey crypto.PrivKey
	// invited counts the nodes that joined by invitation (atomic: joins run in parallel).
	invited atomic.Int64
	// verifier is every node's signature verifier. Every node of the run verifies every
	// gossiped heartbeat: N nodes, N verifications of the same signed bytes. Its verification
	// cache makes that one verification per document (docs/sim.md, "Cost of one process");
	// forgeries never hit it. Its key cache decodes each sender's key once for all nodes.
	verifier *protocol.Verifier
	// certs is every node's cache of the certificates that verified: each node checks each
	// agent's certificate on first hearing it, N x N checks of N certificates, and with it
	// each certificate's signature is checked once per process (not charged by the cost
	// model, which charges the envelopes' signatures).
	certs *authority.CertCache
	// cpu is the CPU cost model of a virtual run (nil in real time or with the model off).
	cpu *cpuModel
	// ownCaches gives each node a verification cache of its own, as on separate machines
	// (BenchmarkCostModel measures what a node's checks cost so).
	ownCaches bool

	mu   sync.RWMutex
	side []int // partition side of each slot; all 0 when whole

	joinStart time.Time // when the last join, restart or heal began (runner goroutine)
	// sent counts what every node's streams wrote (mocknet only; see simHost).
	sent traffic
	// verified counts the signatures the nodes checked (each node its own, cached or not).
	verified atomic.Uint64
}

// agentIDOf is the agent id of slot i.
func agentIDOf(i int) string { return fmt.Sprintf("sim:mesh:agent%04d", i) }

func newCluster(sc *Scenario, log *slog.Logger) (_ *cluster, err error) {
	dir, err := os.MkdirTemp("", "iacp-sim-")
	if err != nil {
		return nil, fmt.Errorf("data directory for the nodes: %w", err)
	}
	c := &cluster{sc: sc, rng: rand.New(rand.NewPCG(sc.Seed, sc.Seed^0x5eed)), log: log, dir: dir,
		start: time.Now(), ids: map[string]int{}, side: make([]int, sc.Nodes),
		verifier: &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize), Verified: protocol.NewVerifyCache(verifyCacheSize)},
		certs:    authority.NewCertCache(2*sc.Nodes + 64)}
	c.rec = newRecorder(c.start)
	c.rec.healthy = c.healthy
	if sc.Network.Transport == TransportMocknet {
		c.net = newMockNet(sc.Network, c.rng.Uint64())
		c.net.reachable = c.reachable
	}
	for i := 0; i < sc.Nodes; i++ {
		// Keys come from the seeded source too, so that peer ids (and with them DHT
		// distances) are the same in every run of a seed.
		sk, _, err := crypto.GenerateEd25519Key(seededReader{c.rng})
		if err != nil {
			c.Close()
			return nil, err
		}
		pid, _ := peer.IDFromPrivateKey(sk)
		sn := &simNode{idx: i, agentID: agentIDOf(i), key: sk, pid: pid, dir: filepath.Join(dir, fmt.Sprint(i)),
			delay: sc.Agents.HandlerDelay, seed: c.rng.Uint64()}
		sn.caps = drawCapabilities(c.rng, sc.Agents)
		sn.manifest = manifestOf(sn)
		c.slots = append(c.slots, sn)
		c.ids[sn.agentID] = i
	}
	if sc.Virtual {
		pids := make([]peer.ID, len(c.slots))
		for i, sn := range c.slots {
			pids[i] = sn.pid
		}
		c.cpu = newCPUModel(sc.Cost.model(), pids)
		if c.net != nil && (c.cpu != nil || sc.Network.Tick > 0) {
			c.net.mn.SetSchedule(ticked(c.cpu, sc.Network.Tick.D()))
		}
	}
	if sc.Trust == node.TrustAuthority {
		// From a source of its own, so that the slots' keys and the script's draws are
		// those of open mode for the same seed.
		sk, _, err := crypto.GenerateEd25519Key(seededReader{rand.New(rand.NewPCG(sc.Seed, 0xa0707))})
		if err == nil {
			c.auth, err = authority.New(sk)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("mesh authority: %w", err)
		}
		c.authKey = sk
	}
	return c, nil
}

// seededReader turns the seeded source into the entropy of key generation.
type seededReader struct{ r *rand.Rand }

func (s seededReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(s.r.Uint32())
	}
	return len(p), nil
}

// healthy reports whether observer and subject both run and, if a partition is on, are on
// the same side: a suspicion between them is false.
func (c *cluster) healthy(observer, subject int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.slots[observer].nd != nil && c.slots[subject].nd != nil && c.side[observer] == c.side[subject]
}

// node returns slot i's running node, or nil.
func (c *cluster) node(i int) *node.Node {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.slots[i].nd
}

// up returns the slots whose node runs, in order.
func (c *cluster) up() []int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]int, 0, len(c.slots))
	for _, s := range c.slots {
		if s.nd != nil {
			out = append(out, s.idx)
		}
	}
	return out
}

// down returns the slots whose node does not run.
func (c *cluster) down() []int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []int
	for _, s := range c.slots {
		if s.nd == nil {
			out = append(out, s.idx)
		}
	}
	return out
}

func (c *cluster) gossipOn() bool { return c.sc.Node.Gossip == nil || *c.sc.Node.Gossip }

// bootstrapFor returns the bootstrap addresses node i starts with: the bootstrap slots that
// run, or, when none does, any node that runs.
func (c *cluster) bootstrapFor(i int) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for j := 0; j < c.sc.Node.BootstrapPeers; j++ {
		if s := c.slots[j]; j != i && s.nd != nil && s.bootAddr != "" {
			out = append(out, s.bootAddr)
		}
	}
	if len(out) == 0 {
		for _, s := range c.slots {
			if s.idx != i && s.nd != nil && s.bootAddr != "" {
				return []string{s.bootAddr}
			}
		}
	}
	return out
}

// options returns the node options of slot sn: the scenario's node configuration (NodeProfile
// with the scenario's node section), then the slot's agent, data directory, logger, bootstrap
// peers and trust.
func (c *cluster) options(sn *simNode) []node.Option {
	opts := []node.Option{
		node.WithConfig(c.sc.Node.nodeConfig(sn.seed)),
		node.WithAgent(sn.agentID, sn.manifest),
		node.WithDataDir(sn.dir),
		node.WithLogger(c.log.With("node", sn.idx)),
		node.WithBootstrap(c.bootstrapFor(sn.idx)...),
		node.WithVerifier(c.verifierFor(sn.pid)),
	}
	if !c.ownCaches {
		opts = append(opts, node.WithCertCache(c.certs))
	}
	opts = append(opts, agentHandlers(sn, c.rec)...)
	switch {
	case c.auth == nil:
		return append(opts, node.WithTrust(node.TrustOpen))
	case sn.idx == 0:
		return append(opts, node.WithMeshAuthority(c.auth))
	default:
		return append(opts, node.WithAuthority(c.auth.ID(), sn.cert))
	}
}

// startNode starts slot i's node (first start or restart) and links it to every running node
// on its side of any partition.
func (c *cluster) startNode(ctx context.Context, i int) (err error) {
	sn := c.slots[i]
	if c.node(i) != nil {
		return fmt.Errorf("node %d is already running", i)
	}
	if err := os.MkdirAll(sn.dir, 0o700); err != nil {
		return err
	}
	var inv *authority.Invite
	if c.auth != nil && i != 0 && sn.cert == "" {
		if inv, err = c.invite(fmt.Sprintf("node %d", i), sn.agentID); err != nil {
			return err
		}
	}
	var opts []node.Option
	if c.net != nil {
		h, err := c.net.addPeer(i, sn.key)
		if err != nil {
			return err
		}
		n := c.sc.Node
		sh, err := newSimHost(h, n.ConnLow, n.ConnHigh, n.ConnGrace.D(), &c.sent)
		if err != nil {
			_ = h.Close()
			c.net.forget(i)
			return err
		}
		defer func() {
			if err != nil {
				c.net.isolate(i)
				_ = sh.Close()
				c.net.forget(i)
			}
		}()
		if inv != nil {
			if err := c.join(ctx, sn, sh, *inv); err != nil {
				return err
			}
		}
		opts = append(c.options(sn), node.WithHost(sh, sn.key))
	} else {
		if inv != nil {
			if err := c.joinLoopback(ctx, sn, *inv); err != nil {
				return err
			}
		}
		// A restarted node listens where it did before, as a deployed node with a configured
		// port does; the first start takes a port the kernel picks.
		listen := sn.listen
		if listen == "" {
			listen = "/ip4/127.0.0.1/tcp/0"
		}
		opts = append(c.options(sn), node.WithKey(sn.key), node.WithListen(listen), node.WithNAT(false))
	}
	nd, err := node.New(opts...)
	if err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	return c.running(i, nd)
}

// running has the recorder observe the gossip of nd (which has slot i's agent's handlers,
// agentHandlers) and makes it the slot's running node.
func (c *cluster) running(i int, nd *node.Node) error {
	sn := c.slots[i]
	if nd.GossipOn() {
		sub, err := nd.Subscribe(node.EventFilter{Kinds: []node.EventKind{node.EventKindEvent, node.EventKindGroup, node.EventKindTransition}}, 4096)
		if err != nil {
			nd.Close()
			return fmt.Errorf("node %d: subscribe: %w", i, err)
		}
		sn.sub, sn.obsDone = sub, make(chan struct{})
		go c.observe(i, sub, sn.obsDone)
	}
	addr := ""
	if a := nd.Addrs(); len(a) > 0 {
		addr = a[0].String()
	}
	if c.net == nil && sn.listen == "" {
		if la := nd.ListenAddrs(); len(la) > 0 {
			sn.listen = la[0].String()
		}
	}
	c.mu.Lock()
	sn.nd, sn.bootAddr = nd, addr
	c.mu.Unlock()
	return nil
}

// reachable says whether slots i and j may link when one dials the other (both have a host:
// the mocknet checks): on the same side of any partition. An index beyond the slots (an
// intruder) links only where it was linked explicitly.
func (c *cluster) reachable(i, j int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return i < len(c.side) && j < len(c.side) && c.side[i] == c.side[j]
}

// stopNode stops slot i. A crash makes the node vanish without a word: on mocknet its links
// are cut and connections closed before the node is closed (so its goodbye reaches nobody);
// on loopback Node.Crash closes its host first. Otherwise it leaves cleanly (draining, offline).
func (c *cluster) stopNode(i int, crash bool) error {
	sn := c.slots[i]
	c.mu.Lock()
	nd := sn.nd
	sn.nd = nil // from now on, nobody picks it and its suspicion is expected
	c.mu.Unlock()
	if nd == nil {
		return fmt.Errorf("node %d is not running", i)
	}
	var err error
	switch {
	case crash && c.net != nil:
		c.net.isolate(i)
		err = nd.Close()
	case crash:
		err = nd.Crash()
	default:
		err = nd.Close()
	}
	if c.net != nil {
		c.net.isolate(i)
		c.net.forget(i)
	}
	if sn.sub != nil {
		<-sn.obsDone
		c.rec.addDropped(sn.sub.Dropped())
		sn.sub = nil
	}
	if crash && err != nil {
		// The host was pulled away first: errors from closing it again are expected.
		c.log.Debug("closing a crashed node", "node", i, "err", err.Error())
		err = nil
	}
	return err
}

// observe feeds slot i's gossip items to the recorder until the subscription ends.
func (c *cluster) observe(i int, sub *node.Subscription, done chan struct{}) {
	defer close(done)
	for it := range sub.C() {
		switch it.Kind {
		case node.EventKindEvent:
			c.rec.heard(it.Event.EventType, i, time.Now())
		case node.EventKindGroup:
			var ev protocol.EventPayload
			if it.Message != nil && protocol.DecodePayload(it.Message, &ev) == nil {
				c.rec.heard(ev.EventType, i, time.Now())
			}
		case node.EventKindTransition:
			subj, ok := c.ids[it.Transition.AgentID]
			if !ok {
				subj = -1
			}
			c.rec.transition(i, subj, it.Transition)
		}
	}
}

// closeParallel is how many nodes Close stops at once. On mocknet the mesh is cut first, so a
// node's close is mostly waiting (its goodbyes fail at once); on loopback it bounds the
// sockets closing together.
const closeParallel = 64

// Close stops every node and the network and removes the data directories. On mocknet the
// whole mesh is cut first, as in a crash of every node: nobody spends the teardown reacting
// to the others' departures.
func (c *cluster) Close() error {
	var errs []error
	if c.net != nil {
		c.net.isolateAll(closeParallel)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, closeParallel)
	for _, i := range c.up() {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := c.stopNode(i, true); err != nil {
				c.log.Debug("close", "node", i, "err", err.Error())
			}
		}()
	}
	wg.Wait()
	if c.net != nil {
		errs = append(errs, c.net.Close())
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}
