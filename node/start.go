package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"time"

	logging "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/identity"
	"github.com/iacp-node/iacp-node/internal/quietlog"
	"github.com/iacp-node/iacp-node/internal/workers"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/trust"
)

// Building and starting a node (New): configure, newNode, start.

// configure applies opts over DefaultConfig, validates the result, and loads (or creates) the
// identity key unless one is given.
func configure(opts []Option) (Config, crypto.PrivKey, error) {
	cfg := DefaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return cfg, nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Key != nil {
		return cfg, cfg.Key, nil
	}
	if cfg.DataDir == "" {
		return cfg, nil, errors.New("no identity: set a data directory or a key")
	}
	key, _, err := identity.LoadOrCreate(filepath.Join(cfg.DataDir, KeyFile))
	if err != nil {
		return cfg, nil, fmt.Errorf("identity: %w", err)
	}
	return cfg, key, nil
}

// newNode builds the node's state over host h: nothing runs yet.
func newNode(cfg Config, key crypto.PrivKey, h host.Host, b *protocol.Builder) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		// go-log's bridge: the "logger" attribute names the subsystem whose level
		// logging.SetLogLevel("iacp", ...) controls.
		log = slog.New(errorsAsText{logging.SlogHandler()}).With("logger", "iacp")
	}
	log = log.With("agent", cfg.AgentID, "peer", h.ID().ShortString())
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, host: h, key: key, builder: b, log: log, now: cfg.Clock,
		started:   cfg.Clock(),
		inbox:     newInbox(DefaultInboxBytes, int(cfg.InboxSenderBytes)),
		approvals: newApprovals(),
		mesh:      newMeshPart(cfg.AgentID, log, cfg.Clock),
		ctx:       ctx,
		cancel:    cancel,
	}
	n.life.wg = &n.wg
	n.wire = &wire{Node: n,
		quiet:    quietlog.NewLogger(log, quietlog.New(0, 0, 0), cfg.Clock),
		limits:   protocol.Limits{MaxMessageBytes: cfg.MaxMessageBytes},
		replay:   protocol.NewReplayWindow(0),
		rate:     newRateLimiter(cfg.RatePerSecond, cfg.RateBurst, float64(cfg.RateBytesPerSecond), max(cfg.RateBytesPerSecond, cfg.MaxMessageBytes)),
		budget:   newQueueBudget(cfg.QueueStreamBytes, cfg.QueuePeerBytes, cfg.QueueTotalBytes),
		large:    make(chan struct{}, 1),
		audits:   newRefusalAudit(),
		policy:   policy(cfg.Policy),
		slots:    make(chan struct{}, maxHandlers),
		handlers: handlersOf(cfg),
		fallback: cfg.OtherHandler,
		waiters:  make(map[string]*waiter),
		sessions: make(map[peer.ID]*session),
		inbound:  make(map[*inStream]struct{}),
		workers:  workers.New(idleWorkers, &n.wg),
	}
	n.cfg.Manifest.AgentID = cfg.AgentID
	if n.cfg.Manifest.Name == "" {
		n.cfg.Manifest.Name = cfg.AgentName
	}
	if n.cfg.Manifest.Version == "" {
		n.cfg.Manifest.Version = cfg.AgentVersion
	}
	n.status.Store(&protocol.HeartbeatPayload{Status: protocol.StatusAlive, Version: cfg.AgentVersion})
	ps, err := newPeers(cfg, h, log)
	if err != nil {
		cancel()
		return nil, err
	}
	n.peers = ps
	for _, s := range cfg.Bootstrap {
		ai, err := ParseBootstrap(s)
		if err != nil {
			cancel()
			return nil, err
		}
		ps.bootstrap = append(ps.bootstrap, ai)
	}
	ps.bootstrap = discovery.MergePeers(ps.bootstrap, h.ID())
	for _, ai := range ps.bootstrap {
		h.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
		if !cfg.Discovery { // else discovery redials them while its table is small (docs/node.md)
			ps.need(ai.ID)
		}
	}
	return n, nil
}

