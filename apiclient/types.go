package apiclient

import (
	"encoding/json"
	"time"
)

// The documents of the API, as its JSON has them (docs/api.md, docs/openapi.yaml); a test of
// package api holds each to the server's own type.

// SendResult answers a message POST (202) and a broadcast.
type SendResult struct {
	MessageID string `json:"message_id"`
	// Status is "accepted" (the recipient's node has the message; a broadcast was
	// published), "queued" (the recipient is known but could not be reached: the message
	// waits in the outbox, CancelOutbox takes it out) or "pending" (held for approval).
	Status string `json:"status"`
}

// The statuses of a SendResult.
const (
	StatusAccepted = "accepted"
	StatusQueued   = "queued"
	StatusPending  = "pending"
)

// CancelResult answers DELETE /v1/outbox/{message_id}.
type CancelResult struct {
	Cancelled string `json:"cancelled"`
}

// Manifest is an agent's capability manifest.
type Manifest struct {
	AgentID          string    `json:"agent_id"`
	Name             string    `json:"name,omitempty"`
	Tools            []string  `json:"tools,omitempty"`
	Models           []string  `json:"models,omitempty"`
	MaxContextTokens int       `json:"max_context_tokens,omitempty"`
	Domains          []string  `json:"domains,omitempty"`
	RateLimit        RateLimit `json:"rate_limit,omitzero"`
	TrustScore       float64   `json:"trust_score,omitempty"`
	Deployment       string    `json:"deployment,omitempty"`
	Version          string    `json:"version,omitempty"`
	UptimeSeconds    int64     `json:"uptime_seconds,omitempty"`
}

// RateLimit is the rate a manifest advertises.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`
}

// Heartbeat is an agent's status: alive, busy, draining or offline, its load and tasks.
type Heartbeat struct {
	Status      string  `json:"status"`
	Load        float64 `json:"load"`
	ActiveTasks int     `json:"active_tasks"`
	Version     string  `json:"version,omitempty"`
}

// StatusDoc is GET /v1/status.
type StatusDoc struct {
	AgentID         string           `json:"agent_id"`
	PeerID          string           `json:"peer_id"`
	Addrs           []string         `json:"addrs"`
	Manifest        Manifest         `json:"manifest"`
	Status          Heartbeat        `json:"status"`
	UptimeSeconds   int64            `json:"uptime_seconds"`
	Peers           int              `json:"peers"`
	InboxDepth      int              `json:"inbox_depth"`
	Inbox           bool             `json:"inbox"`
	MaxMessageBytes int              `json:"max_message_bytes"`
	Gossip          bool             `json:"gossip"`
	Webhook         string           `json:"webhook,omitempty"`
	Discovery       *DiscoveryStatus `json:"discovery,omitempty"`
	Safety          SafetyDoc        `json:"safety"`
}

// SafetyDoc is what the node's bounds hold and what they refused (docs/security.md).
type SafetyDoc struct {
	AuditBroken        string `json:"audit_broken,omitempty"`
	QueueBytes         int64  `json:"queue_bytes"`
	QueuePeakBytes     int64  `json:"queue_peak_bytes"`
	QueuePeakPeerBytes int64  `json:"queue_peak_peer_bytes"`
	ReplayIDs          int    `json:"replay_ids"`
	ReplayCapacity     int    `json:"replay_capacity"`
	ReplayEvicted      uint64 `json:"replay_evicted"`
	Pins               int    `json:"pins"`
	Agents             int    `json:"agents"`
	InboxBytes         int    `json:"inbox_bytes"`
	InboxMaxBytes      int    `json:"inbox_max_bytes"`
	LocalHealth        int    `json:"local_health"`
	GossipRejected     uint64 `json:"gossip_rejected"`
	GossipIgnored      uint64 `json:"gossip_ignored"`
	DHTRecords         int    `json:"dht_records"`
	DHTBytes           int64  `json:"dht_bytes"`
	DHTEvicted         uint64 `json:"dht_evicted"`
}

