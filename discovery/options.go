package discovery

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/iacp-node/iacp-node/internal/retry"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Defaults. Every number is explained in docs/discovery.md ("Timings").
const (
	// DefaultProtocolPrefix keeps the mesh's DHT apart from the public IPFS DHT ("/ipfs").
	DefaultProtocolPrefix = "/iacp"
	// DefaultRecordTTL is how long a published record lives; it is republished at half.
	DefaultRecordTTL = time.Hour
	// DefaultCacheTTL is how long a lookup result is reused before the DHT is asked again.
	DefaultCacheTTL = time.Minute
	// DefaultCacheSize bounds the number of agents the directory cache holds.
	DefaultCacheSize = 10000
	// DefaultBackoffBase is the first wait after a bootstrap round in which no peer answered.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax caps the bootstrap backoff.
	DefaultBackoffMax = time.Minute
	// DefaultHealthInterval is how often a bootstrapped node checks its routing table (and
	// retries bootstrap peers that did not answer).
	DefaultHealthInterval = time.Minute
	// DefaultConnectTimeout bounds one dial of one bootstrap peer.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultQuorum is how many DHT peers must answer a record lookup before the best (highest
	// seq) record is taken.
	DefaultQuorum = 3
	// DefaultBucketSize is Kademlia's k, kad-dht's default: the peers per routing-table bucket
	// and per lookup answer.
	DefaultBucketSize = 20
	// DefaultMaxProviders bounds the providers collected per capability lookup.
	DefaultMaxProviders = 100
	// DefaultFetchParallelism bounds concurrent record fetches of one query.
	DefaultFetchParallelism = 16
	// DefaultDirectFetchTimeout bounds one direct record fetch from a provider (dial, stream,
	// read); when it fails the record is looked up in the DHT instead.
	DefaultDirectFetchTimeout = 2 * time.Second
	// DefaultMaxStoredRecords bounds the records the DHT stores for others (agent, peer and
	// provider records). A node stores on average 20 x (2 + capabilities) records, whatever
	// the mesh's size; a capability that all N agents provide puts N provider records on each
	// of the 20 nodes closest to it. 100,000 holds that for 10 such capabilities landing on
	// one node of a 10,000-agent mesh.
	DefaultMaxStoredRecords = 100_000
	// DefaultMaxStoredBytes bounds the bytes those records are charged (key, value and
	// StoreEntryOverhead each), so it bounds their memory: 100,000 provider records are
	// charged about 65 MB; the rest holds about 25,000 agent records of 2 KiB, or 1,000 of the
	// largest (64 KiB), where an honest node holds about 40 on average.
	DefaultMaxStoredBytes = 128 << 20
	// DefaultMaxStoredPerPeer bounds the records charged to one peer: an honest peer has 2
	// agent records (agent and peer key) and one provider record per capability, and one node
	// holds all of them only in a mesh of fewer than 20 nodes; 128 leaves room for an agent
	// that advertises 126 capabilities. A peer signing records for many agent ids, or
	// providing many keys, keeps its newest 128.
	DefaultMaxStoredPerPeer = 128
)

// Option configures a Discovery.
type Option func(*config) error

type config struct {
	bootstrap      []peer.AddrInfo
	prefix         string
	client         bool
	auto           bool
	unknownServes  bool
	recordTTL      time.Duration
	cacheTTL       time.Duration
	cacheSize      int
	mdns           bool
	load           LoadSource
	now            func() time.Time
	rand           *rand.Rand
	logger         *slog.Logger
	backoff        retry.Backoff // of bootstrap rounds and record publishes
	healthInterval time.Duration
	connectTimeout time.Duration
	quorum         int
	maxProviders   int
	directTimeout  time.Duration
	maxStored      int
	maxStoredBytes int64
	maxStoredPeer  int
	dhtOpts        []dht.Option
	bucketSize     int
	certCheck      func(cert, agentID string, p peer.ID) error
	cert           func() string
}

