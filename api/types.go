package api

import (
	"time"

	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The documents the API answers with. The JSON names are the API's; docs/api.md shows each.

// SendResult answers a message POST (202) and a broadcast.
type SendResult struct {
	MessageID string `json:"message_id"`
	// Status is "accepted": the recipient's node has the message (a receipt came back), or
	// for a broadcast, it was published; "queued": the recipient is known but could not be
	// reached, and the message waits in the outbox (retried until its TTL; DELETE
	// /v1/outbox/{message_id} cancels it); "pending": the message requires approval and is
	// held, unsent, until the node's operator decides (docs/coordination.md "Approval").
	Status string `json:"status"`
}

// CancelResult answers DELETE /v1/outbox/{message_id}.
type CancelResult struct {
	Cancelled string `json:"cancelled"`
}

// StatusDoc is GET /v1/status.
type StatusDoc struct {
	AgentID string   `json:"agent_id"`
	PeerID  string   `json:"peer_id"`
	Addrs   []string `json:"addrs"`
	// Manifest is the agent's capability manifest, as the node publishes it.
	Manifest      protocol.Manifest         `json:"manifest"`
	Status        protocol.HeartbeatPayload `json:"status"`
	UptimeSeconds int64                     `json:"uptime_seconds"`
	Peers         int                       `json:"peers"`
	InboxDepth    int                       `json:"inbox_depth"`
	Inbox         bool                      `json:"inbox"`
	// MaxMessageBytes is the node's max_message_bytes: no inbound message is larger, so an
	// inbox page is at most this plus its JSON when it exceeds its byte budget.
	MaxMessageBytes int    `json:"max_message_bytes"`
	Gossip          bool   `json:"gossip"`
	Webhook         string `json:"webhook,omitempty"`
	// Discovery is nil when discovery is off.
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`
	// Safety is what the node's bounds hold and what they refused or forgot
	// (docs/security.md).
	Safety SafetyDoc `json:"safety"`
}

// SafetyDoc is the safety part of StatusDoc.
type SafetyDoc struct {
	// AuditBroken names where the audit log's chain was found broken at start ("" when
	// intact): the node started a new anchored segment and went on delivering. Run
	// `iacp-node audit verify`.
	AuditBroken string `json:"audit_broken,omitempty"`
	// QueueBytes is what frames read and not yet served hold now; QueuePeakBytes the most
	// ever, in all and for one peer.
	QueueBytes         int64 `json:"queue_bytes"`
	QueuePeakBytes     int64 `json:"queue_peak_bytes"`
	QueuePeakPeerBytes int64 `json:"queue_peak_peer_bytes"`
	// ReplayIDs of ReplayCapacity are remembered; ReplayEvicted were forgotten early to make
	// room for another peer's.
	ReplayIDs      int    `json:"replay_ids"`
	ReplayCapacity int    `json:"replay_capacity"`
	ReplayEvicted  uint64 `json:"replay_evicted"`
	// Pins and Agents are the trust pins and the agents in the directory.
	Pins   int `json:"pins"`
	Agents int `json:"agents"`
	// InboxBytes of InboxMaxBytes are held for the agent.
	InboxBytes    int `json:"inbox_bytes"`
	InboxMaxBytes int `json:"inbox_max_bytes"`
	// LocalHealth is the node's own timeliness score (0 healthy .. 8); above 0 it waits
	// LocalHealth+1 times longer before it suspects other agents.
	LocalHealth int `json:"local_health"`
	// GossipRejected and GossipIgnored count gossip messages refused by the validators.
	GossipRejected uint64 `json:"gossip_rejected"`
	GossipIgnored  uint64 `json:"gossip_ignored"`
	// DHTRecords and DHTBytes are the DHT record store; DHTEvicted the records evicted.
	DHTRecords int    `json:"dht_records"`
	DHTBytes   int64  `json:"dht_bytes"`
	DHTEvicted uint64 `json:"dht_evicted"`
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

// AgentDoc is one row of GET /v1/agents: an agent's liveness as gossip heartbeats show it.
type AgentDoc struct {
	AgentID     string    `json:"agent_id"`
	PeerID      string    `json:"peer_id"`
	State       string    `json:"state"`
	LastSeen    time.Time `json:"last_seen"`
	Load        float64   `json:"load"`
	ActiveTasks int       `json:"active_tasks"`
	Version     string    `json:"version,omitempty"`
	// Watched says the node probes the agent directly, every heartbeat interval: it
	// exchanged messages with it or discovered it (docs/scale.md).
	Watched bool `json:"watched"`
	// StalenessSeconds is how long the agent's silence may last before the node suspects
	// it: how stale this row may be. Three of the node's intervals for a watched agent, three
	// of the agent's mesh beats (stretched in a large mesh) for any other.
	StalenessSeconds float64 `json:"staleness_seconds"`
	// Circuit is the state of this node's circuit breaker to the agent (closed, open,
	// half-open), when the coordinator keeps one (docs/coordination.md).
	Circuit string `json:"circuit,omitempty"`
}

// AgentsDoc is GET /v1/agents.
type AgentsDoc struct {
	Agents []AgentDoc `json:"agents"`
	// Breakers are the coordinator's circuit breakers, heard of by heartbeat or not.
	Breakers []coord.Breaker `json:"breakers"`
	// Note explains an empty list that is not about the mesh (gossip off).
	Note string `json:"note,omitempty"`
}

// RecordDoc is an agent record: GET /v1/resolve/{agent_id}, and one row of discover.
type RecordDoc struct {
	AgentID  string            `json:"agent_id"`
	PeerID   string            `json:"peer_id"`
	Addrs    []string          `json:"addrs"`
	Manifest protocol.Manifest `json:"manifest"`
	Expires  time.Time         `json:"expires"`
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
	Query   protocol.CapabilityQuery `json:"query"`
	Matches []MatchDoc               `json:"matches"`
}

// PeerDoc is one connected libp2p peer.
type PeerDoc struct {
	PeerID    string   `json:"peer_id"`
	Addrs     []string `json:"addrs"`
	LatencyMs *float64 `json:"latency_ms,omitempty"`
}

// PeersDoc is GET /v1/peers.
type PeersDoc struct {
	Peers []PeerDoc `json:"peers"`
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
	Seq      uint64    `json:"seq"`
	Received time.Time `json:"received"`
	Peer     string    `json:"peer"`
	// MessageID is the IACP message id, what POST /v1/inbox/{message_id}/ack takes, whatever
	// dialect the message is shown in.
	MessageID string `json:"message_id"`
	// Dialect is the dialect Message is in, when it is not IACP (docs/dialects.md): the
	// agent's own, or ?dialect=. Client.Inbox always asks for IACP.
	Dialect string `json:"dialect,omitempty"`
	// Message is the message: an IACP document, or the document of Dialect.
	Message *protocol.Message `json:"message"`
}

// ConversationDoc is GET /v1/conversations/{id}: the conversation as the node's audit log
// recorded it (node.Node.Conversation).
type ConversationDoc struct {
	Conversation string                   `json:"conversation"`
	Messages     []node.ConversationEntry `json:"messages"`
	// More says that more entries follow: ask again with ?after=NextAfter.
	More bool `json:"more"`
	// NextAfter is the audit seq of the last entry (the request's ?after= when there is
	// none): the ?after= that follows on.
	NextAfter uint64 `json:"next_after"`
}

// InboxDoc is one page of GET /v1/inbox.
type InboxDoc struct {
	Messages []InboxItem `json:"messages"`
	// More says that more messages wait after this page: ask again with ?after=NextAfter.
	More bool `json:"more"`
	// NextAfter is the seq of the page's last message (the request's ?after= when the page
	// is empty): the ?after= of the next page, or of the next long poll.
	NextAfter uint64 `json:"next_after"`
}

// AckResult answers POST /v1/inbox/{message_id}/ack.
type AckResult struct {
	Acked string `json:"acked"`
}

// Event kinds on the event stream (GET /v1/events?kinds=...).
const (
	KindEvent      = "event"          // a broadcast event from gossip
	KindGroup      = "group"          // a message to one of our capability groups
	KindHeartbeat  = "heartbeat"      // a heartbeat from gossip
	KindTransition = "transition"     // a liveness transition of an agent
	KindMessage    = "message"        // an inbound message arrived in the inbox
	KindTrust      = "trust.conflict" // a claim on an agent id bound to another peer
	KindBreaker    = "breaker"        // a circuit breaker of the coordinator changed state
)

// EventItem is one Server-Sent Event's data.
type EventItem struct {
	Kind    string    `json:"kind"`
	At      time.Time `json:"at"`
	AgentID string    `json:"agent_id,omitempty"`
	PeerID  string    `json:"peer_id,omitempty"`
	// Message is the document of event, group and heartbeat items.
	Message    *protocol.Message          `json:"message,omitempty"`
	Event      *protocol.EventPayload     `json:"event,omitempty"`
	Group      string                     `json:"group,omitempty"`
	Heartbeat  *protocol.HeartbeatPayload `json:"heartbeat,omitempty"`
	Transition *TransitionDoc             `json:"transition,omitempty"`
	Inbound    *InboundNotice             `json:"inbound,omitempty"`
	// Conflict is the claim of a trust item (event name trust.conflict in docs/trust.md).
	Conflict *node.TrustConflict `json:"conflict,omitempty"`
	// Breaker is the transition of a breaker item (docs/coordination.md).
	Breaker *coord.BreakerTransition `json:"breaker,omitempty"`
	// Approval is an approval item's change: a message held, approved, rejected or expired
	// (docs/coordination.md "Approval").
	Approval *node.ApprovalEvent `json:"approval,omitempty"`
}

// TrustDoc is GET /v1/trust: who may speak for which agent id on this node.
type TrustDoc struct {
	// Mode is "open" (trust on first use) or "allowlist".
	Mode string `json:"mode"`
	// Pins are the bindings, sorted by agent id.
	Pins []node.Pin `json:"pins"`
	// Conflicts are the last claims that contradicted a binding (at most 256), oldest first;
	// ConflictsTotal counts all of them.
	Conflicts      []node.TrustConflict `json:"conflicts"`
	ConflictsTotal uint64               `json:"conflicts_total"`
}

// ForgetRequest is POST /v1/trust/forget: the pin of one agent id, or every pin of a peer.
type ForgetRequest struct {
	AgentID string `json:"agent_id,omitempty"`
	PeerID  string `json:"peer_id,omitempty"`
}

// InviteRequest is POST /v1/trust/invites: a one-time invitation, bound to AgentID when set,
// valid for TTL (a Go duration; default 24h, at most 720h).
type InviteRequest struct {
	AgentID string `json:"agent_id,omitempty"`
	TTL     string `json:"ttl,omitempty"`
	// Grants are the permissions the joined agent's certificate grants (ACP v2
	// security.permissions, and what A2ACP tokens for it may carry).
	Grants []string `json:"grants,omitempty"`
}

// InviteDoc is the invitation: the token `iacp-node init --join` takes.
type InviteDoc struct {
	Token   string    `json:"token"`
	AgentID string    `json:"agent_id,omitempty"`
	Grants  []string  `json:"grants,omitempty"`
	Expires time.Time `json:"expires"`
}

// RevokeRequest is POST /v1/trust/revoke: an agent id (all its certificates) or a
// certificate id.
type RevokeRequest struct {
	Target string `json:"target"`
}

// CertificatesDoc is GET /v1/trust/certificates and the answer of POST /v1/trust/revoke: the
// certificates the mesh authority issued (or revoked now), unexpired.
type CertificatesDoc struct {
	Certificates []node.IssuedCertificate `json:"certificates"`
}

// TokenRequest is the body of POST /auth/token, in the A2ACP draft's shape.
type TokenRequest = node.TokenRequest

// TokenDoc is the answer of POST /auth/token, in the A2ACP draft's shape (specs/003, "Token
// Acquisition").
type TokenDoc struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ForgetResult says how many pins went.
type ForgetResult struct {
	Forgotten int `json:"forgotten"`
}

// TransitionDoc is a liveness transition.
type TransitionDoc struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason,omitempty"`
}

// InboundNotice says a message arrived in the inbox (take it with GET /v1/inbox).
type InboundNotice struct {
	Seq       uint64        `json:"seq"`
	MessageID string        `json:"message_id"`
	Type      protocol.Type `json:"type"`
	Intent    string        `json:"intent"`
	Channel   string        `json:"channel"`
}

// Health is GET /healthz.
type Health struct {
	Status  string `json:"status"`
	AgentID string `json:"agent_id"`
}