// DiscoveryStatus is the discovery part of StatusDoc.
type DiscoveryStatus struct {
	Mode                string    `json:"mode"`
	Bootstrapped        bool      `json:"bootstrapped"`
	BootstrapConfigured int       `json:"bootstrap_configured"`
	BootstrapAnswered   int       `json:"bootstrap_answered"`
	RoutingTableSize    int       `json:"routing_table_size"`
	CachedAgents        int       `json:"cached_agents"`
	Published           time.Time `json:"published,omitzero"`
	LastError           string    `json:"last_error,omitempty"`
}

// AgentDoc is one row of GET /v1/agents.
type AgentDoc struct {
	AgentID          string    `json:"agent_id"`
	PeerID           string    `json:"peer_id"`
	State            string    `json:"state"`
	LastSeen         time.Time `json:"last_seen"`
	Load             float64   `json:"load"`
	ActiveTasks      int       `json:"active_tasks"`
	Version          string    `json:"version,omitempty"`
	Watched          bool      `json:"watched"`
	StalenessSeconds float64   `json:"staleness_seconds"`
	Circuit          string    `json:"circuit,omitempty"`
}

// Breaker is the state of one circuit breaker of the node's coordinator.
type Breaker struct {
	AgentID  string    `json:"agent_id"`
	State    string    `json:"state"`
	Failures int       `json:"consecutive_failures"`
	OpenedAt time.Time `json:"opened_at,omitzero"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
	LastUsed time.Time `json:"last_used"`
}

// AgentsDoc is GET /v1/agents.
type AgentsDoc struct {
	Agents   []AgentDoc `json:"agents"`
	Breakers []Breaker  `json:"breakers"`
	Note     string     `json:"note,omitempty"`
}

// CapabilitySet names tools, models and domains.
type CapabilitySet struct {
	Tools   []string `json:"tools,omitempty"`
	Models  []string `json:"models,omitempty"`
	Domains []string `json:"domains,omitempty"`
}

// Empty reports whether the set names nothing.
func (s CapabilitySet) Empty() bool { return len(s.Tools)+len(s.Models)+len(s.Domains) == 0 }

// QueryConstraints are the constraints of a capability query.
type QueryConstraints struct {
	MaxLatencyMs int    `json:"max_latency_ms,omitempty"`
	Locality     string `json:"locality,omitempty"`
}

// CapabilityQuery is a capability query: what every match must have, what ranks it higher.
type CapabilityQuery struct {
	Required    CapabilitySet    `json:"required,omitzero"`
	Preferred   CapabilitySet    `json:"preferred,omitzero"`
	Constraints QueryConstraints `json:"constraints,omitzero"`
}

// RecordDoc is an agent record: GET /v1/resolve/{agent_id}, and one row of discover.
type RecordDoc struct {
	AgentID  string    `json:"agent_id"`
	PeerID   string    `json:"peer_id"`
	Addrs    []string  `json:"addrs"`
	Manifest Manifest  `json:"manifest"`
	Expires  time.Time `json:"expires"`
}

// MatchDoc is one agent that satisfies a capability query, best first.
type MatchDoc struct {
	RecordDoc
	PreferredMatches int      `json:"preferred_matches"`
	Load             *float64 `json:"load,omitempty"`
	LatencyMs        *float64 `json:"latency_ms,omitempty"`
}

// DiscoverDoc is GET/POST /v1/discover.
type DiscoverDoc struct {
	Query   CapabilityQuery `json:"query"`
	Matches []MatchDoc      `json:"matches"`
}

// PeerDoc is one connected libp2p peer, and the path its connections take: direct, relayed
// or hole-punched.
type PeerDoc struct {
	PeerID    string   `json:"peer_id"`
	Addrs     []string `json:"addrs"`
	Path      string   `json:"path"`
	LatencyMs *float64 `json:"latency_ms,omitempty"`
}

// PeersDoc is GET /v1/peers: the connected peers, and how others reach this node.
type PeersDoc struct {
	Peers []PeerDoc `json:"peers"`
	NAT   NATDoc    `json:"nat"`
}

// NATDoc is what the node knows of its reachability: public, private or unknown; the
// addresses it advertises and those AutoNAT confirmed; the relays it holds a reservation
// with; its hole punches so far.
type NATDoc struct {
	Reachability         string   `json:"reachability"`
	Advertised           []string `json:"advertised"`
	Reachable            []string `json:"reachable"`
	Relays               []string `json:"relays"`
	HolePunchesSucceeded int      `json:"hole_punches_succeeded"`
	HolePunchesFailed    int      `json:"hole_punches_failed"`
}

// OutboxItem is one message waiting in the durable outbox.
type OutboxItem struct {
	MessageID     string    `json:"message_id"`
	Recipient     string    `json:"recipient"`
	Seq           uint64    `json:"seq"`
	EnqueuedAt    time.Time `json:"enqueued_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"next_attempt_at"`
	LastError     string    `json:"last_error,omitempty"`
}