func defaults() config {
	return config{
		prefix:         DefaultProtocolPrefix,
		recordTTL:      DefaultRecordTTL,
		cacheTTL:       DefaultCacheTTL,
		cacheSize:      DefaultCacheSize,
		now:            time.Now,
		logger:         slog.Default(),
		backoff:        retry.Backoff{Min: DefaultBackoffBase, Max: DefaultBackoffMax},
		healthInterval: DefaultHealthInterval,
		connectTimeout: DefaultConnectTimeout,
		quorum:         DefaultQuorum,
		bucketSize:     DefaultBucketSize,
		maxProviders:   DefaultMaxProviders,
		directTimeout:  DefaultDirectFetchTimeout,
		maxStored:      DefaultMaxStoredRecords,
		maxStoredBytes: DefaultMaxStoredBytes,
		maxStoredPeer:  DefaultMaxStoredPerPeer,
	}
}

func (c *config) validate() error {
	switch {
	case !strings.HasPrefix(c.prefix, "/") || len(c.prefix) < 2 || strings.HasSuffix(c.prefix, "/"):
		return fmt.Errorf("protocol prefix %q must look like \"/name\"", c.prefix)
	case c.prefix == "/ipfs":
		return fmt.Errorf("protocol prefix /ipfs would join the public IPFS DHT; choose a private prefix such as %q", DefaultProtocolPrefix)
	case c.recordTTL < time.Minute || c.recordTTL > MaxRecordLifetime:
		return fmt.Errorf("record TTL %s must be between 1m and %s", c.recordTTL, MaxRecordLifetime)
	case c.cacheTTL < 0 || c.cacheTTL > c.recordTTL:
		return fmt.Errorf("cache TTL %s must be between 0 (no cache) and the record TTL %s", c.cacheTTL, c.recordTTL)
	case c.cacheSize < 1:
		return fmt.Errorf("cache size %d must be at least 1", c.cacheSize)
	case c.backoff.Min <= 0 || c.backoff.Max < c.backoff.Min:
		return fmt.Errorf("bootstrap backoff %s..%s: the base must be positive and not above the maximum", c.backoff.Min, c.backoff.Max)
	case c.healthInterval <= 0:
		return fmt.Errorf("health interval %s must be positive", c.healthInterval)
	case c.connectTimeout <= 0:
		return fmt.Errorf("connect timeout %s must be positive", c.connectTimeout)
	case c.quorum < 0 || c.quorum > 20:
		return fmt.Errorf("quorum %d must be between 0 (complete every lookup) and 20", c.quorum)
	case c.maxProviders < 1:
		return fmt.Errorf("max providers %d must be at least 1", c.maxProviders)
	case c.directTimeout < 0 || c.directTimeout > time.Minute:
		return fmt.Errorf("direct fetch timeout %s must be between 0 (off) and 1m", c.directTimeout)
	case c.maxStored < minStoredRecords:
		return fmt.Errorf("max stored records %d must be at least %d", c.maxStored, minStoredRecords)
	case c.maxStoredBytes < minStoredBytes:
		return fmt.Errorf("max stored bytes %d must be at least %d (16 records of the largest size, %d bytes)", c.maxStoredBytes, minStoredBytes, MaxRecordBytes)
	case c.maxStoredPeer < minStoredPerPeer || c.maxStoredPeer > c.maxStored:
		return fmt.Errorf("max stored per peer %d must be between %d and max stored records (%d)", c.maxStoredPeer, minStoredPerPeer, c.maxStored)
	case c.now == nil || c.logger == nil:
		return fmt.Errorf("clock and logger must not be nil")
	}
	for _, ai := range c.bootstrap {
		if ai.ID == "" {
			return fmt.Errorf("a bootstrap peer has no peer id; give full multiaddrs ending in /p2p/<peer id>")
		}
	}
	return nil
}

