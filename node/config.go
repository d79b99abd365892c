package node

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
)

// Config is everything a node can be told. DefaultConfig holds the defaults and Validate the
// allowed ranges; New applies its options over DefaultConfig, then Validate. The YAML tags
// are the keys of the config file, which `iacp-node init` writes with every one of them at
// its default (docs/node.md lists them); fields tagged "-" are for programs only.
type Config struct {
	// DataDir holds the identity key, trust pins and (with durable delivery) the store.
	// Default DefaultDataDir. `iacp-node run` takes it from --data-dir, never from the config
	// file, which lives in it.
	DataDir string `yaml:"data_dir"`

	// AgentID is the agent this node serves, namespace:host:name.
	AgentID string `yaml:"agent_id"`
	// AgentName and AgentVersion describe the agent in its manifest and heartbeats.
	AgentName    string `yaml:"agent_name"`
	AgentVersion string `yaml:"agent_version"`
	// Manifest is the agent's capability manifest; its agent_id is set to AgentID.
	Manifest protocol.Manifest `yaml:"manifest"`

	// ListenAddrs are libp2p multiaddrs. Default: TCP and QUIC on every interface, port 0
	// (the kernel picks); set a fixed port for a bootstrap node.
	ListenAddrs []string `yaml:"listen"`
	// Bootstrap peers, multiaddrs with /p2p/<peer id>.
	Bootstrap []string `yaml:"bootstrap"`
	// NAT switches on NAT traversal (docs/node.md, "NAT traversal"): AutoNAT v1 and v2,
	// relay reservations while not known public, DCUtR hole punching, and no private
	// addresses advertised once the node has a public or relay one. Default true.
	NAT bool `yaml:"nat"`
	// Reachability is "auto" (AutoNAT finds out; the DHT serves only once the node is found
	// public), "public" (a bootstrap node or relay: it serves at once) or "private" (behind a
	// NAT: relays and a client DHT from the start). Needs nat. Default auto.
	Reachability string `yaml:"reachability"`
	// Relay serves circuit relay v2 to nodes behind NATs once this node is public; each
	// relayed connection carries at most RelayLimitBytes each way for RelayLimitDuration.
	// Defaults false, 128 KiB and 2 min (go-libp2p's).
	Relay              bool          `yaml:"relay"`
	RelayLimitBytes    int64         `yaml:"relay_limit_bytes"`
	RelayLimitDuration time.Duration `yaml:"relay_limit_duration"`

	// ConnLow and ConnHigh are the connection manager's watermarks: above High it trims to
	// Low, sparing connections younger than ConnGrace. Defaults 64, 192, 1 m.
	ConnLow   int           `yaml:"conn_low"`
	ConnHigh  int           `yaml:"conn_high"`
	ConnGrace time.Duration `yaml:"conn_grace"`
	// ResourceMemory and ResourceFDs scale the libp2p resource manager's limits. Defaults
	// 512 MiB and 1024 descriptors.
	ResourceMemory int64 `yaml:"resource_memory"`
	ResourceFDs    int   `yaml:"resource_fds"`

	// MaxMessageBytes bounds one frame on /iacp/1.0.0. Default 16 MiB (IaCP 1.0 section 10).
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// DefaultTTL is the ttl_seconds of messages this node builds. Default 1 h.
	DefaultTTL time.Duration `yaml:"default_ttl"`
	// FrameTimeout bounds each frame read or write once it has started, and every dial.
	// Default 10 s.
	FrameTimeout time.Duration `yaml:"frame_timeout"`
	// IdleTimeout closes a stream that carried nothing for this long. Default 60 s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ReceiptWindow is how long a request's handler may take to answer before the node sends
	// a separate pending receipt; a quicker answer is itself the receipt. Default 20 ms.
	ReceiptWindow time.Duration `yaml:"receipt_window"`
	// ShutdownGrace bounds how long Close waits for in-flight exchanges. Default 5 s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`

	// RatePerSecond and RateBurst are the per-peer token bucket for inbound messages
	// (A2ACP's default is 1000 per minute per agent; we allow bursts). Replies the node is
	// waiting for are not counted. Defaults 200 and 400.
	RatePerSecond float64 `yaml:"rate_per_second"`
	RateBurst     int     `yaml:"rate_burst"`
	// RateBytesPerSecond is the per-peer token bucket of inbound frame bytes, charged before a
	// frame's body is read; its burst is one second's worth, and at least max_message_bytes.
	// A peer over either rate has the frame answered once (RATE_LIMITED with retry_after) and
	// its stream closed, and nothing of it is read until its bucket refills. Default 64 MiB.
	RateBytesPerSecond int `yaml:"rate_bytes_per_second"`
	// QueueStreamBytes, QueuePeerBytes and QueueTotalBytes bound the bytes of the messages the
	// node is reading and handling, from before a frame's body is read until the message is
	// stored (or handed to a Go handler) or dropped: per stream, per peer (each frame is
	// charged to the peer that sent it) and in all, the node-wide budget. A frame waits,
	// unread, until it fits; one larger than a bound is taken only alone, so large frames are
	// handled one at a time. The same bytes are reserved on the stream's libp2p
	// resource-manager scope. The local API charges the bodies it reads to the same budget, as
	// one peer (docs/node.md, "Memory"). Defaults 4 MiB, 16 MiB (one maximum-size message) and
	// 64 MiB (four of them).
	QueueStreamBytes int64 `yaml:"queue_stream_bytes"`
	QueuePeerBytes   int64 `yaml:"queue_peer_bytes"`
	QueueTotalBytes  int64 `yaml:"queue_total_bytes"`
	// MaxAgents bounds the agents the node keeps track of: the directory of where agents live
	// and the liveness table. Beyond it the least recently used entry is forgotten. Default
	// 10,000.
	MaxAgents int `yaml:"max_agents"`
	// MaxPins bounds the trust-on-first-use pins (trust.json); beyond it the pin used least
	// recently is forgotten. Default 100,000.
	MaxPins int `yaml:"max_pins"`
	// PinExpiry forgets a trust-on-first-use pin that no accepted message used for this long,
	// so that an agent gone for good (or one that moved to a new key) can be pinned again.
	// 0 keeps pins until they are forgotten by hand (`iacp-node trust forget`). Default 30
	// days.
	PinExpiry time.Duration `yaml:"pin_expiry"`
	// InboxSenderBytes is each sending peer's share of the inbox (in memory and on disk):
	// one peer cannot fill it for everyone. Default 32 MiB, of DefaultInboxBytes (256 MiB).
	InboxSenderBytes int64 `yaml:"inbox_sender_bytes"`
	// Policy says which agent ids may use which intents; empty allows everything.
	Policy []PolicyRule `yaml:"policy"`
	// Trust chooses who may speak for an agent id. "authority": only a peer holding an agent
	// certificate for the id, signed by the mesh authority named by Authority (docs/trust.md).
	// "open": trust on first use, for labs; the node warns at start. Default: "authority"
	// when Authority is set or the data directory holds the authority's key, else "open".
	// `iacp-node init` founds a mesh (creates an authority) unless told otherwise.
	Trust string `yaml:"trust"`
	// Authority is the mesh authority's id: its Ed25519 public key, written as a peer id.
	Authority string `yaml:"authority"`
	// Certificate is this node's agent certificate (a compact JWS). Default: the file
	// <data dir>/agent.cert, which `iacp-node init --join` writes.
	Certificate string `yaml:"-"`
	// IntentPolicy maps an intent to the capabilities a request or event with it requires of
	// its sender: granted by the sender's certificate (its permissions) or by an A2ACP token
	// the message carries (security.auth_token). Example: {handoff: [tasks:write]}. Empty:
	// no intent needs any (docs/trust.md, "Authorization").
	IntentPolicy map[string][]string `yaml:"intent_policy"`
	// TokenIssuers are the A2ACP token issuers trusted besides the mesh authority, by id:
	// an Ed25519 public key written as a peer id (what `iacp-node id` prints for a key).
	TokenIssuers []string `yaml:"token_issuers"`
	// AuthorityNode is the peer id of the mesh authority's node, which renews certificates
	// and issues tokens. Default: tried among the bootstrap peers (`init --join` makes the
	// invitation's addresses, which are the authority node's, the bootstrap peers).
	AuthorityNode string `yaml:"authority_node"`
	// revocationSync is how often a revocation list is asked of a peer (tests shorten it);
	// 0 is revocationSyncEvery.
	revocationSync time.Duration
	// MeshAuthority, when set, makes this node the mesh authority: it issues its own
	// certificate when it has none. Default: the key <data dir>/authority.key, if present.
	MeshAuthority *authority.Authority `yaml:"-"`
	// AllowlistFile, when set, names a YAML or JSON map of agent id to peer id: only those
	// pairs may speak (a closed mesh). Without it, trust on first use pins each agent id to
	// the first peer id that speaks for it.
	AllowlistFile string `yaml:"allowlist_file"`

	// Inbox queues inbound messages that no Go handler takes until the agent acknowledges
	// them through the local API (Node.Inbox). Off, a request without a handler is refused
	// with CAPABILITY_MISMATCH and such events are dropped after their receipt. `iacp-node
	// run` turns it on. Default false.
	Inbox bool `yaml:"inbox"`
	// Dialect is the draft the agent speaks (docs/dialects.md): iacp, iacp-1.0, elizaos,
	// acp-v2 or a2acp. The local API hands it every message in that dialect (inbox, WebSocket,
	// webhook) and reads its answers in it, and the node refuses a direct message that has no
	// shape in it with CAPABILITY_MISMATCH, so that its sender learns why instead of the agent
	// missing it. Default iacp.
	Dialect string `yaml:"dialect"`

	// Durable stores every outgoing direct message until its receipt (retrying with backoff
	// until its TTL) and every accepted inbound message until the agent takes it, in
	// <data dir>/store. Default true.
	Durable bool `yaml:"durable"`
	// RetryMin and RetryMax bound the exponential backoff (with jitter) between delivery
	// attempts of a queued message. Defaults 1 s and 1 m.
	RetryMin time.Duration `yaml:"retry_min"`
	RetryMax time.Duration `yaml:"retry_max"`
	// ApprovalMax and ApprovalMaxBytes bound the outgoing messages held for approval
	// (security.require_approval, docs/coordination.md "Approval"): past either, a message
	// that requires approval is refused with RATE_LIMITED. Defaults 256 and 64 MiB.
	ApprovalMax      int   `yaml:"approval_max"`
	ApprovalMaxBytes int64 `yaml:"approval_max_bytes"`
	// Audit keeps the tamper-evident audit log in <data dir>/audit. Default true.
	Audit bool `yaml:"audit"`
	// AuditPayloads records payloads in the audit log; off, only their SHA-256. Refused input
	// is never recorded with its payload. Default true.
	AuditPayloads bool `yaml:"audit_payloads"`
	// AuditMaxBytes and AuditMaxAge bound the audit log: beyond either, its oldest files are
	// removed, after an entry that records what was removed and anchors what remains (audit
	// verify checks it). Defaults 1 GiB and 90 days (0 keeps files forever, else at least 1 h).
	AuditMaxBytes int64         `yaml:"audit_max_bytes"`
	AuditMaxAge   time.Duration `yaml:"audit_max_age"`
	// StoreOptions go to store.Open after the node's own (limits, sync batching).
	StoreOptions []store.Option `yaml:"-"`

	// KeepAlive is how often the node pings peers it needs. Default 15 s.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// ReconnectMin and ReconnectMax bound the exponential backoff (with jitter) for
	// reconnecting to peers it needs. Defaults 1 s and 1 m.
	ReconnectMin time.Duration `yaml:"reconnect_min"`
	ReconnectMax time.Duration `yaml:"reconnect_max"`

	// Discovery runs the Kademlia DHT (agent records, capability lookup). Default true.
	Discovery bool `yaml:"discovery"`
	// DHTClient runs the DHT in client mode (it queries but stores nothing for others).
	// Default false: the mode follows reachability (server unless found or declared private).
	DHTClient bool `yaml:"dht_client"`
	// MDNS also finds peers on the local network. Default false.
	MDNS bool `yaml:"mdns"`
	// Gossip runs gossipsub (broadcasts, capability groups, heartbeats, liveness). Default true.
	Gossip bool `yaml:"gossip"`
	// HeartbeatInterval is how often the node announces its status; 1 s to 300 s. Default 30 s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// SuspectAfter is how many missed heartbeats make an agent suspect; 1 to 100. Default 3.
	SuspectAfter int `yaml:"suspect_after"`
	// MeshBudget is about how many heartbeats per interval the node hears on the heartbeat
	// topic: in a mesh of more agents, every agent stretches its beat there so that the topic
	// carries this many, while the agents a node deals with are probed directly every
	// interval (docs/scale.md). 1 to 100,000; every node of a mesh should use the same.
	// Default 64.
	MeshBudget int `yaml:"mesh_budget"`
	// LeaveFlush is how long a node that leaves waits for its offline heartbeat to go out;
	// 0 to 10 s. Default 250 ms.
	LeaveFlush time.Duration `yaml:"leave_flush"`
	// DHTQuorum is how many DHT peers must answer a record lookup before the highest-seq
	// answer is taken (0 waits for the whole lookup). Default 3.
	DHTQuorum int `yaml:"dht_quorum"`
	// DHTBucketSize is Kademlia's k: the peers per routing-table bucket and per lookup
	// answer; 2 to 100. Default 20.
	DHTBucketSize int `yaml:"dht_bucket_size"`
	// BootstrapRetryMin and BootstrapRetryMax bound the backoff between bootstrap rounds
	// until one reaches a peer. Defaults 1 s and 1 min.
	BootstrapRetryMin time.Duration `yaml:"bootstrap_retry_min"`
	BootstrapRetryMax time.Duration `yaml:"bootstrap_retry_max"`
	// DHTHealthInterval is how often a bootstrapped node checks its routing table and
	// redials bootstrap peers it lost; at least 1 s. Default 1 min.
	DHTHealthInterval time.Duration `yaml:"dht_health_interval"`
	// Seed, when not 0, seeds the node's random choices (the jitter of its backoffs and of
	// its first stretched beat, the order in which discovery hands out peers), so that a run
	// can be repeated (the simulator). Default 0: seeded by the runtime.
	Seed uint64 `yaml:"-"`

	// DiscoveryOptions and GossipOptions go to discovery.New and pubsub.New after the
	// node's own, for a program that embeds a node and needs a setting the Config does not
	// have.
	DiscoveryOptions []discovery.Option `yaml:"-"`
	GossipOptions    []pubsub.Option    `yaml:"-"`

	// LogLevel is go-log's level for the node's subsystems. Default "info". New does not read
	// it: go-log's levels belong to the process, not to one node; `iacp-node run` sets it.
	LogLevel string `yaml:"log_level"`
	// MemoryLimit is the soft memory limit of the process (runtime/debug.SetMemoryLimit), in
	// bytes: the garbage collector works harder as the Go runtime's memory nears it, so that
	// garbage left by large messages does not double the node's footprint. 0 sets none. The
	// environment variable GOMEMLIMIT, when set, wins. Like LogLevel it belongs to the
	// process: New does not read it; `iacp-node run` sets it (docs/node.md, "Memory").
	// Default 384 MiB (DefaultMemoryLimit).
	MemoryLimit int64 `yaml:"memory_limit"`

	// Key, when set, is the identity instead of the key file in DataDir.
	Key crypto.PrivKey `yaml:"-"`
	// Host, when set, is used instead of building one (tests, the simulator's mocknet); the
	// node takes ownership and closes it. Key must be the host's key.
	Host host.Host `yaml:"-"`
	// Clock is the time source for validation, TTLs and backoff. Default time.Now.
	Clock func() time.Time `yaml:"-"`
	// Verifier checks signatures through its caches; gossip verifies with it
	// (pubsub.WithVerifier). Default: the node's own, with a key cache of
	// protocol.DefaultKeyCacheSize and no verification cache. A process that runs many nodes
	// (the simulator) gives them one to share, with a verification cache, so that a gossiped
	// document verifies once per process rather than once per node.
	Verifier *protocol.Verifier `yaml:"-"`
	// Logger receives the node's logs, already tagged with the agent and peer ids. Default:
	// go-log's slog bridge.
	Logger *slog.Logger `yaml:"-"`
	// Handlers are the agent's Go handlers by intent (WithHandler), in place before the node
	// serves. Default none: Handle registers them once New has returned.
	Handlers map[protocol.Intent]Handler `yaml:"-"`
	// OtherHandler takes what no intent handler takes (WithOtherHandler), in place before the
	// node serves. Default none: HandleOther registers it once New has returned.
	OtherHandler Handler `yaml:"-"`
}

