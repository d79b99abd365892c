import type { AckResult, AgentRecord, AgentsResult, AskRequest, AskResult, CancelResult, CapabilityQuery, ConversationPage, DiscoverResult, EventItem, EventKind, EventPayload, Health, InboxItem, InboxPage, Message, MessageInput, NodeStatus, OutboxResult, OutgoingMessage, PeersResult, SendResult, SendStatus } from "./types.js";
/** The path of the IACP HTTP binding. */
export declare const MESSAGE_PATH = "/.well-known/iacp/v1/message";
/** The statuses a send answers with (docs/openapi.yaml's SendResult.status). */
export declare const SEND_STATUSES: readonly SendStatus[];
/**
 * The endpoints of docs/openapi.yaml this client calls, as "METHOD path": a test holds them to
 * the spec, so that the client cannot drift from it.
 */
export declare const ENDPOINTS: readonly string[];
/** The data dir the CLI uses when none is named: `$IACP_DATA_DIR`, else `.data/node`. */
export declare function defaultDataDir(): string;
/** Default timeout of one call, in milliseconds. */
export declare const DEFAULT_TIMEOUT = 30000;
/**
 * Default bound of the answers a client reads: 17 MiB, one message of the node's default
 * `max_message_bytes` (16 MiB) and 1 MiB of JSON around it (as the Go client).
 */
export declare const DEFAULT_MAX_ANSWER_BYTES: number;
/** Options of {@link Client}. */
export interface ClientOptions {
    /**
     * The API's address, `host:port` or `http://host:port`. Default: read from
     * `<dataDir>/api.addr`, which a running node writes.
     */
    addr?: string;
    /** The API token. Default: read from `<dataDir>/api.token`. */
    token?: string;
    /**
     * The node's data dir, where `api.addr` and `api.token` are. Default `$IACP_DATA_DIR`, else
     * `.data/node` (as the CLI).
     */
    dataDir?: string;
    /**
     * Milliseconds one call may take, default 30 s. A call that waits on the node (`request`'s
     * `wait`, the inbox's `wait`) gets its wait on top.
     */
    timeout?: number;
    /** The largest answer read, in bytes; default {@link DEFAULT_MAX_ANSWER_BYTES}. */
    maxAnswerBytes?: number;
}
/** Options every call takes. */
export interface CallOptions {
    /** Aborts the call: it rejects with the signal's reason (an `AbortError` by default). */
    signal?: AbortSignal;
    /**
     * Milliseconds before the call fails with a {@link TimeoutError}: default the client's
     * timeout, plus the call's `wait` when it has one. Taken as given when set.
     */
    timeout?: number;
}
/** Options of {@link Client.send}. */
export interface SendOptions extends CallOptions {
    /**
     * Queue the message even when no agent of its recipient id is known yet (one that will
     * join later). Without it, an id nothing knows rejects at once with AGENT_NOT_FOUND.
     */
    queueUnknown?: boolean;
}
/** Options of {@link Client.request}. */
export interface RequestOptions extends SendOptions {
    /** How long the node waits for the response, in milliseconds (default 30 s, at most 5 min). */
    wait?: number;
}
/** Options of {@link Client.inbox}. */
export interface InboxOptions extends CallOptions {
    /** Only messages with a seq greater than this (the `next_after` of the previous page). */
    after?: number;
    /** Long-poll up to this many milliseconds while the inbox is empty. */
    wait?: number;
    /** At most this many messages (1-1000; the node's default 1000). */
    limit?: number;
    /** The page's byte budget (default 8 MiB, kept under the client's answer limit). */
    maxBytes?: number;
}
/** Options of {@link Client.messages}. */
export interface MessagesOptions {
    /** Stops the iteration: the loop simply ends (no error). */
    signal?: AbortSignal;
    /** Start after this seq (default 0: every message waiting). */
    after?: number;
    /** Each long poll waits up to this many milliseconds (default 30 s). */
    wait?: number;
    /** Messages per page (1-1000). */
    limit?: number;
    /**
     * `true` (the default): follow the inbox for ever, long-polling while it is empty.
     * `false`: end once every message waiting now was yielded.
     */
    follow?: boolean;
    /** The timeout of each page's call (default the client's, plus `wait`). */
    timeout?: number;
}
/** Options of {@link Client.events}. */
export interface EventsOptions {
    /** Only these kinds (default: all). */
    kinds?: EventKind[];
    /** Only items about this agent id. */
    agent?: string;
    /** Only messages to this capability group. */
    group?: string;
    /** Ends the stream: the loop simply ends (no error). */
    signal?: AbortSignal;
    /** Milliseconds to wait for the stream to open (default the client's timeout). */
    timeout?: number;
    /**
     * Milliseconds of silence after which the stream is taken for dead and fails with a
     * {@link TimeoutError} (default 45 s; the node sends a keep-alive every 15 s).
     */
    idleTimeout?: number;
    /**
     * Called once the node accepted the stream: every item from then on will be yielded (call
     * what should be watched after it, not before, to miss nothing).
     */
    onOpen?: () => void;
}
/** Options of {@link Client.conversation}. */
export interface ConversationOptions extends CallOptions {
    /** Only entries after this audit seq (the `next_after` of the previous page). */
    after?: number;
    /** At most this many entries (1-10,000; the node's default 1000). */
    limit?: number;
}
/**
 * A client of one node's local API (docs/api.md). It needs only Node.js 20+: `fetch` and
 * streams. Every call takes an optional `AbortSignal` and timeout, and fails with an
 * {@link IACPError}: the node's refusal with its code and HTTP status,
 * {@link NodeUnreachableError} when no node answers, {@link UnauthorizedError} for a wrong
 * token, {@link TimeoutError} when time ran out.
 *
 * @example
 * const client = new Client({ dataDir: ".data/a" });
 * const answer = await client.request({ to: "acme:b:bot", intent: "handoff", payload: { task: "review" } });
 */