// WithBootstrapPeers sets the peers the node joins the mesh through. Default: none (the node
// waits to be contacted, as the first bootstrap peer of a mesh does).
func WithBootstrapPeers(peers []peer.AddrInfo) Option {
	return func(c *config) error { c.bootstrap = append([]peer.AddrInfo(nil), peers...); return nil }
}

// WithProtocolPrefix sets the DHT protocol prefix. Default "/iacp"; "/ipfs" is refused.
func WithProtocolPrefix(prefix string) Option {
	return func(c *config) error { c.prefix = prefix; return nil }
}

// WithClientMode makes the DHT a client: it queries but stores and serves nothing. Default:
// server mode.
func WithClientMode() Option { return func(c *config) error { c.client = true; return nil } }

// WithAutoMode lets the host's reachability choose the DHT's mode: a server while AutoNAT
// finds the node public, a client while it finds it private (peers could not dial it to
// query it), and while it is unknown, a server if unknownServes (kad-dht's ModeAutoServer),
// else a client (ModeAuto). WithClientMode wins over it. Default: server mode.
func WithAutoMode(unknownServes bool) Option {
	return func(c *config) error { c.auto, c.unknownServes = true, unknownServes; return nil }
}

// WithRecordTTL sets how long published records live (1m..24h, default 1h); they are
// republished at half of it.
func WithRecordTTL(d time.Duration) Option {
	return func(c *config) error { c.recordTTL = d; return nil }
}

// WithCacheTTL sets how long lookup results are reused (0 disables the cache; at most the
// record TTL; default 1m).
func WithCacheTTL(d time.Duration) Option {
	return func(c *config) error { c.cacheTTL = d; return nil }
}

// WithCacheSize bounds the agents held by the directory cache (default 10000).
func WithCacheSize(n int) Option { return func(c *config) error { c.cacheSize = n; return nil } }

// WithMDNS turns mDNS discovery of peers on the local network on or off (default off).
func WithMDNS(on bool) Option { return func(c *config) error { c.mdns = on; return nil } }

// WithLoadSource sets where Query reads live load (see LoadSource). Default: none, every load
// is unknown. A source that exists only after the Discovery (the node's gossip, which takes
// the Discovery as its peer source) is passed as one that looks it up when asked.
func WithLoadSource(s LoadSource) Option { return func(c *config) error { c.load = s; return nil } }

// WithClock sets the clock used for record sequence numbers, expiry and the cache. Default
// time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) error { c.now = now; return nil } }

// WithRand sets the random source of the bootstrap backoff jitter; it is used by the bootstrap
// goroutine only. Default: a source seeded by the runtime.
func WithRand(r *rand.Rand) Option { return func(c *config) error { c.rand = r; return nil } }

// WithLogger sets the logger; every line is tagged with the local peer id. Default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) error { c.logger = l; return nil } }

// WithBackoff sets the bootstrap backoff: the first wait and the cap (default 1s and 1m).
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) error { c.backoff = retry.Backoff{Min: base, Max: max}; return nil }
}

// WithHealthInterval sets how often a bootstrapped node checks its routing table and retries
// bootstrap peers that are not connected (default 1m).
func WithHealthInterval(d time.Duration) Option {
	return func(c *config) error { c.healthInterval = d; return nil }
}

// WithConnectTimeout bounds one dial of a bootstrap peer (default 10s).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) error { c.connectTimeout = d; return nil }
}

// WithQuorum sets how many DHT peers must answer a record lookup before the highest-seq record
// among the answers is taken (0 completes every lookup; default 3).
func WithQuorum(n int) Option { return func(c *config) error { c.quorum = n; return nil } }

// WithMaxProviders bounds the providers collected per capability lookup (default 100).
func WithMaxProviders(n int) Option { return func(c *config) error { c.maxProviders = n; return nil } }

