package node

import (
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/iacp-node/iacp-node/authority"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
	"github.com/iacp-node/iacp-node/store"
)

// Config is everything a node can be told. DefaultConfig holds the defaults and Validate the
// allowed ranges, both part by part (config_defaults.go, config_validate.go); New applies its
// options over DefaultConfig, then Validate. The YAML tags
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
	// 0 is trust.DefaultRevocationSync.
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
	// Dialect is the draft the agent speaks (docs/dialects.md): one of protocol.Dialects. The
	// local API hands it every message in that dialect (inbox, WebSocket,
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
	// CertCache, when set, remembers the certificates that verified for every node that
	// shares it, so that a process that runs many nodes (the simulator) checks each agent's
	// certificate once rather than once per node (authority.CertCache). Default none.
	CertCache *authority.CertCache `yaml:"-"`
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
