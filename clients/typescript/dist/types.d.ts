/** The five IACP message types. */
export type MessageType = "request" | "response" | "event" | "error" | "heartbeat";
/**
 * What a message is for: one of the standard intents, or a custom one that starts with `x-`.
 * (`string & {}` keeps editor completion for the standard ones.)
 */
export type Intent = "handoff" | "query" | "negotiate" | "notify" | "health" | (string & {});
/**
 * The IACP error codes of the registry (docs/protocol.md), and `NODE_UNREACHABLE`, which this
 * client uses when no node answered at all (it never travels on the wire).
 */
export type ErrorCode = "VERSION_UNSUPPORTED" | "IDENTITY_INVALID" | "CAPABILITY_MISMATCH" | "RATE_LIMITED" | "TIMEOUT" | "CHANNEL_UNKNOWN" | "PAYLOAD_INVALID" | "INTERNAL_ERROR" | "AGENT_NOT_FOUND" | "PERMISSION_DENIED" | "DUPLICATE" | "NODE_UNREACHABLE" | (string & {});
/** A JSON object: what every IACP payload is. */
export type Payload = {
    [key: string]: unknown;
};
/** Who sent a message, with the signature the node made. */
export interface Sender {
    agent_id: string;
    identity_sig?: string;
    /** The libp2p peer id of the signing key. */
    peer_id?: string;
    [extra: string]: unknown;
}
/** The agent a message is for, and its logical channel. */
export interface Recipient {
    /** An agent id (`namespace:host:name`), or `*` for a broadcast. */
    agent_id: string;
    /** `handoff`, `query`, `coordination`, `notification`, `health`, or a custom `x-` one. */
    channel?: string;
    [extra: string]: unknown;
}
/** The envelope of a message as the node sealed it: routing, identity and time. */
export interface Envelope {
    version: string;
    message_id: string;
    /** A request's own message id; an answer's, the id of the request it answers. */
    correlation_id?: string;
    sender: Sender;
    recipient: Recipient;
    /** RFC 3339 UTC time of creation, as the sender wrote it (the signature covers it). */
    timestamp: string;
    ttl_seconds: number;
    [extra: string]: unknown;
}
/** The typed part of a message. */
export interface Body<P extends Payload = Payload> {
    type: MessageType;
    intent: Intent;
    payload: P;
    [extra: string]: unknown;
}
/** Top-level security members (docs/trust.md): an A2ACP token, ACP v2 permissions. */
export interface Security {
    auth_token?: string;
    permissions?: string[];
    [extra: string]: unknown;
}
/** One IACP document as it travels: signed, every envelope field filled. */
export interface Message<P extends Payload = Payload> {
    envelope: Envelope;
    message: Body<P>;
    security?: Security;
    [extra: string]: unknown;
}
/**
 * A document to send, in the wire's shape. The node fills what it leaves out: `version`,
 * `message_id`, `timestamp`, `ttl_seconds` (1 h), a request's `correlation_id`, the sender
 * and the signature (the sender is always the node's own agent). `type` defaults to
 * `request`; the payload to `{}`.
 */
export interface OutgoingMessage {
    envelope: {
        recipient: Recipient;
        message_id?: string;
        correlation_id?: string;
        ttl_seconds?: number;
        [extra: string]: unknown;
    };
    message: {
        type?: MessageType;
        intent: Intent;
        payload?: Payload;
        [extra: string]: unknown;
    };
    security?: Security;
    [extra: string]: unknown;
}
/**
 * A message to send, in short: the client turns it into an {@link OutgoingMessage}.
 *
 * @example
 * { to: "acme:b:bot", intent: "handoff", payload: { task: "review PR 12" } }
 */