// WithDirectFetchTimeout bounds one direct record fetch from a capability provider over the
// direct record protocol (default 2s); 0 turns direct fetches off, so every provider record is
// looked up in the DHT. The node always answers direct fetches.
func WithDirectFetchTimeout(d time.Duration) Option {
	return func(c *config) error { c.directTimeout = d; return nil }
}

// Lower bounds of the store options.
const (
	// minStoredRecords: the local node's own records (2 and one per capability) and a few
	// peers' must fit.
	minStoredRecords = 100
	// minStoredBytes: 16 records of the largest size (MaxRecordBytes).
	minStoredBytes = 16 * (MaxRecordBytes + StoreEntryOverhead)
	// minStoredPerPeer: a peer's agent and peer records and one capability.
	minStoredPerPeer = 3
)

// WithMaxStoredRecords bounds the records the DHT keeps for the mesh: agent and peer records
// and capability provider records, the local node's own included (default 100,000; at least
// 100). When a put would exceed it, the peer that holds the most records loses its oldest
// (see docs/discovery.md, "Record store"); the local node's records are never evicted.
func WithMaxStoredRecords(n int) Option {
	return func(c *config) error { c.maxStored = n; return nil }
}

// WithMaxStoredBytes bounds the bytes the DHT's records are charged: key, value and
// StoreEntryOverhead each (default 128 MiB; at least 16 records of MaxRecordBytes). When a
// put would exceed it, the peer charged the most bytes loses its oldest record.
func WithMaxStoredBytes(n int64) Option {
	return func(c *config) error { c.maxStoredBytes = n; return nil }
}

// WithMaxStoredPerPeer bounds the records charged to one peer: the signer of an agent or peer
// record, the provider of a provider record (default 128; 3 up to WithMaxStoredRecords). A
// put beyond it evicts that peer's oldest record, never another peer's. The local node has no
// quota.
func WithMaxStoredPerPeer(n int) Option {
	return func(c *config) error { c.maxStoredPeer = n; return nil }
}

// WithCertCheck puts the mesh in authority mode: check verifies an agent certificate and returns
// nil only if cert is valid and binds agentID to peer p. Every record the DHT stores or a
// lookup accepts (agent and peer records, Left records included, and direct fetches) must then
// carry a certificate check accepts, and among such records the highest seq wins whichever
// peer signed it (see docs/discovery.md, "Who may replace a record"). The local node's records
// need one too: see WithCertificate. Default nil: open mode, no certificate is required and one
// present is ignored.
func WithCertCheck(check func(cert, agentID string, p peer.ID) error) Option {
	return func(c *config) error { c.certCheck = check; return nil }
}

// WithCertificate sets where the local node's records get their certificate: cert is called at
// each publish and Leave, and what it returns (at most MaxCertBytes; "" for none) goes into the
// signed record's Cert, so a renewed certificate goes out with the next republish. Default:
// records carry no certificate, which a node with WithCertCheck refuses.
func WithCertificate(cert func() string) Option {
	return func(c *config) error { c.cert = cert; return nil }
}

// WithBucketSize sets Kademlia's k, the peers per routing-table bucket and per lookup answer
// (default DefaultBucketSize, 2 to 100).
func WithBucketSize(k int) Option {
	return func(c *config) error {
		if k < 2 || k > 100 {
			return fmt.Errorf("discovery: bucket size %d is outside 2..100", k)
		}
		c.bucketSize = k
		return nil
	}
}

// WithDHTOptions passes extra options to dht.New, after this package's own (mode, prefix,
// validators, the bounded record store and its provider cache). For tuning and tests; the
// defaults need none. A dht.Datastore, dht.ValueDatastore, dht.ProviderDatastore or
// dht.ProviderManagerOpts given here replaces this package's bounded store (or the setting
// that keeps kad-dht's provider cache empty), and the store options then bound nothing.
func WithDHTOptions(opts ...dht.Option) Option {
	return func(c *config) error { c.dhtOpts = append(c.dhtOpts, opts...); return nil }
}
