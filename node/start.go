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
	"github.com/iacp-node/iacp-node/internal/retry"
	"github.com/iacp-node/iacp-node/internal/workers"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
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
	trust, err := newTrustStore(cfg.DataDir, cfg.AllowlistFile, cfg.MaxPins, cfg.Clock)
	if err != nil {
		return nil, err
	}
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
		trust:     trust,
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
		jitter:    retry.NewJitter(cfg.Seed, 4),
		inbox:     newInbox(DefaultInboxBytes, int(cfg.InboxSenderBytes)),
		approvals: newApprovalBook(),
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
	if err := n.setupTrust(); err != nil {
		n.cancel()
		if n.certs != nil {
			h.RemoveStreamHandler(CertProtocolID)
			h.RemoveStreamHandler(JoinProtocolID)
			h.RemoveStreamHandler(AuthorityProtocolID)
		}
		return err
	}
	if err := n.openDurable(); err != nil {
		n.cancel()
		n.closeDurable()
		return err
	}
	// The protocol is served before the mesh starts: the first connection (a bootstrap dial,
	// or a peer that queued messages while this node was down) may open a stream at once,
	// and a refused stream would push its sender's retry far into its backoff. What waits in
	// the store is read first: a message accepted from then on is handed over by its own
	// acceptance, and must not be offered a second time as pending.
	pending := n.pendingAtStart()
	h.SetStreamHandler(ProtocolID, n.handleStream)
	if err := n.startMesh(); err != nil {
		n.abandon()
		n.closeMesh()
		n.closeDurable()
		return err
	}
	n.startDurable(pending)
	if n.gossip != nil {
		kinds := []pubsub.Kind{pubsub.KindTransition}
		if n.certs != nil {
			kinds = append(kinds, pubsub.KindEvent) // revocation lists (heardRevocations)
		}
		n.follow(kinds, "liveness transitions unavailable; agents are learnt from direct messages and the DHT only")
		if n.engine != nil {
			// Beats of recipients in backoff (heardBeat), on a subscription of their own: a
			// burst of beats fills it, never the one that carries transitions and revocations.
			n.follow([]pubsub.Kind{pubsub.KindHeartbeat}, "beats unavailable; recipients in backoff wait for it")
		}
	}
	n.startGroupRequests() // broadcast queries (askserve.go)
	n.wg.Add(1)
	go n.maintain()
	if n.certs != nil {
		n.wg.Add(1)
		go n.keepTrust()
	}
	return nil
}

// handlersOf returns the node's handler table, holding the handlers given with WithHandler.
func handlersOf(cfg Config) map[protocol.Intent]Handler {
	m := make(map[protocol.Intent]Handler, len(cfg.Handlers))
	maps.Copy(m, cfg.Handlers)
	return m
}