export declare class Client {
    #private;
    constructor(options?: ClientOptions);
    /** The data dir the client reads `api.addr` and `api.token` from. */
    get dataDir(): string;
    /**
     * Sends one message (HTTP 202) and resolves once the recipient's node has it (status
     * `accepted`), or once it is queued for a known agent that cannot be reached now (status
     * `queued`: the node retries until its TTL; {@link Client.cancel} takes it back). An agent id
     * nothing knows (a typo, most often) rejects at once with AGENT_NOT_FOUND, unless
     * `queueUnknown`. The node fills and signs what the message leaves out. A request sent this
     * way is answered later, in the inbox; use {@link Client.request} to wait for the answer.
     */
    send(message: MessageInput | OutgoingMessage, options?: SendOptions): Promise<SendResult>;
    /**
     * Takes a queued message (one {@link Client.send} answered `queued`) out of the node's
     * outbox: it is never delivered. A message the outbox does not hold rejects (HTTP 404).
     */
    cancel(message: string | SendResult, options?: CallOptions): Promise<CancelResult>;
    /**
     * Sends a request and waits up to `wait` (default 30 s) for its response, which it returns.
     * An `error` answer rejects with an {@link IACPError} of its code; no answer in time with a
     * {@link TimeoutError} (HTTP 504), and the request is never delivered after that: it lives
     * no longer than `wait`. An agent id nothing knows rejects at once with AGENT_NOT_FOUND.
     */
    request(message: MessageInput | OutgoingMessage, options?: RequestOptions): Promise<Message>;
    /** Publishes an event to every agent (gossip). Fails with 503 when gossip is off. */
    broadcast(event: EventPayload, options?: CallOptions): Promise<SendResult>;
    /**
     * A broadcast query (docs/coordination.md): asks a capability group, or every agent, over
     * gossip, and resolves with the direct answers once `count` agents answered, every agent of
     * `expect` answered, or `deadline` (ms, default 2,000) passed. Bad input rejects with an
     * {@link IACPError} PAYLOAD_INVALID; no member reachable, AGENT_NOT_FOUND.
     */
    ask(request?: AskRequest, options?: CallOptions): Promise<AskResult>;
    /** Runs a capability query; the matches come best first. */
    discover(query: CapabilityQuery, options?: CallOptions): Promise<DiscoverResult>;
    /** Returns an agent's record (AGENT_NOT_FOUND, HTTP 404, when no node knows it). */
    resolve(agentId: string, options?: CallOptions): Promise<AgentRecord>;
    /** Returns the liveness table: the agents whose heartbeats this node hears. */
    agents(options?: CallOptions): Promise<AgentsResult>;
    /** Returns the node's status. */
    status(options?: CallOptions): Promise<NodeStatus>;
    /** Returns the connected libp2p peers. */
    peers(options?: CallOptions): Promise<PeersResult>;
    /** Returns the durable outbox: messages the node is still trying to deliver. */
    outbox(options?: CallOptions): Promise<OutboxResult>;
    /** Calls `/healthz`, which needs no token. */
    health(options?: CallOptions): Promise<Health>;
    /**
     * Returns one page of the inbox, oldest first: the messages with a seq greater than
     * `after`, long-polling up to `wait` while there is none. Listing takes nothing: acknowledge
     * what you handled with {@link Client.ack}. While `more` is true, more messages wait: ask
     * again with `after: page.next_after`.
     */
    inbox(options?: InboxOptions): Promise<InboxPage>;
    /**
     * Follows the inbox: yields every message waiting, page after page, then long-polls for
     * new ones (or, with `follow: false`, ends). Nothing is taken: acknowledge each message
     * you handled with {@link Client.ack}; one you leave stays in the inbox for the next
     * reader, but this iteration goes past it. Aborting `signal` ends the loop.
     *
     * @example
     * for await (const item of client.messages({ signal })) {
     *   console.log(item.message.message.intent);
     *   await client.ack(item.message_id);
     * }
     */
    messages(options?: MessagesOptions): AsyncGenerator<InboxItem, void, undefined>;
    /** Takes a message out of the inbox for good (PAYLOAD_INVALID, HTTP 404, when it is not there). */
    ack(messageId: string, options?: CallOptions): Promise<AckResult>;
    /**
     * Lists a conversation from the node's audit log: every message whose id or correlation id
     * is `id`, and the answers to those, oldest first, with what happened to each here.
     * Follow it with `after: page.next_after` while `more` is true. HTTP 409 when the node's
     * audit log is off.
     */
    conversation(id: string, options?: ConversationOptions): Promise<ConversationPage>;
    /**
     * Follows the node's event stream (Server-Sent Events): broadcast events, group messages,
     * heartbeats, liveness transitions, arrivals in the inbox and trust conflicts, filtered by
     * `kinds`, `agent` and `group`. Aborting `signal` (or leaving the loop) closes the stream and
     * ends the loop; a stream the node closes fails with {@link NodeUnreachableError}, a silent
     * one with {@link TimeoutError}.
     *
     * @example
     * for await (const ev of client.events({ kinds: ["event"], signal })) console.log(ev.event?.event_type);
     */
    events(options?: EventsOptions): AsyncGenerator<EventItem, void, undefined>;
}
/** A {@link MessageInput} as the document the binding takes; a document as it is. */
export declare function toOutgoing(m: MessageInput | OutgoingMessage): OutgoingMessage;
