package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// meshPart is the part that joins the node to the mesh: discovery (the DHT: the agent's record,
// resolving agents, capability lookups), gossip (heartbeats and liveness, broadcasts,
// capability groups) and the broadcast queries asked over them (asks, its own lock). A part
// switched off is a do-nothing stand-in (meshparts.go). Gossip is set once, by start, behind
// an atomic pointer: streams served before then, and trust's goroutines, find offGossip and
// watch nobody. Discovery is set by start, before New returns. The followers of gossip items
// that start subscribes are loops (follow.go) its owner runs until its context ends; what
// they hear goes to the node through hooks, which the node sets before start.
type meshPart struct {
	g     atomic.Pointer[gossiper] // never nil: offGossip until start builds gossip
	disc  finder                   // offDiscovery unless start built discovery
	asks  askBook
	loops []func(context.Context) // the followers start subscribed, for the owner to run
	hooks meshHooks

	agentID string
	log     *slog.Logger
	now     func() time.Time
}

func newMeshPart(agentID string, log *slog.Logger, now func() time.Time) *meshPart {
	m := &meshPart{disc: offDiscovery{}, agentID: agentID, log: log, now: now, hooks: noHooks()}
	m.setGossip(offGossip{})
	return m
}

func (m *meshPart) gossip() gossiper     { return *m.g.Load() }
func (m *meshPart) setGossip(g gossiper) { m.g.Store(&g) }

// meshStart is what the mesh is built from: the node's host and identity, its configuration
// (the discovery, dht_*, gossip and heartbeat settings) and bootstrap peers.
type meshStart struct {
	host      host.Host
	key       crypto.PrivKey
	builder   *protocol.Builder
	cfg       *Config
	bootstrap []peer.AddrInfo
	manifest  func() protocol.Manifest
	// resolver takes discovery's resolver of agent ids (Node.AddResolver).
	resolver func(Resolver)
	// restore brings gossip's replay window back from the store and journals what it
	// delivers (journal.go); none without a store.
	restore []pubsub.Option
	// beats follows the beats of agents, for durable delivery's retries (heardBeat).
	beats bool
}

// start builds discovery and gossip as configured, subscribes the followers, and announces
// the agent's record. On error the caller closes what was built (close).
func (m *meshPart) start(s meshStart) error {
	var peerSource []pubsub.Option
	if s.cfg.Discovery {
		d, err := m.startDiscovery(s)
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		// Gossip, built below, takes discovery as its peer source.
		peerSource = append(peerSource, pubsub.WithPeerSource(d))
	}
	if s.cfg.Gossip {
		if err := m.startGossip(s, peerSource); err != nil {
			return fmt.Errorf("gossip: %w", err)
		}
	}
	// Discovery publishes the record once the node has joined the mesh.
	if err := m.disc.Announce(s.manifest()); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	return nil
}

func (m *meshPart) startDiscovery(s meshStart) (*discovery.Discovery, error) {
	c := s.cfg
	opts := []discovery.Option{
		discovery.WithBootstrapPeers(s.bootstrap),
		discovery.WithMDNS(c.MDNS),
		discovery.WithClock(c.Clock),
		discovery.WithLogger(m.log.With("subsystem", "discovery")),
		discovery.WithQuorum(c.DHTQuorum),
		discovery.WithBucketSize(c.DHTBucketSize),
		discovery.WithBackoff(c.BootstrapRetryMin, c.BootstrapRetryMax),
		discovery.WithHealthInterval(c.DHTHealthInterval),
	}
	if c.Seed != 0 {
		opts = append(opts, discovery.WithRand(rand.New(rand.NewPCG(c.Seed, 1))))
	}
	switch {
	case c.DHTClient || (c.NAT && c.Reachability == ReachPrivate):
		opts = append(opts, discovery.WithClientMode())
	case c.NAT && c.Reachability == ReachAuto:
		opts = append(opts, discovery.WithAutoMode(!presumedPrivate(s.host, s.bootstrap)))
	}
	opts = append(opts, c.DiscoveryOptions...)
	if c.Gossip {
		// Queries rank by the load gossip's heartbeats report.
		opts = append(opts, discovery.WithLoadSource(gossipLoad{m}))
	}
	d, err := discovery.New(s.host, s.key, opts...)
	if err != nil {
		return nil, err
	}
	m.disc = liveDiscovery{d}
	s.resolver(dhtResolver{d})
	return d, nil
}

func (m *meshPart) startGossip(s meshStart, extra []pubsub.Option) error {
	c := s.cfg
	opts := []pubsub.Option{
		pubsub.WithCapabilities(capabilities(c.Manifest)),
		pubsub.WithHeartbeatInterval(c.HeartbeatInterval),
		pubsub.WithSuspectAfter(c.SuspectAfter),
		pubsub.WithMeshBudget(c.MeshBudget),
		pubsub.WithConnLimit(c.ConnHigh),
		pubsub.WithLeaveFlush(c.LeaveFlush),
		pubsub.WithVersion(c.AgentVersion),
		pubsub.WithClock(c.Clock),
		pubsub.WithLogger(m.log.With("subsystem", "gossip")),
		pubsub.WithMaxAgents(c.MaxAgents),
		pubsub.WithVerifier(c.Verifier),
		pubsub.WithSeed(c.Seed),
	}
	opts = append(append(opts, s.restore...), extra...)
	g, err := pubsub.New(s.host, s.builder, append(opts, c.GossipOptions...)...)
	if err != nil {
		return err
	}
	m.setGossip(liveGossip{g})
	m.followAll(liveGossip{g}, s.beats)
	return nil
}

