package node

import (
	"time"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/discovery"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/pubsub"
)

// DefaultConfig returns the defaults: the one table of them, filled part by part
// (defaultParts). New starts from it, and so do the config file `iacp-node init` writes and
// the simulator's node profile. Fields it leaves zero have no default (AgentID, Bootstrap,
// Authority, ...) or one that New works out (Trust, Certificate, Clock, Logger; see their
// comments).
func DefaultConfig() Config {
	c := Config{
		DataDir:      DefaultDataDir,
		AgentVersion: "0.1.0",
		// The agent speaks IACP itself.
		Dialect: string(dialect.IACP),
	}
	for _, part := range defaultParts {
		part(&c)
	}
	return c
}

// defaultParts fill DefaultConfig, one part of the node each: the same parts Validate checks.
var defaultParts = []func(*Config){
	connectionDefaults, wireDefaults, limitDefaults, deliveryDefaults, meshDefaults, processDefaults,
}

// connectionDefaults: where the node listens, how it gets through NATs, how many connections
// it keeps and how it keeps the ones it needs.
func connectionDefaults(c *Config) {
	// Every interface, TCP and QUIC, ports the kernel picks.
	c.ListenAddrs = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	c.NAT = true
	// AutoNAT decides; a relay's connections carry 128 KiB each way for 2 min at most.
	c.Reachability = ReachAuto
	c.RelayLimitBytes = 128 << 10
	c.RelayLimitDuration = 2 * time.Minute
	// Trim to 64 connections above 192; a connection younger than a minute is spared.
	c.ConnLow = 64
	c.ConnHigh = 192
	c.ConnGrace = time.Minute
	// The resource manager's scaling: 512 MiB and 1024 file descriptors.
	c.ResourceMemory = 512 << 20
	c.ResourceFDs = 1024
	// Needed peers: a ping every 15 s, redials backing off from 1 s to 1 min.
	c.KeepAlive = 15 * time.Second
	c.ReconnectMin = time.Second
	c.ReconnectMax = time.Minute
}

// wireDefaults: the size and lifetime of messages, the timeouts of the streams that carry
// them, and the verifier of their signatures.
func wireDefaults(c *Config) {
	// 16 MiB frames (IaCP 1.0 section 10) and messages living 1 h.
	c.MaxMessageBytes = protocol.DefaultMaxMessageBytes
	c.DefaultTTL = protocol.DefaultTTL
	// 10 s for a frame once started and for a dial; 60 s for a stream carrying nothing.
	c.FrameTimeout = 10 * time.Second
	c.IdleTimeout = 60 * time.Second
	// A reply within 20 ms is its own receipt; Close waits 5 s for exchanges in flight.
	c.ReceiptWindow = 20 * time.Millisecond
	c.ShutdownGrace = 5 * time.Second
	// The node's own signature verifier, with a key cache of DefaultKeyCacheSize senders.
	c.Verifier = &protocol.Verifier{Keys: protocol.NewKeyCache(protocol.DefaultKeyCacheSize)}
}

// limitDefaults: what one peer, and all of them, may make the node spend and keep.
func limitDefaults(c *Config) {
	// Per peer: 200 messages a second in bursts of 400 (A2ACP's default is 1000 a minute),
	// and 64 MiB of frames a second.
	c.RatePerSecond = 200
	c.RateBurst = 400
	c.RateBytesPerSecond = 64 << 20
	// Messages being read and handled: 4 MiB per stream, 16 MiB (one maximum-size message)
	// per peer, 64 MiB (four of them) in all, the node-wide budget (docs/node.md, "Memory").
	c.QueueStreamBytes = 4 << 20
	c.QueuePeerBytes = 16 << 20
	c.QueueTotalBytes = 64 << 20
	// 10,000 agents tracked; 100,000 pins, each forgotten after 30 days unused.
	c.MaxAgents = 10_000
	c.MaxPins = DefaultMaxPins
	c.PinExpiry = 30 * 24 * time.Hour
	// One sender's share of the inbox: 32 MiB of DefaultInboxBytes (256 MiB).
	c.InboxSenderBytes = 32 << 20
}

// deliveryDefaults: durable delivery, approvals and the audit log.
func deliveryDefaults(c *Config) {
	// Durable delivery, retrying from 1 s to 1 min between attempts.
	c.Durable = true
	c.RetryMin = time.Second
	c.RetryMax = time.Minute
	// At most 256 messages, 64 MiB, wait for approval.
	c.ApprovalMax = 256
	c.ApprovalMaxBytes = 64 << 20
	// The audit log with payloads, kept up to 1 GiB and 90 days.
	c.Audit = true
	c.AuditPayloads = true
	c.AuditMaxBytes = audit.DefaultMaxTotalBytes
	c.AuditMaxAge = audit.DefaultMaxAge
}

// meshDefaults: the DHT and gossip, heartbeats and liveness.
func meshDefaults(c *Config) {
	// The DHT in server mode and gossipsub, beating every 30 s.
	c.Discovery = true
	c.Gossip = true
	c.HeartbeatInterval = 30 * time.Second
	// Suspect after 3 missed beats; a leaving node's offline beat gets 250 ms to go out.
	c.SuspectAfter = pubsub.DefaultSuspectAfter
	c.LeaveFlush = pubsub.DefaultLeaveFlush
	// Beats on the heartbeat topic stretch beyond 64 agents (docs/scale.md).
	c.MeshBudget = pubsub.DefaultMeshBudget
	// DHT lookups end at 3 answers, k = 20; bootstrap retries back off from 1 s to
	// 1 min, and the routing table is checked each minute.
	c.DHTQuorum = discovery.DefaultQuorum
	c.DHTBucketSize = discovery.DefaultBucketSize
	c.BootstrapRetryMin = discovery.DefaultBackoffBase
	c.BootstrapRetryMax = discovery.DefaultBackoffMax
	c.DHTHealthInterval = discovery.DefaultHealthInterval
}

// processDefaults: the settings that belong to the process (`iacp-node run` applies them),
// not to one node.
func processDefaults(c *Config) {
	c.LogLevel = "info"
	// The process's soft memory limit (docs/node.md, "Memory").
	c.MemoryLimit = DefaultMemoryLimit
}