// OutboxDoc is GET /v1/outbox.
type OutboxDoc struct {
	Durable bool         `json:"durable"`
	Entries []OutboxItem `json:"entries"`
	Note    string       `json:"note,omitempty"`
}

// InboxItem is one inbound message waiting for the agent.
type InboxItem struct {
	Seq       uint64    `json:"seq"`
	Received  time.Time `json:"received"`
	Peer      string    `json:"peer"`
	MessageID string    `json:"message_id"`
	Dialect   string    `json:"dialect,omitempty"`
	Message   *Message  `json:"message"`
}

// InboxDoc is one page of GET /v1/inbox.
type InboxDoc struct {
	Messages  []InboxItem `json:"messages"`
	More      bool        `json:"more"`
	NextAfter uint64      `json:"next_after"`
}

// AckResult answers POST /v1/inbox/{message_id}/ack.
type AckResult struct {
	Acked string `json:"acked"`
}

// EventPayload is a broadcast event.
type EventPayload struct {
	EventType string `json:"event_type"`
	Detail    string `json:"detail,omitempty"`
	Severity  string `json:"severity,omitempty"`
	Data      any    `json:"data,omitempty"`
}

// AskRequest is the body of POST /v1/ask: a broadcast query (docs/coordination.md).
type AskRequest struct {
	Group    string          `json:"group,omitempty"`
	Intent   string          `json:"intent,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Deadline string          `json:"deadline,omitempty"`
	Count    int             `json:"count,omitempty"`
	Expect   []string        `json:"expect,omitempty"`
}

// AskDoc answers POST /v1/ask: what the query collected.
type AskDoc struct {
	QueryID string         `json:"query_id"`
	Group   string         `json:"group"`
	Ended   string         `json:"ended"`
	Answers []AskAnswerDoc `json:"answers"`
	Errors  []AskErrorDoc  `json:"errors"`
	Missing []string       `json:"missing"`
	Refused int            `json:"refused"`
}

// AskAnswerDoc is one agent's answer.
type AskAnswerDoc struct {
	AgentID   string          `json:"agent_id"`
	PeerID    string          `json:"peer_id"`
	Status    string          `json:"status"`
	Payload   json.RawMessage `json:"payload"`
	LatencyMS float64         `json:"latency_ms"`
}

// AskErrorDoc is one agent's error answer.
type AskErrorDoc struct {
	AgentID   string  `json:"agent_id"`
	PeerID    string  `json:"peer_id"`
	Code      string  `json:"code"`
	Message   string  `json:"message"`
	LatencyMS float64 `json:"latency_ms"`
}

// Health is GET /healthz.
type Health struct {
	Status  string `json:"status"`
	AgentID string `json:"agent_id"`
}