export interface MessageInput {
    /** The recipient's agent id. */
    to: string;
    intent: Intent;
    /** Default `request`. */
    type?: MessageType;
    /** A JSON object; default `{}`. Numbers must be exact doubles: send 64-bit ids as strings. */
    payload?: Payload;
    /** Default: the node's channel for the intent (`handoff` for handoff, `query` for query...). */
    channel?: string;
    /** Default: the node's, 1 hour. */
    ttlSeconds?: number;
    /** Answers set it to the message id of the request they answer. */
    correlationId?: string;
    /** Default: a fresh UUID the node makes. */
    messageId?: string;
    security?: Security;
}
/** The payload of an `error` message, and the `error` member of the API's error answers. */
export interface ErrorPayload {
    code: ErrorCode;
    message: string;
    detail?: unknown;
    retryable: boolean;
    /** Seconds, with RATE_LIMITED. */
    retry_after?: number;
}
/** The API's error answer: `{"error": {...}, "message_id": "..."}`. */
export interface ErrorDocument {
    error: ErrorPayload;
    message_id?: string;
}
/** The payload of a `response`: a status and whatever the answering agent adds. */
export interface ResponsePayload extends Payload {
    status: "accepted" | "rejected" | "pending" | "counter";
    detail?: string;
}
/** The payload of an `event` message, and the body of POST /v1/broadcast. */
export interface EventPayload {
    event_type: string;
    detail?: string;
    severity?: "info" | "warning" | "critical";
    data?: unknown;
}
/** The payload of a `heartbeat`, and an agent's own status in GET /v1/status. */
export interface HeartbeatPayload {
    status: "alive" | "busy" | "draining" | "offline";
    load: number;
    active_tasks: number;
    version?: string;
}
/** Tools, models and domains. */
export interface CapabilitySet {
    tools?: string[];
    models?: string[];
    domains?: string[];
}
/** A capability query (IACP "Capability Query"), what {@link Client.discover} takes. */
export interface CapabilityQuery {
    /** What a match must have. */
    required?: CapabilitySet;
    /** What ranks a match higher. */
    preferred?: CapabilitySet;
    constraints?: {
        max_latency_ms?: number;
        locality?: string;
    };
}
/** An agent's capability manifest. */
export interface Manifest {
    agent_id: string;
    name?: string;
    tools?: string[];
    models?: string[];
    max_context_tokens?: number;
    domains?: string[];
    rate_limit?: {
        requests_per_minute?: number;
        tokens_per_minute?: number;
    };
    trust_score?: number;
    deployment?: string;
    version?: string;
    uptime_seconds?: number;
    [extra: string]: unknown;
}
/** The answer of a message POST without wait (202) and of a broadcast. */
export interface SendResult {
    message_id: string;
    /**
     * `accepted`: the recipient's node has the message (for a broadcast: it was published);
     * `queued`: the recipient is known but unreachable now, and the message waits in the
     * outbox ({@link Client.cancel} takes it back); `pending`: held until the node's operator
     * approves it.
     */
    status: SendStatus;
}
/** The statuses of a {@link SendResult}. */
export type SendStatus = "accepted" | "queued" | "pending";
/** DELETE /v1/outbox/{message_id}: the message taken out of the outbox. */
export interface CancelResult {
    cancelled: string;
}
/** A broadcast query: the body of POST /v1/ask (docs/coordination.md). */
export interface AskRequest {
    /** The capability group asked; absent or empty asks every agent. */
    group?: string;
    /** query (the default: every node answers with its manifest), handoff, negotiate or x-.... */
    intent?: string;
    /** The request's payload, a JSON object. */
    payload?: Record<string, unknown>;
    /** How long answers are collected, in milliseconds (default 2,000; at most 300,000). */
    deadline?: number;
    /** Answer as soon as this many agents answered (default and at most 1,024). */
    count?: number;
    /** Agents expected to answer: the query ends once all did, and lists the others in `missing`. */
    expect?: string[];
}
/** One agent's answer to a broadcast query. */
export interface AskAnswer {
    agent_id: string;
    peer_id: string;
    status: string;
    payload: Record<string, unknown>;
    latency_ms: number;
}
/** One agent's error answer to a broadcast query. */
export interface AskError {
    agent_id: string;
    peer_id: string;
    code: string;
    message: string;
    latency_ms: number;
}
/** What a broadcast query collected: POST /v1/ask. */
export interface AskResult {
    query_id: string;
    group: string;
    /** Why it ended: count, expected, deadline or canceled. */
    ended: string;
    answers: AskAnswer[];
    errors: AskError[];
    /** The expected agents that did not answer before the query closed. */
    missing: string[];
    /** Answers dropped: a second one from the same agent, or past the count. */
    refused: number;
}
/** An agent record: GET /v1/resolve/{agent_id}, and each match of discover. */
export interface AgentRecord {
    agent_id: string;
    peer_id: string;
    addrs: string[];
    manifest: Manifest;
    /** RFC 3339. */
    expires: string;
}
/** One agent that satisfies a capability query, best first. */
export interface Match extends AgentRecord {
    preferred_matches: number;
    load?: number;
    latency_ms?: number;
}
/** GET /v1/discover. */
export interface DiscoverResult {
    query: CapabilityQuery;
    matches: Match[];
}
/** One row of GET /v1/agents: an agent's liveness as gossip heartbeats show it. */
export interface AgentLiveness {
    agent_id: string;
    peer_id: string;
    /** `alive`, `suspect`, `dead`... */
    state: string;
    last_seen: string;
    load: number;
    active_tasks: number;
    version?: string;
}
/** GET /v1/agents. */
export interface AgentsResult {
    agents: AgentLiveness[];
    /** Explains an empty list that is not about the mesh (gossip off). */
    note?: string;
}
/** GET /v1/status. */
export interface NodeStatus {
    agent_id: string;
    peer_id: string;
    addrs: string[];
    status: HeartbeatPayload;
    uptime_seconds: number;
    peers: number;
    inbox_depth: number;
    inbox: boolean;
    max_message_bytes: number;
    gossip: boolean;
    webhook?: string;
    /** Absent when discovery is off. */
    discovery?: {
        mode: string;
        bootstrapped: boolean;
        bootstrap_configured: number;
        bootstrap_answered: number;
        routing_table_size: number;
        cached_agents: number;
        published?: string;
        last_error?: string;
    };
    /** What the node's bounds hold and what they refused or forgot (docs/security.md). */
    safety: {
        [key: string]: number | string;
    };
    [extra: string]: unknown;
}
/** GET /healthz. */
export interface Health {
    status: string;
    agent_id: string;
}
/** One connected libp2p peer (GET /v1/peers). */
export interface Peer {
    peer_id: string;
    addrs: string[];
    latency_ms?: number;
}
/** GET /v1/peers. */
export interface PeersResult {
    peers: Peer[];
}
/** GET /v1/outbox: the messages waiting in the durable outbox. */
export interface OutboxResult {
    durable: boolean;
    entries: OutboxEntry[];
    note?: string;
}
/** One message the node still tries to deliver. */
export interface OutboxEntry {
    message_id: string;
    recipient: string;
    seq: number;
    enqueued_at: string;
    expires_at: string;
    attempts: number;
    next_attempt_at: string;
    last_error?: string;
}
/** One inbound message waiting for the agent. */
export interface InboxItem {
    /** The inbox's sequence number: `after` of the next page. */
    seq: number;
    /** RFC 3339. */
    received: string;
    /** The libp2p peer that delivered it. */
    peer: string;
    /** The IACP message id: what {@link Client.ack} takes. */
    message_id: string;
    /** Always IACP with this client (it asks for `?dialect=iacp`). */
    message: Message;
    dialect?: string;
}
/** One page of GET /v1/inbox. */
export interface InboxPage {
    messages: InboxItem[];
    /** More messages wait after this page: ask again with `after: next_after`. */
    more: boolean;
    /** The seq of the page's last message (`after` itself when the page is empty). */
    next_after: number;
}
/** POST /v1/inbox/{message_id}/ack. */
export interface AckResult {
    acked: string;
}
/** One entry of a conversation, from the node's audit log. */
export interface ConversationEntry {
    /** The audit log's sequence number. */
    seq: number;
    time: string;
    /** `sent`, `delivered`, `received`, `acked`, `refused` or `expired`. */
    event: string;
    message_id: string;
    correlation_id?: string;
    type?: MessageType;
    intent?: Intent;
    from?: string;
    to?: string;
    /** Why a message was refused or expired. */
    code?: ErrorCode;
    reason?: string;
    payload?: Payload;
    /** Instead of the payload when the node runs with audit_payloads off. */
    payload_sha256?: string;
}
/** GET /v1/conversations/{id}. */
export interface ConversationPage {
    conversation: string;
    messages: ConversationEntry[];
    /** More entries follow: ask again with `after: next_after`. */
    more: boolean;
    next_after: number;
}
/** The kinds of the event stream. */
export type EventKind = "event" | "group" | "heartbeat" | "transition" | "message" | "trust.conflict";
/** One item of the event stream (GET /v1/events); which members are set depends on `kind`. */
export interface EventItem {
    kind: EventKind | (string & {});
    at: string;
    agent_id?: string;
    peer_id?: string;
    /** The document of `event`, `group` and `heartbeat` items. */
    message?: Message;
    event?: EventPayload;
    group?: string;
    heartbeat?: HeartbeatPayload;
    transition?: {
        from: string;
        to: string;
        reason?: string;
    };
    /** A `message` item: a message arrived in the inbox (take it with the inbox calls). */
    inbound?: {
        seq: number;
        message_id: string;
        type: MessageType;
        intent: Intent;
        channel: string;
    };
    /** A `trust.conflict` item: a claim on an agent id bound to another peer. */
    conflict?: {
        seq: number;
        at: string;
        agent_id: string;
        bound_peer: string;
        claimant_peer: string;
        source: string;
    };
    /** The SSE `id:` of the item, when the node gave one. */
    id?: string;
}
