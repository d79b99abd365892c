package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	iacp "github.com/iacp-node/iacp-node/protocol"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	record "github.com/libp2p/go-libp2p-record"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	ma "github.com/multiformats/go-multiaddr"
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("discovery is closed")

// ErrNotPublished is returned by Leave when nothing was published.
var ErrNotPublished = errors.New("discovery published nothing")

// ErrNoRecord is wrapped by the AGENT_NOT_FOUND error of Resolve when the DHT answered that
// it holds no record of the agent: nobody published one, as opposed to a lookup that failed.
var ErrNoRecord = errors.New("the DHT holds no record of the agent")

// Discovery is one node's view of the mesh directory. It owns a Kademlia DHT, the bootstrap
// loop, the republish loop and (optionally) mDNS. Its goroutines are started by New and
// stopped by Close. Mutable state is guarded by mu (local agent, status, lifecycle), by the
// cache's own mutex and by the record store's (recs, the DHT's datastore); the DHT is safe for
// concurrent use.
type Discovery struct {
	h      host.Host
	key    crypto.PrivKey
	cfg    config
	log    *slog.Logger
	dht    *dht.IpfsDHT
	recs   *boundedStore // the DHT's datastore
	cache  *cache
	rand   *rand.Rand
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // asks the republish loop to publish now
	pubSem chan struct{} // holds one token per publish or Leave in progress: they never overlap

	shuffle *retry.Jitter // orders the peers Neighbours hands out; drawn from rand

	mu        sync.Mutex
	closed    bool
	mdns      interface{ Close() error }
	groups    map[string]groupPeers // CapabilityPeers' recent searches
	local     *localAgent
	served    []byte // the signed record last stored, answered by the direct record protocol
	servedSeq uint64
	boot      bootState

	closeOnce sync.Once
	closeErr  error
}

// localAgent is what Publish was given and what was last published.
type localAgent struct {
	manifest  iacp.Manifest
	seq       uint64
	published time.Time
	lastErr   error
	// placed is the routing table the record was last placed from; stale (publish it all
	// again) or misplaced (move the record under its agent key) is set when the mesh has since
	// grown so much that the peers now closest to the record's keys are likely others than
	// those that store it (see maybeStale).
	placed    placement
	stale     bool
	misplaced bool
	// addrs are the addresses the published record carries; a change of the host's makes
	// the record stale (addrsChanged).
	addrs []ma.Multiaddr
}

// New builds and starts a Discovery on host h. key must be h's Ed25519 private key: records
// are signed with it and validators check them against the peer id. The DHT is created (and,
// in server mode, answers queries) at once, and the bootstrap loop (with mDNS when enabled)
// and the republish loop begin; New returns without waiting for them, and Status tells how
// bootstrapping goes. Close stops what New began; the host stays the caller's. A New that
// fails closes what it built.
func New(h host.Host, key crypto.PrivKey, opts ...Option) (_ *Discovery, err error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("discovery options: %w", err)
	}
	if err := hostKey(h, key); err != nil {
		return nil, err
	}
	d := &Discovery{
		h: h, key: key, cfg: cfg,
		log:    cfg.logger.With("component", "discovery", "peer", h.ID().String()),
		recs:   newBoundedStore(h.ID(), cfg.now, cfg.maxStored, cfg.maxStoredBytes, cfg.maxStoredPeer),
		kick:   make(chan struct{}, 1),
		groups: map[string]groupPeers{},
		pubSem: make(chan struct{}, 1),
		rand:   cfg.rand,
	}
	d.cache = newCache(cfg.now, cfg.cacheTTL, cfg.cacheSize, d.validator(AgentNamespace)) // the owner rule decides
	if d.rand == nil {
		d.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	d.shuffle = retry.NewJitter(d.rand.Uint64()|1, 5)
	for _, ai := range MergePeers(cfg.bootstrap, h.ID()) {
		d.boot.peers = append(d.boot.peers, BootstrapPeerStatus{Peer: ai})
	}
	d.boot.dialing = make([]bool, len(d.boot.peers))
	d.boot.dialed = make(chan bool, len(d.boot.peers))
	d.dht, err = dht.New(h, append(d.dhtOptions(), cfg.dhtOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("discovery: start the DHT: %w", err)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	h.SetStreamHandler(d.recordProtocol(), d.handleRecordStream)
	if cfg.mdns {
		svc := mdns.NewMdnsService(h, mdnsServiceName(cfg.prefix), &mdnsNotifee{d: d})
		if err := svc.Start(); err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("discovery: start mDNS: %w (turn mDNS off with WithMDNS(false) if the network forbids multicast)", err)
		}
		d.mu.Lock()
		d.mdns = svc
		d.mu.Unlock()
	}
	r := rand.New(rand.NewPCG(d.rand.Uint64(), d.rand.Uint64())) // the loops run concurrently: one source each
	addrs := d.subscribeAddrs()
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.bootstrapLoop() }()
	go func() { defer d.wg.Done(); d.republishLoop(r, addrs) }()
	return d, nil
}

