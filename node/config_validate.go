package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/iacp-node/iacp-node/audit"
	"github.com/iacp-node/iacp-node/dialect"
	"github.com/iacp-node/iacp-node/protocol"
	"github.com/iacp-node/iacp-node/trust"
)

// Validate checks c as New does before it builds anything, and names the config key and the
// allowed range of the first bad value. It checks part by part, the parts DefaultConfig
// fills, then the NAT traversal keys, the agent's dialect and the trust settings.
func (c *Config) Validate() error {
	if err := protocol.ValidateAgentID(c.AgentID); err != nil {
		return fmt.Errorf("agent_id: %w (set it with --agent-id or agent_id in the config)", err)
	}
	parts := [][]check{c.connectionChecks(), c.wireChecks(), c.limitChecks(), c.deliveryChecks(), c.meshChecks(), c.processChecks()}
	for _, checks := range parts {
		for _, ch := range checks {
			if !ch.ok {
				return fmt.Errorf("invalid config: %s", ch.what)
			}
		}
	}
	if err := c.validateNAT(); err != nil {
		return err
	}
	if _, err := dialect.Parse(c.Dialect); err != nil {
		return fmt.Errorf("invalid config: dialect: %w", err)
	}
	return c.validateTrust()
}

// check is one range check of Validate: ok, or what names the key and its allowed range.
type check struct {
	ok   bool
	what string
}

// connectionChecks: listening, the connection manager and resource manager, needed peers.
func (c *Config) connectionChecks() []check {
	return []check{
		{c.Host != nil || len(c.ListenAddrs) > 0, "listen: at least one multiaddr"},
		{c.ConnLow > 0 && c.ConnHigh >= c.ConnLow, "conn_low/conn_high: 0 < low <= high"},
		{c.ResourceMemory >= 64<<20, "resource_memory: at least 64 MiB"},
		{c.ResourceFDs >= 16, "resource_fds: at least 16"},
		{c.KeepAlive >= time.Second, "keep_alive: at least 1 s"},
		{c.ReconnectMin > 0 && c.ReconnectMax >= c.ReconnectMin, "reconnect_min/reconnect_max: 0 < min <= max"},
	}
}

// wireChecks: message size and lifetime, stream timeouts.
func (c *Config) wireChecks() []check {
	return []check{
		{c.MaxMessageBytes >= 1024 && c.MaxMessageBytes <= protocol.MaxMessageBytesLimit, "max_message_bytes: 1 KiB to 1 GiB"},
		{c.DefaultTTL >= time.Second && c.DefaultTTL <= protocol.DefaultMaxTTL, "default_ttl: 1 s to 7 days"},
		{c.FrameTimeout >= 100*time.Millisecond, "frame_timeout: at least 100 ms"},
		{c.IdleTimeout >= time.Second, "idle_timeout: at least 1 s"},
		{c.ReceiptWindow >= 0 && c.ReceiptWindow <= time.Second, "receipt_window: 0 to 1 s"},
		{c.ShutdownGrace >= 0, "shutdown_grace: not negative"},
	}
}

// limitChecks: the rates, byte budgets and table sizes that bound what peers may make the
// node spend and keep.
func (c *Config) limitChecks() []check {
	return []check{
		{c.RatePerSecond > 0 && c.RateBurst >= 1, "rate_per_second > 0 and rate_burst >= 1"},
		{c.RateBytesPerSecond >= 64<<10, "rate_bytes_per_second: at least 64 KiB"},
		{c.QueueStreamBytes >= 64<<10 && c.QueuePeerBytes >= c.QueueStreamBytes && c.QueueTotalBytes >= c.QueuePeerBytes,
			"queue_stream_bytes/queue_peer_bytes/queue_total_bytes: 64 KiB <= stream <= peer <= total"},
		{c.MaxAgents >= 16 && c.MaxAgents <= 10_000_000, "max_agents: 16 to 10,000,000"},
		{c.MaxPins >= 16 && c.MaxPins <= 10_000_000, "max_pins: 16 to 10,000,000"},
		{c.PinExpiry == 0 || c.PinExpiry >= time.Hour, "pin_expiry: 0 (keep) or at least 1h"},
		{c.InboxSenderBytes >= int64(c.MaxMessageBytes) && c.InboxSenderBytes <= DefaultInboxBytes,
			"inbox_sender_bytes: at least max_message_bytes and at most 256 MiB"},
	}
}