// start brings the node up in order: trust, the store, the protocol, the mesh, durable
// delivery, then the background loops. On error what started is stopped again (the caller
// closes the host).
func (n *Node) start() error {
	h := n.host
	if err := n.startTrust(); err != nil {
		n.cancel()
		return err
	}
	if err := n.openDurable(); err != nil {
		n.cancel()
		n.trust.Close()
		return err
	}
	// The protocol is served before the mesh starts: the first connection (a bootstrap dial,
	// or a peer that queued messages while this node was down) may open a stream at once,
	// and a refused stream would push its sender's retry far into its backoff. What waits in
	// the store is read first: a message accepted from then on is handed over by its own
	// acceptance, and must not be offered a second time as pending.
	pending := n.durable.pending()
	h.SetStreamHandler(ProtocolID, n.wire.handleStream)
	if err := n.startMesh(); err != nil {
		n.abandon()
		n.mesh.close()
		n.durable.close()
		n.trust.Close()
		return err
	}
	n.startDurable(pending)
	for _, loop := range n.mesh.loops { // liveness, revocation lists, beats, group requests (follow.go)
		n.wg.Go(func() { loop(n.ctx) })
	}
	n.wg.Add(1)
	go n.maintain()
	return nil
}

// startMesh tells the mesh part what to do with what gossip hears (trust, the directory,
// durable delivery, the agent's group requests), then starts it over the node's host.
func (n *Node) startMesh() error {
	h := &n.mesh.hooks
	h.heardEvent, h.heard, h.learn, h.peerOf, h.request = n.trust.HeardEvent, n.trust.Heard, n.peers.learn, n.peers.directory.Peek, n.groupRequest
	h.returned, h.beat = n.durable.agentReturned, n.durable.agentHeard
	var restore []pubsub.Option
	if n.cfg.Gossip {
		// With durable delivery the gossip window comes back from the store and every
		// delivered id goes to it (journal.go).
		window, err := n.durable.gossipWindow()
		if err != nil {
			return fmt.Errorf("gossip: restore its replay window: %w", err)
		}
		restore = window
	}
	return n.mesh.start(meshStart{host: n.host, key: n.key, builder: n.builder, cfg: &n.cfg, bootstrap: n.peers.bootstrap,
		manifest: n.Manifest, resolver: n.AddResolver, restore: restore, beats: n.durable.on})
}

// startTrust builds the trust part (docs/trust.md) over the node's host and settings: the mode,
// the bindings or certificates, and the protocols of the mesh authority. What it resolved (the
// mesh id, the authority's key on its node) goes back into the node's configuration.
func (n *Node) startTrust() error {
	c := &n.cfg
	t, err := trust.New(trust.Config{
		Host: n.host, Mode: c.Trust, AgentID: c.AgentID, Capabilities: capabilities(c.Manifest), DataDir: c.DataDir,
		Authority: c.Authority, Certificate: c.Certificate, MeshAuthority: c.MeshAuthority, AuthorityNode: c.AuthorityNode,
		Bootstrap: n.peers.bootstrapIDs(), TokenIssuers: c.TokenIssuers, IntentPolicy: c.IntentPolicy, AllowlistFile: c.AllowlistFile,
		MaxPins: c.MaxPins, PinExpiry: c.PinExpiry, MaxAgents: c.MaxAgents, RevocationSync: c.revocationSync, Seed: c.Seed,
		Allow: func(p peer.ID) error { return n.wire.rate.allow(p, n.now()) }, Track: n.life.tracked, Addrs: n.Addrs,
		Publish: n.mesh.publish, Forget: n.mesh.forget, Clock: c.Clock, Log: n.log, CertCache: c.CertCache,
	})
	if err != nil {
		return err
	}
	n.trust = t
	n.peers.trust = t
	c.Trust, c.Authority, c.MeshAuthority = t.Mode(), t.MeshID(), t.MeshAuthority()
	if c.Trust == trust.Allowlist {
		c.Trust = trust.Open
	}
	c.DiscoveryOptions = append(c.DiscoveryOptions, t.DiscoveryOptions()...)
	c.GossipOptions = append(c.GossipOptions, t.GossipOptions()...)
	return nil
}

// handlersOf returns the node's handler table, holding the handlers given with WithHandler.
func handlersOf(cfg Config) map[protocol.Intent]Handler {
	m := make(map[protocol.Intent]Handler, len(cfg.Handlers))
	maps.Copy(m, cfg.Handlers)
	return m
}