// hostKey checks that key is h's own Ed25519 identity key, which signs the agent records.
func hostKey(h host.Host, key crypto.PrivKey) error {
	if h == nil {
		return fmt.Errorf("discovery: host is nil")
	}
	if key == nil || key.Type() != crypto.Ed25519 {
		return fmt.Errorf("discovery: the key must be the host's Ed25519 private key")
	}
	if id, err := peer.IDFromPrivateKey(key); err != nil || id != h.ID() {
		return fmt.Errorf("discovery: the key is not the key of host %s; pass the host's own identity key", h.ID())
	}
	return nil
}

// dhtOptions are kad-dht's options for d: its mode (client, server, or following
// reachability), the mesh's protocol prefix, the agent-record validators, and the bounded
// record store.
func (d *Discovery) dhtOptions() []dht.Option {
	cfg := d.cfg
	mode := dht.ModeServer
	switch {
	case cfg.client:
		mode = dht.ModeClient
	case cfg.auto && cfg.unknownServes:
		mode = dht.ModeAutoServer
	case cfg.auto:
		mode = dht.ModeAuto
	}
	return []dht.Option{
		dht.Mode(mode),
		dht.BucketSize(cfg.bucketSize),
		dht.ProtocolPrefix(protocol.ID(cfg.prefix)),
		dht.Validator(record.NamespacedValidator{
			AgentNamespace: d.validator(AgentNamespace),
			PeerNamespace:  d.validator(PeerNamespace),
		}),
		// A record lives at most MaxRecordLifetime; stores need not keep it longer.
		dht.MaxRecordAge(MaxRecordLifetime),
		// Every record the DHT keeps for the mesh, bounded and charged to its owner.
		dht.Datastore(d.recs),
		dht.ProviderManagerOpts(records.Cache(noProviderCache{})),
	}
}

// validator is the record validator of namespace ns: the configured clock and certificate
// check, the local peer as Self.
func (d *Discovery) validator(ns string) Validator {
	return Validator{Namespace: ns, Now: d.cfg.now, CertCheck: d.cfg.certCheck, Self: d.h.ID()}
}

// DHT returns the underlying DHT, for the node's diagnostics (routing table, peers). Callers
// must not close it.
func (d *Discovery) DHT() *dht.IpfsDHT { return d.dht }

// StoreStats returns what the DHT's local record store holds (entries, bytes, owners) and what
// it evicted, refused and expired since New, for the node's metrics.
func (d *Discovery) StoreStats() StoreStats { return d.recs.Stats() }

// track counts a goroutine that Close must wait for, unless Discovery is closed; a true
// answer obliges the caller to call d.wg.Done when it returns.
func (d *Discovery) track() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	return true
}

func (d *Discovery) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close stops mDNS and the loops, waits for them, and closes the DHT. It does not publish a
// Left record (call Leave first for a clean shutdown) and does not close the host. It is safe
// to call twice.
func (d *Discovery) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		svc := d.mdns
		d.mu.Unlock()
		var errs []error
		if svc != nil {
			errs = append(errs, svc.Close())
		}
		d.h.RemoveStreamHandler(d.recordProtocol())
		d.cancel()
		d.wg.Wait()
		errs = append(errs, d.dht.Close())
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// mdnsServiceName derives the mDNS service name from the protocol prefix, so meshes with other
// prefixes do not find each other: "/iacp" gives "_iacp-discovery._udp".
func mdnsServiceName(prefix string) string {
	name := []byte(prefix[1:])
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			name[i] = '-'
		}
	}
	return "_" + string(name) + "-discovery._udp"
}

// mdnsNotifee connects to peers found on the local network; the DHT adds them to its routing
// table once identify completes.
type mdnsNotifee struct{ d *Discovery }

func (n *mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	d := n.d
	if ai.ID == d.h.ID() {
		return
	}
	if !d.track() {
		return
	}
	defer d.wg.Done()
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.connectTimeout)
	defer cancel()
	if err := d.h.Connect(ctx, ai); err != nil {
		d.log.Debug("mDNS peer did not answer", "remote", ai.ID.String(), "err", err)
		return
	}
	d.log.Info("mDNS found a peer on the local network", "remote", ai.ID.String())
}

// errNobodyAnswered is a put or provide whose DHT walk found no peer that answered it.
var errNobodyAnswered = errors.New("no peer took it: every peer the DHT walk asked failed to answer")

// answered runs op, a kad-dht put or provide, and returns errNobodyAnswered when op succeeded
// although no peer answered its walk: kad-dht stores with the peers that answered, and
// returns nil when that is nobody (every peer it asked failed), having stored nothing.
func answered(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	qctx, events := routing.RegisterForQueryEvents(ctx)
	heard := make(chan bool, 1)
	go func() { // ends when cancel closes events
		got := false
		for e := range events {
			got = got || e.Type == routing.PeerResponse
		}
		heard <- got
	}()
	err := op(qctx)
	cancel()
	if !<-heard && err == nil {
		return errNobodyAnswered
	}
	return err
}