// PolicyRule lets the agents matching Agents (a recipient-style pattern, e.g. "ops:*:*")
// use Intents. With any rule configured, a sender matching no rule is refused.
type PolicyRule struct {
	Agents  string            `yaml:"agents"`
	Intents []protocol.Intent `yaml:"intents"`
}

// DefaultDataDir is the data directory when none is given: relative to the working directory,
// as `make run` and `iacp-node init` use it. Every command's --data-dir defaults to it.
const DefaultDataDir = ".data/node"

// DefaultMaxPins bounds the trust-on-first-use pins: 100,000 agents, about 10 MiB and a
// trust.json of about 9 MB. Beyond it the peer holding the most pins loses its least
// recently used one; that agent is pinned again at its next accepted message.
const DefaultMaxPins = 100_000

// DefaultMemoryLimit is the process's soft memory limit by default: 384 MiB, the ceiling a
// node is measured to stay under while peers send it maximum-size messages at once (the
// node-wide budget of frames in flight, queue_total_bytes, the one large frame decoded at a
// time, and the inbox's large messages on disk keep what it holds alive well under it;
// docs/node.md, "Memory").
const DefaultMemoryLimit = 384 << 20

// MinMemoryLimit is the smallest memory_limit Validate takes: 128 MiB, about three times what
// an idle node holds; below it the collector would run without pause.
const MinMemoryLimit = 128 << 20