// leave announces a clean departure: draining, then offline heartbeats, and a final DHT
// record that says the agent left.
func (m *meshPart) leave(ctx context.Context) {
	g := m.gossip()
	if err := g.Drain(ctx); err != nil {
		m.log.Debug("draining heartbeat", "err", err.Error())
	}
	if err := m.disc.Leave(ctx); err != nil {
		m.log.Debug("leave record", "err", err.Error())
	}
	if err := g.Leave(ctx); err != nil {
		m.log.Debug("offline heartbeat", "err", err.Error())
	}
}

// close stops gossip and discovery.
func (m *meshPart) close() error { return errors.Join(m.gossip().Close(), m.disc.Close()) }

// watch tells gossip that this node deals with agentID on p, which it then probes directly
// and judges on its own heartbeat interval (pubsub.Gossip.Watch, docs/scale.md): every agent
// it exchanges a message with, and every agent discovery returns. A message that arrives
// while the node is starting, before its gossip runs, watches nobody.
func (m *meshPart) watch(agentID string, p peer.ID) { m.gossip().Watch(agentID, p) }

// publish broadcasts an event for trust (a new revocation list); nothing without gossip.
func (m *meshPart) publish(ctx context.Context, ev protocol.EventPayload) error {
	return m.gossip().publish(ctx, ev)
}

// forget drops an agent's liveness row on p for trust (its certificate was revoked).
func (m *meshPart) forget(agentID string, p peer.ID, why string) { m.gossip().Forget(agentID, p, why) }

// capabilities lists the manifest's tools, models and domains: the capability groups the
// agent joins.
func capabilities(mf protocol.Manifest) []string {
	var out []string
	out = append(out, mf.Tools...)
	out = append(out, mf.Models...)
	return append(out, mf.Domains...)
}

// gossipLoad is discovery's load source: the live load the gossip's heartbeats report.
type gossipLoad struct{ m *meshPart }

func (l gossipLoad) Load(agentID string) (load float64, alive bool, known bool) {
	return l.m.gossip().Load(agentID)
}

// dhtResolver resolves agent ids through the DHT's agent records.
type dhtResolver struct{ d *discovery.Discovery }

func (r dhtResolver) ResolveAgent(ctx context.Context, agentID string) (peer.AddrInfo, error) {
	rec, err := r.d.Resolve(ctx, agentID)
	if err != nil {
		return peer.AddrInfo{}, err
	}
	if rec.Left {
		return peer.AddrInfo{}, protocol.Errorf(protocol.CodeAgentNotFound, "agent %s left the mesh", agentID)
	}
	return peer.AddrInfo{ID: rec.PeerID, Addrs: rec.Addrs}, nil
}

// Unreachable drops discovery's cached record of agentID if it names p and was cached before
// since (CachingResolver).
func (r dhtResolver) Unreachable(agentID string, p peer.ID, since time.Time) bool {
	return r.d.Unreachable(agentID, p, since)
}

// subscribe subscribes to gossip's items that f selects, in a channel of buffer items
// (pubsub.DefaultBufferSize when 0 or less), converted as they come (Node.Subscribe).
func (m *meshPart) subscribe(f EventFilter, buffer int) (*Subscription, error) {
	if buffer <= 0 {
		buffer = pubsub.DefaultBufferSize
	}
	s := &Subscription{ch: make(chan *EventItem, buffer)}
	sub, err := m.gossip().SubscribeFunc(f.filter(), s.offer, func() { close(s.ch) })
	if err != nil {
		return nil, err
	}
	s.sub = sub
	return s, nil
}

// resolve finds an agent's record and watches the agent it names (Node.Resolve).
func (m *meshPart) resolve(ctx context.Context, agentID string) (Record, error) {
	r, err := m.disc.Resolve(ctx, agentID)
	if err == nil && !r.Left {
		m.watch(r.AgentID, r.PeerID)
	}
	return Record(r), err
}

// query runs a capability query and watches the agents it returns (Node.Query).
func (m *meshPart) query(ctx context.Context, q protocol.CapabilityQuery) ([]Match, error) {
	ms, err := m.disc.Query(ctx, q)
	for _, x := range ms {
		m.watch(x.Record.AgentID, x.Record.PeerID)
	}
	return matches(ms), err
}

// find looks up the providers of a capability and watches them (Node.FindByCapability).
func (m *meshPart) find(ctx context.Context, kind, name string) ([]Record, error) {
	rs, err := m.disc.FindByCapability(ctx, kind, name)
	for _, r := range rs {
		m.watch(r.AgentID, r.PeerID)
	}
	return records(rs), err
}

// stats are the mesh's counters for Node.Safety; zero for a part switched off.
func (m *meshPart) stats() (GossipHealth, GossipStats, DHTStoreStats) {
	g := m.gossip()
	return GossipHealth(g.Health()), GossipStats(g.Stats()), DHTStoreStats(m.disc.StoreStats())
}
