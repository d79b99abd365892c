package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
	directory, err := lru.New[string, peer.ID](cfg.MaxAgents)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		// go-log's bridge: the "logger" attribute names the subsystem whose level
		// logging.SetLogLevel("iacp", ...) controls.
		log = slog.New(logging.SlogHandler()).With("logger", "iacp")
	}
	log = log.With("agent", cfg.AgentID, "peer", h.ID().ShortString())
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg: cfg, host: h, key: key, builder: b, log: log, now: cfg.Clock,
		quiet:     quietlog.NewLogger(log, quietlog.New(0, 0, 0), cfg.Clock),
		limits:    protocol.Limits{MaxMessageBytes: cfg.MaxMessageBytes},
		replay:    protocol.NewReplayWindow(0),
		rate:      newRateLimiter(cfg.RatePerSecond, cfg.RateBurst, float64(cfg.RateBytesPerSecond), max(cfg.RateBytesPerSecond, cfg.MaxMessageBytes)),
		budget:    newQueueBudget(cfg.QueueStreamBytes, cfg.QueuePeerBytes, cfg.QueueTotalBytes),
		large:     make(chan struct{}, 1),
		audits:    newRefusalAudit(),
		journal:   newGossipJournal(),
		policy:    policy(cfg.Policy),
		started:   cfg.Clock(),
		slots:     make(chan struct{}, maxHandlers),
		handlers:  handlersOf(cfg),
		fallback:  cfg.OtherHandler,
		waiters:   make(map[string]*waiter),
		sessions:  make(map[peer.ID]*session),
		inbound:   make(map[*inStream]struct{}),
		directory: directory,
		needed:    make(map[peer.ID]*backoff),
		inbox:     newInbox(DefaultInboxBytes, int(cfg.InboxSenderBytes)),
		approvals: newApprovals(),
		mesh:      newMeshPart(cfg.AgentID, log, cfg.Clock),
		records:   noRecords{},
		ctx:       ctx,
		cancel:    cancel,
	}
	n.workers = workers.New(idleWorkers, &n.wg)
	n.cfg.Manifest.AgentID = cfg.AgentID
	if n.cfg.Manifest.Name == "" {
		n.cfg.Manifest.Name = cfg.AgentName
	}
	if n.cfg.Manifest.Version == "" {
		n.cfg.Manifest.Version = cfg.AgentVersion
	}
	n.status.Store(&protocol.HeartbeatPayload{Status: protocol.StatusAlive, Version: cfg.AgentVersion})
	for _, s := range cfg.Bootstrap {
		ai, err := ParseBootstrap(s)
		if err != nil {
			cancel()
			return nil, err
		}
		n.bootstrap = append(n.bootstrap, ai)
	}
	n.bootstrap = discovery.MergePeers(n.bootstrap, h.ID())
	for _, ai := range n.bootstrap {
		h.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Hour)
		n.needed[ai.ID] = &backoff{}
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
		n.closeDurable()
		n.trust.Close()
		return err
	}
	n.records = recordsOf(n.store)
	// The protocol is served before the mesh starts: the first connection (a bootstrap dial,
	// or a peer that queued messages while this node was down) may open a stream at once,
	// and a refused stream would push its sender's retry far into its backoff. What waits in
	// the store is read first: a message accepted from then on is handed over by its own
	// acceptance, and must not be offered a second time as pending.
	pending := n.pendingAtStart()
	h.SetStreamHandler(ProtocolID, n.handleStream)
	if err := n.startMesh(); err != nil {
		n.abandon()
		n.mesh.close()
		n.closeDurable()
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
	h.heardEvent, h.heard, h.learn, h.peerOf, h.request = n.trust.HeardEvent, n.trust.Heard, n.learn, n.directory.Peek, n.groupRequest
	if n.engine != nil {
		h.returned, h.beat = n.engine.AgentReturned, n.engine.AgentHeard
	}
	var restore []pubsub.Option
	if n.store != nil && n.cfg.Gossip {
		// The gossip window comes back from the store and every delivered id goes to it
		// (journal.go).
		seen, err := n.store.GossipSeen(n.now())
		if err != nil {
			return fmt.Errorf("gossip: restore its replay window: %w", err)
		}
		restore = []pubsub.Option{pubsub.WithReplayRestore(seen), pubsub.WithDeliveredHook(n.journal.add)}
	}
	return n.mesh.start(meshStart{host: n.host, key: n.key, builder: n.builder, cfg: &n.cfg, bootstrap: n.bootstrap,
		manifest: n.Manifest, resolver: n.AddResolver, restore: restore, beats: n.engine != nil})
}

// bootstrapPeers returns the bootstrap peers, one entry each and never the node
// (discovery.MergePeers made them so): those trust asks for the mesh authority when
// authority_node is not set.
func (n *Node) bootstrapPeers() []peer.ID {
	out := make([]peer.ID, 0, len(n.bootstrap))
	for _, ai := range n.bootstrap {
		out = append(out, ai.ID)
	}
	return out
}

// startTrust builds the trust part (docs/trust.md) over the node's host and settings: the mode,
// the bindings or certificates, and the protocols of the mesh authority. What it resolved (the
// mesh id, the authority's key on its node) goes back into the node's configuration.
func (n *Node) startTrust() error {
	c := &n.cfg
	t, err := trust.New(trust.Config{
		Host: n.host, Mode: c.Trust, AgentID: c.AgentID, Capabilities: capabilities(c.Manifest), DataDir: c.DataDir,
		Authority: c.Authority, Certificate: c.Certificate, MeshAuthority: c.MeshAuthority, AuthorityNode: c.AuthorityNode,
		Bootstrap: n.bootstrapPeers(), TokenIssuers: c.TokenIssuers, IntentPolicy: c.IntentPolicy, AllowlistFile: c.AllowlistFile,
		MaxPins: c.MaxPins, PinExpiry: c.PinExpiry, MaxAgents: c.MaxAgents, RevocationSync: c.revocationSync,
		Allow: func(p peer.ID) error { return n.rate.allow(p, n.now()) }, Track: n.tracked, Addrs: n.Addrs,
		Publish: n.mesh.publish, Forget: n.mesh.forget, Clock: c.Clock, Log: n.log,
	})
	if err != nil {
		return err
	}
	n.trust = t
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