// DefaultConfig returns the defaults: the one table of them. New starts from it, and so do the
// config file `iacp-node init` writes and the simulator's node profile. Fields it leaves zero
// have no default (AgentID, Bootstrap, Authority, ...) or one that New works out (Trust,
// Certificate, Clock, Logger; see their comments).
func DefaultConfig() Config {
	return Config{
		DataDir:      DefaultDataDir,
		AgentVersion: "0.1.0",
		// Every interface, TCP and QUIC, ports the kernel picks.
		ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"},
		NAT:         true,
		// AutoNAT decides; a relay's connections carry 128 KiB each way for 2 min at most.
		Reachability:       ReachAuto,
		RelayLimitBytes:    128 << 10,
		RelayLimitDuration: 2 * time.Minute,
		// Trim to 64 connections above 192; a connection younger than a minute is spared.
		ConnLow:   64,
		ConnHigh:  192,
		ConnGrace: time.Minute,
		// The resource manager's scaling: 512 MiB and 1024 file descriptors.
		ResourceMemory: 512 << 20,
		ResourceFDs:    1024,
		// 16 MiB frames (IaCP 1.0 section 10) and messages living 1 h.
		MaxMessageBytes: protocol.DefaultMaxMessageBytes,
		DefaultTTL:      protocol.DefaultTTL,
		// 10 s for a frame once started and for a dial; 60 s for a stream carrying nothing.
		FrameTimeout: 10 * time.Second,
		IdleTimeout:  60 * time.Second,
		// A reply within 20 ms is its own receipt; Close waits 5 s for exchanges in flight.
		ReceiptWindow: 20 * time.Millisecond,
		ShutdownGrace: 5 * time.Second,
		// Per peer: 200 messages a second in bursts of 400 (A2ACP's default is 1000 a minute),
		// and 64 MiB of frames a second.
		RatePerSecond:      200,
		RateBurst:          400,
		RateBytesPerSecond: 64 << 20,
		// Messages being read and handled: 4 MiB per stream, 16 MiB (one maximum-size message)
		// per peer, 64 MiB (four of them) in all, the node-wide budget (docs/node.md, "Memory").
		QueueStreamBytes: 4 << 20,
		QueuePeerBytes:   16 << 20,
		QueueTotalBytes:  64 << 20,
		// 10,000 agents tracked; 100,000 pins, each forgotten after 30 days unused.
		MaxAgents: 10_000,
		MaxPins:   DefaultMaxPins,
		PinExpiry: 30 * 24 * time.Hour,
		// One sender's share of the inbox: 32 MiB of DefaultInboxBytes (256 MiB).
		InboxSenderBytes: 32 << 20,
		// Needed peers: a ping every 15 s, redials backing off from 1 s to 1 min.
		KeepAlive:    15 * time.Second,
		ReconnectMin: time.Second,
		ReconnectMax: time.Minute,
		// The agent speaks IACP itself.
		Dialect: string(dialect.IACP),
		// Durable delivery, retrying from 1 s to 1 min between attempts.
		Durable:  true,
		RetryMin: time.Second,
		RetryMax: time.Minute,
		// At most 256 messages, 64 MiB, wait for approval.
		ApprovalMax:      256,
		ApprovalMaxBytes: 64 << 20,
		// The audit log with payloads, kept up to 1 GiB and 90 days.
		Audit:         true,
		AuditPayloads: true,
		AuditMaxBytes: audit.DefaultMaxTotalBytes,
		AuditMaxAge:   audit.DefaultMaxAge,
		// The DHT in server mode and gossipsub, beating every 30 s.
		Discovery:         true,
		Gossip:            true,
		HeartbeatInterval: 30 * time.Second,
		// Suspect after 3 missed beats; a leaving node's offline beat gets 250 ms to go out.
		SuspectAfter: pubsub.DefaultSuspectAfter,
		LeaveFlush:   pubsub.DefaultLeaveFlush,
		// Beats on the heartbeat topic stretch beyond 64 agents (docs/scale.md).
		MeshBudget: pubsub.DefaultMeshBudget,
		// DHT lookups end at 3 answers, k = 20; bootstrap retries back off from 1 s to
		// 1 min, and the routing table is checked each minute.
		DHTQuorum:         discovery.DefaultQuorum,
		DHTBucketSize:     discovery.DefaultBucketSize,
		BootstrapRetryMin: discovery.DefaultBackoffBase,
		BootstrapRetryMax: discovery.DefaultBackoffMax,
		DHTHealthInterval: discovery.DefaultHealthInterval,
		LogLevel:          "info",
		// The process's soft memory limit (docs/node.md, "Memory").
		MemoryLimit: DefaultMemoryLimit,
		// The node's own signature verifier, with a key cache of DefaultKeyCacheSize senders.
		Verifier: &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize)},
	}
}