// deliveryChecks: durable delivery, approvals and the audit log.
func (c *Config) deliveryChecks() []check {
	return []check{
		{c.RetryMin > 0 && c.RetryMax >= c.RetryMin, "retry_min/retry_max: 0 < min <= max"},
		{c.ApprovalMax >= 1 && c.ApprovalMax <= 100_000, "approval_max: 1 to 100,000"},
		{c.ApprovalMaxBytes >= int64(c.MaxMessageBytes) && c.ApprovalMaxBytes <= 1<<30, "approval_max_bytes: max_message_bytes to 1 GiB"},
		{(!c.Durable && !c.Audit) || c.DataDir != "", "data_dir: durable delivery and the audit log need a data directory"},
		{!c.Audit || c.AuditMaxBytes >= 2*audit.DefaultMaxFileBytes, "audit_max_bytes: at least 128 MiB (two 64 MiB files)"},
		{c.AuditMaxAge == 0 || c.AuditMaxAge >= time.Hour, "audit_max_age: 0 (keep forever) or at least 1h"},
	}
}

// meshChecks: heartbeats and liveness, the DHT and its bootstrap.
func (c *Config) meshChecks() []check {
	return []check{
		{c.HeartbeatInterval >= time.Second && c.HeartbeatInterval <= 300*time.Second, "heartbeat_interval: 1 s to 300 s"},
		{c.SuspectAfter >= 1 && c.SuspectAfter <= 100, "suspect_after: 1 to 100 missed beats"},
		{c.MeshBudget >= 1 && c.MeshBudget <= 100_000, "mesh_budget: 1 to 100,000 heartbeats per interval"},
		{c.LeaveFlush >= 0 && c.LeaveFlush <= 10*time.Second, "leave_flush: 0 to 10 s"},
		{c.DHTQuorum >= 0 && c.DHTQuorum <= c.DHTBucketSize, "dht_quorum: 0 to dht_bucket_size"},
		{c.DHTBucketSize >= 2 && c.DHTBucketSize <= 100, "dht_bucket_size: 2 to 100"},
		{c.BootstrapRetryMin > 0 && c.BootstrapRetryMax >= c.BootstrapRetryMin, "bootstrap_retry_min/bootstrap_retry_max: 0 < min <= max"},
		{c.DHTHealthInterval >= time.Second, "dht_health_interval: at least 1 s"},
	}
}

// processChecks: the settings that belong to the process.
func (c *Config) processChecks() []check {
	return []check{
		{c.MemoryLimit == 0 || c.MemoryLimit >= MinMemoryLimit, "memory_limit: 0 (none) or at least 128 MiB"},
	}
}

// validateTrust checks who may speak and what for: the trust mode, the intents' required
// capabilities, the token issuers, the authority's node and the policy rules.
func (c *Config) validateTrust() error {
	if c.Trust != "" && c.Trust != trust.Authority && c.Trust != trust.Open {
		return errors.New("invalid config: trust: authority or open")
	}
	for intent, caps := range c.IntentPolicy {
		if intent == "" || len(caps) == 0 || len(caps) > protocol.MaxPermissions {
			return fmt.Errorf("invalid config: intent_policy.%s: an intent and 1 to %d capabilities", intent, protocol.MaxPermissions)
		}
	}
	for i, id := range c.TokenIssuers {
		if _, err := trust.IssuerKey(id); err != nil {
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
