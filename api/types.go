package api

import (
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/coord"
	"github.com/iacp-node/iacp-node/node"
	"github.com/iacp-node/iacp-node/protocol"
)

// The documents the API answers with. The JSON names are the API's; docs/api.md shows each.
// Those made of plain values are the Go client's (apiclient), under the same names; those
// that hold the node's own types are defined here, and apiclient mirrors them (a test ties
// each pair).

type (
	// SendResult answers a message POST (202) and a broadcast.
	SendResult = apiclient.SendResult
	// CancelResult answers DELETE /v1/outbox/{message_id}.
	CancelResult = apiclient.CancelResult
	// SafetyDoc is the safety part of StatusDoc: what the node's bounds hold and refused.
	SafetyDoc = apiclient.SafetyDoc
	// DiscoveryStatus is the discovery part of StatusDoc.
	DiscoveryStatus = apiclient.DiscoveryStatus
	// AgentDoc is one row of GET /v1/agents.
	AgentDoc = apiclient.AgentDoc
	// PeerDoc is one connected libp2p peer, and the path its connections take.
	PeerDoc = apiclient.PeerDoc
	// PeersDoc is GET /v1/peers: the connected peers, and how others reach this node.
	PeersDoc = apiclient.PeersDoc
	// NATDoc is what the node knows of its reachability (node.NATStatus).
	NATDoc = apiclient.NATDoc
	// OutboxItem is one message waiting in the durable outbox.
	OutboxItem = apiclient.OutboxItem
	// OutboxDoc is GET /v1/outbox.
	OutboxDoc = apiclient.OutboxDoc
	// AckResult answers POST /v1/inbox/{message_id}/ack.
	AckResult = apiclient.AckResult
	// Health is GET /healthz.
	Health = apiclient.Health
)

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

// InviteRequest is POST /v1/trust/invites: a one-time invitation, bound to AgentID when set
// (else the joiner chooses any agent id that no other peer holds), valid for TTL (a Go
// duration; default 24h, at most 720h).
type InviteRequest struct {
	AgentID string `json:"agent_id,omitempty"`
	TTL     string `json:"ttl,omitempty"`
	// Grants are the permissions the joined agent's certificate grants (ACP v2
	// security.permissions, and what A2ACP tokens for it may carry).
	Grants []string `json:"grants,omitempty"`
	// Replace lets the joiner take AgentID from the peer that holds it now, whose certificates
	// are revoked when the joiner's is issued (an agent moving to a new key).
	Replace bool `json:"replace,omitempty"`
}

// InviteDoc is the invitation: the token `iacp-node init --join` takes.
type InviteDoc struct {
	Token   string   `json:"token"`
	AgentID string   `json:"agent_id,omitempty"`
	Grants  []string `json:"grants,omitempty"`
	// AnyAgent says that the invitation names no agent id: its holder chooses any id that no
	// other peer holds.
	AnyAgent bool `json:"any_agent,omitempty"`
	// Replace says that the joiner replaces AgentID's current holder.
	Replace bool      `json:"replace,omitempty"`
	Expires time.Time `json:"expires"`
}

// RevokeRequest is POST /v1/trust/revoke: an agent id (all its certificates) or a
// certificate id.
type RevokeRequest struct {
	Target string `json:"target"`
	// DryRun answers the certificates the revocation would revoke, and revokes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// AllPeers revokes an agent id's certificates even when they are held on several peers;
	// without it that is refused, naming each certificate.
	AllPeers bool `json:"all_peers,omitempty"`
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