// Validate checks c as New does before it builds anything, and names the config key and the
// allowed range of the first bad value.
func (c *Config) Validate() error {
	if err := protocol.ValidateAgentID(c.AgentID); err != nil {
		return fmt.Errorf("agent_id: %w (set it with --agent-id or agent_id in the config)", err)
	}
	checks := []struct {
		ok   bool
		what string
	}{
		{c.Host != nil || len(c.ListenAddrs) > 0, "listen: at least one multiaddr"},
		{c.ConnLow > 0 && c.ConnHigh >= c.ConnLow, "conn_low/conn_high: 0 < low <= high"},
		{c.ResourceMemory >= 64<<20, "resource_memory: at least 64 MiB"},
		{c.ResourceFDs >= 16, "resource_fds: at least 16"},
		{c.MaxMessageBytes >= 1024 && c.MaxMessageBytes <= protocol.MaxMessageBytesLimit, "max_message_bytes: 1 KiB to 1 GiB"},
		{c.DefaultTTL >= time.Second && c.DefaultTTL <= protocol.DefaultMaxTTL, "default_ttl: 1 s to 7 days"},
		{c.FrameTimeout >= 100*time.Millisecond, "frame_timeout: at least 100 ms"},
		{c.IdleTimeout >= time.Second, "idle_timeout: at least 1 s"},
		{c.ReceiptWindow >= 0 && c.ReceiptWindow <= time.Second, "receipt_window: 0 to 1 s"},
		{c.ShutdownGrace >= 0, "shutdown_grace: not negative"},
		{c.RatePerSecond > 0 && c.RateBurst >= 1, "rate_per_second > 0 and rate_burst >= 1"},
		{c.RateBytesPerSecond >= 64<<10, "rate_bytes_per_second: at least 64 KiB"},
		{c.QueueStreamBytes >= 64<<10 && c.QueuePeerBytes >= c.QueueStreamBytes && c.QueueTotalBytes >= c.QueuePeerBytes,
			"queue_stream_bytes/queue_peer_bytes/queue_total_bytes: 64 KiB <= stream <= peer <= total"},
		{c.MaxAgents >= 16 && c.MaxAgents <= 10_000_000, "max_agents: 16 to 10,000,000"},
		{c.MaxPins >= 16 && c.MaxPins <= 10_000_000, "max_pins: 16 to 10,000,000"},
		{c.PinExpiry == 0 || c.PinExpiry >= time.Hour, "pin_expiry: 0 (keep) or at least 1h"},
		{c.Trust == "" || c.Trust == TrustAuthority || c.Trust == TrustOpen, "trust: authority or open"},
		{c.InboxSenderBytes >= int64(c.MaxMessageBytes) && c.InboxSenderBytes <= DefaultInboxBytes,
			"inbox_sender_bytes: at least max_message_bytes and at most 256 MiB"},
		{c.KeepAlive >= time.Second, "keep_alive: at least 1 s"},
		{c.RetryMin > 0 && c.RetryMax >= c.RetryMin, "retry_min/retry_max: 0 < min <= max"},
		{c.ApprovalMax >= 1 && c.ApprovalMax <= 100_000, "approval_max: 1 to 100,000"},
		{c.ApprovalMaxBytes >= int64(c.MaxMessageBytes) && c.ApprovalMaxBytes <= 1<<30, "approval_max_bytes: max_message_bytes to 1 GiB"},
		{(!c.Durable && !c.Audit) || c.DataDir != "", "data_dir: durable delivery and the audit log need a data directory"},
		{!c.Audit || c.AuditMaxBytes >= 2*audit.DefaultMaxFileBytes, "audit_max_bytes: at least 128 MiB (two 64 MiB files)"},
		{c.AuditMaxAge == 0 || c.AuditMaxAge >= time.Hour, "audit_max_age: 0 (keep forever) or at least 1h"},
		{c.HeartbeatInterval >= time.Second && c.HeartbeatInterval <= 300*time.Second, "heartbeat_interval: 1 s to 300 s"},
		{c.ReconnectMin > 0 && c.ReconnectMax >= c.ReconnectMin, "reconnect_min/reconnect_max: 0 < min <= max"},
		{c.SuspectAfter >= 1 && c.SuspectAfter <= 100, "suspect_after: 1 to 100 missed beats"},
		{c.MeshBudget >= 1 && c.MeshBudget <= 100_000, "mesh_budget: 1 to 100,000 heartbeats per interval"},
		{c.LeaveFlush >= 0 && c.LeaveFlush <= 10*time.Second, "leave_flush: 0 to 10 s"},
		{c.DHTQuorum >= 0 && c.DHTQuorum <= c.DHTBucketSize, "dht_quorum: 0 to dht_bucket_size"},
		{c.DHTBucketSize >= 2 && c.DHTBucketSize <= 100, "dht_bucket_size: 2 to 100"},
		{c.BootstrapRetryMin > 0 && c.BootstrapRetryMax >= c.BootstrapRetryMin, "bootstrap_retry_min/bootstrap_retry_max: 0 < min <= max"},
		{c.DHTHealthInterval >= time.Second, "dht_health_interval: at least 1 s"},
		{c.MemoryLimit == 0 || c.MemoryLimit >= MinMemoryLimit, "memory_limit: 0 (none) or at least 128 MiB"},
	}
	for _, ch := range checks {
		if !ch.ok {
			return fmt.Errorf("invalid config: %s", ch.what)
		}
	}
	if err := c.validateNAT(); err != nil {
		return err
	}
	if _, err := dialect.Parse(c.Dialect); err != nil {
		return fmt.Errorf("invalid config: dialect: %w", err)
	}
	for intent, caps := range c.IntentPolicy {
		if intent == "" || len(caps) == 0 || len(caps) > protocol.MaxPermissions {
			return fmt.Errorf("invalid config: intent_policy.%s: an intent and 1 to %d capabilities", intent, protocol.MaxPermissions)
		}
	}
	for i, id := range c.TokenIssuers {
		if _, err := issuerKey(id); err != nil {
			return fmt.Errorf("invalid config: token_issuers[%d]: %w", i, err)
		}
	}
	if c.AuthorityNode != "" {
		if _, err := peer.Decode(c.AuthorityNode); err != nil {
			return fmt.Errorf("invalid config: authority_node %q: not a peer id: %w", c.AuthorityNode, err)
		}
	}
	for i, r := range c.Policy {
		if err := protocol.ValidateRecipientID(r.Agents); err != nil {
			return fmt.Errorf("policy[%d].agents: %w", i, err)
		}
	}
	return nil
}
