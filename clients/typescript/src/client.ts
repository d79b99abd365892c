import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";

import {
  AnswerTooLargeError,
  IACPError,
  NodeUnreachableError,
  TimeoutError,
  UnauthorizedError,
  errorFromDocument,
} from "./errors.js";
import { parseSSE } from "./sse.js";
import type {
  AckResult,
  AgentRecord,
  AgentsResult,
  AskRequest,
  AskResult,
  CancelResult,
  CapabilityQuery,
  ConversationPage,
  DiscoverResult,
  EventItem,
  EventKind,
  EventPayload,
  Health,
  InboxItem,
  InboxPage,
  Message,
  MessageInput,
  NodeStatus,
  OutboxResult,
  OutgoingMessage,
  PeersResult,
  SendResult,
  SendStatus,
} from "./types.js";

/** The path of the IACP HTTP binding. */
export const MESSAGE_PATH = "/.well-known/iacp/v1/message";

/** The statuses a send answers with (docs/openapi.yaml's SendResult.status). */
export const SEND_STATUSES: readonly SendStatus[] = ["accepted", "queued", "pending"];

/**
 * The endpoints of docs/openapi.yaml this client calls, as "METHOD path": a test holds them to
 * the spec, so that the client cannot drift from it.
 */
export const ENDPOINTS: readonly string[] = [
  `POST ${MESSAGE_PATH}`,
  "POST /v1/broadcast",
  "POST /v1/ask",
  "POST /v1/discover",
  "GET /v1/resolve/{agent_id}",
  "GET /v1/agents",
  "GET /v1/status",
  "GET /v1/peers",
  "GET /v1/outbox",
  "DELETE /v1/outbox/{message_id}",
  "GET /healthz",
  "GET /v1/inbox",
  "POST /v1/inbox/{message_id}/ack",
  "GET /v1/conversations/{id}",
  "GET /v1/events",
];

/** The data dir the CLI uses when none is named: `$IACP_DATA_DIR`, else `.data/node`. */
export function defaultDataDir(): string {
  return process.env.IACP_DATA_DIR || ".data/node";
}

/** Default timeout of one call, in milliseconds. */
export const DEFAULT_TIMEOUT = 30_000;

/**
 * Default bound of the answers a client reads: 17 MiB, one message of the node's default
 * `max_message_bytes` (16 MiB) and 1 MiB of JSON around it (as the Go client).
 */
export const DEFAULT_MAX_ANSWER_BYTES = 17 << 20;

// The node's default inbox page budget, and what a page adds around its messages.
const INBOX_PAGE_BYTES = 8 << 20;
const INBOX_PAGE_SLACK = 64 << 10;

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

interface Endpoint {
  base: string;
  token: string;
}

interface Call {
  method: "GET" | "POST" | "DELETE";
  path: string;
  query?: URLSearchParams;
  body?: unknown;
  /** How long the node itself waits (a long poll): added to the default timeout. */
  waitMs?: number;
  accept?: string;
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
export class Client {
  readonly #addr: string | undefined;
  readonly #token: string | undefined;
  readonly #dataDir: string;
  readonly #timeout: number;
  readonly #maxAnswer: number;
  #endpoint: Endpoint | undefined;

  constructor(options: ClientOptions = {}) {
    this.#addr = options.addr;
    this.#token = options.token;
    this.#dataDir = options.dataDir ?? defaultDataDir();
    this.#timeout = positive(options.timeout, "timeout") ?? DEFAULT_TIMEOUT;
    this.#maxAnswer = Math.max(positive(options.maxAnswerBytes, "maxAnswerBytes") ?? DEFAULT_MAX_ANSWER_BYTES, 1 << 20);
  }

  /** The data dir the client reads `api.addr` and `api.token` from. */
  get dataDir(): string {
    return this.#dataDir;
  }

  // ---- the IACP binding ----

  /**
   * Sends one message (HTTP 202) and resolves once the recipient's node has it (status
   * `accepted`), or once it is queued for a known agent that cannot be reached now (status
   * `queued`: the node retries until its TTL; {@link Client.cancel} takes it back). An agent id
   * nothing knows (a typo, most often) rejects at once with AGENT_NOT_FOUND, unless
   * `queueUnknown`. The node fills and signs what the message leaves out. A request sent this
   * way is answered later, in the inbox; use {@link Client.request} to wait for the answer.
   */
  async send(message: MessageInput | OutgoingMessage, options: SendOptions = {}): Promise<SendResult> {
    const query = options.queueUnknown ? new URLSearchParams({ queue_unknown: "true" }) : undefined;
    return this.#call<SendResult>({ method: "POST", path: MESSAGE_PATH, query, body: toOutgoing(message) }, options);
  }

  /**
   * Takes a queued message (one {@link Client.send} answered `queued`) out of the node's
   * outbox: it is never delivered. A message the outbox does not hold rejects (HTTP 404).
   */
  async cancel(message: string | SendResult, options: CallOptions = {}): Promise<CancelResult> {
    const id = typeof message === "string" ? message : message.message_id;
    return this.#call<CancelResult>({ method: "DELETE", path: `/v1/outbox/${encodeURIComponent(id)}` }, options);
  }

  /**
   * Sends a request and waits up to `wait` (default 30 s) for its response, which it returns.
   * An `error` answer rejects with an {@link IACPError} of its code; no answer in time with a
   * {@link TimeoutError} (HTTP 504), and the request is never delivered after that: it lives
   * no longer than `wait`. An agent id nothing knows rejects at once with AGENT_NOT_FOUND.
   */
  async request(message: MessageInput | OutgoingMessage, options: RequestOptions = {}): Promise<Message> {
    const wait = positive(options.wait, "wait") ?? 30_000;
    const doc = toOutgoing(message);
    if (doc.message.type !== undefined && doc.message.type !== "request") {
      throw new TypeError(`request sends a request, not a ${doc.message.type}: use send`);
    }
    const query = new URLSearchParams({ wait: `${Math.ceil(wait)}ms` });
    if (options.queueUnknown) query.set("queue_unknown", "true");
    return this.#call<Message>({ method: "POST", path: MESSAGE_PATH, query, body: doc, waitMs: wait }, options);
  }

  /** Publishes an event to every agent (gossip). Fails with 503 when gossip is off. */
  async broadcast(event: EventPayload, options: CallOptions = {}): Promise<SendResult> {
    return this.#call<SendResult>({ method: "POST", path: "/v1/broadcast", body: event }, options);
  }

  /**
   * A broadcast query (docs/coordination.md): asks a capability group, or every agent, over
   * gossip, and resolves with the direct answers once `count` agents answered, every agent of
   * `expect` answered, or `deadline` (ms, default 2,000) passed. Bad input rejects with an
   * {@link IACPError} PAYLOAD_INVALID; no member reachable, AGENT_NOT_FOUND.
   */
  async ask(request: AskRequest = {}, options: CallOptions = {}): Promise<AskResult> {
    const deadline = positive(request.deadline, "deadline") ?? 2_000;
    const body = { ...request, deadline: `${Math.ceil(deadline)}ms` };
    return this.#call<AskResult>({ method: "POST", path: "/v1/ask", body, waitMs: deadline }, options);
  }

  // ---- the rest of the node ----

  /** Runs a capability query; the matches come best first. */
  async discover(query: CapabilityQuery, options: CallOptions = {}): Promise<DiscoverResult> {
    return this.#call<DiscoverResult>({ method: "POST", path: "/v1/discover", body: query }, options);
  }

  /** Returns an agent's record (AGENT_NOT_FOUND, HTTP 404, when no node knows it). */
  async resolve(agentId: string, options: CallOptions = {}): Promise<AgentRecord> {
    return this.#call<AgentRecord>({ method: "GET", path: `/v1/resolve/${encodeURIComponent(agentId)}` }, options);
  }

  /** Returns the liveness table: the agents whose heartbeats this node hears. */
  async agents(options: CallOptions = {}): Promise<AgentsResult> {
    return this.#call<AgentsResult>({ method: "GET", path: "/v1/agents" }, options);
  }

  /** Returns the node's status. */
  async status(options: CallOptions = {}): Promise<NodeStatus> {
    return this.#call<NodeStatus>({ method: "GET", path: "/v1/status" }, options);
  }

  /** Returns the connected libp2p peers. */
  async peers(options: CallOptions = {}): Promise<PeersResult> {
    return this.#call<PeersResult>({ method: "GET", path: "/v1/peers" }, options);
  }

  /** Returns the durable outbox: messages the node is still trying to deliver. */
  async outbox(options: CallOptions = {}): Promise<OutboxResult> {
    return this.#call<OutboxResult>({ method: "GET", path: "/v1/outbox" }, options);
  }

  /** Calls `/healthz`, which needs no token. */
  async health(options: CallOptions = {}): Promise<Health> {
    return this.#call<Health>({ method: "GET", path: "/healthz" }, options);
  }

  // ---- pull mode ----

  /**
   * Returns one page of the inbox, oldest first: the messages with a seq greater than
   * `after`, long-polling up to `wait` while there is none. Listing takes nothing: acknowledge
   * what you handled with {@link Client.ack}. While `more` is true, more messages wait: ask
   * again with `after: page.next_after`.
   */
  async inbox(options: InboxOptions = {}): Promise<InboxPage> {
    const q = new URLSearchParams();
    if (options.after) q.set("after", String(options.after));
    if (options.limit) q.set("limit", String(options.limit));
    const budget = Math.min(options.maxBytes ?? INBOX_PAGE_BYTES, this.#maxAnswer - INBOX_PAGE_SLACK);
    q.set("max_bytes", String(budget));
    q.set("dialect", "iacp"); // items are IACP documents, whatever the agent's own dialect
    const wait = positive(options.wait, "wait");
    if (wait) q.set("wait", `${Math.ceil(wait)}ms`);
    return this.#call<InboxPage>({ method: "GET", path: "/v1/inbox", query: q, waitMs: wait }, options);
  }

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
  async *messages(options: MessagesOptions = {}): AsyncGenerator<InboxItem, void, undefined> {
    const { signal, limit, timeout } = options;
    const follow = options.follow ?? true;
    const wait = positive(options.wait, "wait") ?? 30_000;
    let after = options.after ?? 0;
    while (!signal?.aborted) {
      const started = Date.now();
      let page: InboxPage;
      try {
        page = await this.inbox({ after, limit, wait: follow ? wait : undefined, signal, timeout });
      } catch (err) {
        if (signal?.aborted) return;
        throw err;
      }
      for (const item of page.messages) yield item;
      after = page.next_after;
      if (!follow && !page.more) return;
      // A node honours wait, so an empty page comes after it; should one come back at once,
      // do not spin on it.
      if (page.messages.length === 0 && Date.now() - started < Math.min(wait, 1000) / 2) {
        await sleep(Math.min(wait, 1000), signal);
      }
    }
  }

  /** Takes a message out of the inbox for good (PAYLOAD_INVALID, HTTP 404, when it is not there). */
  async ack(messageId: string, options: CallOptions = {}): Promise<AckResult> {
    return this.#call<AckResult>({ method: "POST", path: `/v1/inbox/${encodeURIComponent(messageId)}/ack` }, options);
  }

  /**
   * Lists a conversation from the node's audit log: every message whose id or correlation id
   * is `id`, and the answers to those, oldest first, with what happened to each here.
   * Follow it with `after: page.next_after` while `more` is true. HTTP 409 when the node's
   * audit log is off.
   */
  async conversation(id: string, options: ConversationOptions = {}): Promise<ConversationPage> {
    const q = new URLSearchParams();
    if (options.after) q.set("after", String(options.after));
    if (options.limit) q.set("limit", String(options.limit));
    return this.#call<ConversationPage>({ method: "GET", path: `/v1/conversations/${encodeURIComponent(id)}`, query: q }, options);
  }

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
  async *events(options: EventsOptions = {}): AsyncGenerator<EventItem, void, undefined> {
    const { signal } = options;
    const q = new URLSearchParams();
    if (options.kinds?.length) q.set("kinds", options.kinds.join(","));
    if (options.agent) q.set("agent", options.agent);
    if (options.group) q.set("group", options.group);
    const idle = positive(options.idleTimeout, "idleTimeout") ?? 45_000;
    if (signal?.aborted) return;
    const ep = await this.#resolveEndpoint();
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const what = "GET /v1/events";
    const openTimeout = positive(options.timeout, "timeout") ?? this.#timeout;
    let timer = setTimeout(() => ctrl.abort(new TimeoutError(`${what}: the node at ${ep.base} did not answer within ${openTimeout} ms`)), openTimeout);
    const rearm = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => ctrl.abort(new TimeoutError(`${what}: the event stream of ${ep.base} was silent for ${idle} ms (the node sends a keep-alive every 15 s): the node or the connection is gone`)),
        idle,
      );
    };
    try {
      let res: Response;
      try {
        res = await fetch(ep.base + "/v1/events?" + q.toString(), {
          headers: { Authorization: `Bearer ${ep.token}`, Accept: "text/event-stream" },
          signal: ctrl.signal,
        });
      } catch (err) {
        throw this.#failure(err, ctrl.signal, ep, what);
      }
      if (res.status !== 200) {
        const text = await this.#read(res, ctrl.signal, ep, what);
        throw errorFromDocument(res.status, parseJSON(text), res.headers.get("retry-after"), what);
      }
      if (!res.body) throw new NodeUnreachableError(`${what}: the node at ${ep.base} sent no stream`, { addr: ep.base });
      rearm();
      const reader = res.body.getReader();
      options.onOpen?.();
      try {
        for await (const ev of parseSSE(reader, 2 << 20, rearm)) {
          let item: EventItem;
          try {
            item = JSON.parse(ev.data) as EventItem;
          } catch {
            throw new IACPError("INTERNAL_ERROR", `${what}: an event's data is not JSON: ${ev.data.slice(0, 200)}`);
          }
          if (ev.id !== undefined && item.id === undefined) item.id = ev.id;
          yield item;
        }
      } catch (err) {
        if (err instanceof IACPError) throw err;
        throw this.#failure(err, ctrl.signal, ep, what);
      } finally {
        reader.cancel().catch(() => {});
      }
      throw new NodeUnreachableError(`${what}: the node at ${ep.base} closed the event stream: is \`iacp-node run\` still running?`, {
        addr: ep.base,
        dataDir: this.#addr ? undefined : this.#dataDir,
      });
    } catch (err) {
      if (signal?.aborted) return; // the caller stopped the stream: the loop just ends
      throw err;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      ctrl.abort();
    }
  }

  // ---- the machinery ----

  /** Finds the API: the options', else the data dir's api.addr and api.token (cached). */
  async #resolveEndpoint(): Promise<Endpoint> {
    if (this.#endpoint) return this.#endpoint;
    let addr = this.#addr;
    if (!addr) {
      try {
        addr = (await readFile(join(this.#dataDir, "api.addr"), "utf8")).trim();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") {
          throw new NodeUnreachableError(
            `no node is running with data dir ${this.#dataDir}: start one with \`iacp-node run --data-dir ${this.#dataDir}\` (or pass addr)`,
            { dataDir: this.#dataDir, cause: err },
          );
        }
        throw err;
      }
      if (!addr) throw new NodeUnreachableError(`${join(this.#dataDir, "api.addr")} is empty: is the node starting?`, { dataDir: this.#dataDir });
    }
    // With an address and no token, a missing token file is no error: /healthz needs none,
    // and the node's 401 says what else does.
    const token = this.#token ?? (await readToken(this.#dataDir, this.#addr !== undefined));
    const base = (addr.includes("://") ? addr : `http://${addr}`).replace(/\/+$/, "");
    this.#endpoint = { base, token };
    return this.#endpoint;
  }

  async #call<T>(c: Call, options: CallOptions): Promise<T> {
    const { signal } = options;
    signal?.throwIfAborted();
    const ep = await this.#resolveEndpoint();
    const what = `${c.method} ${c.path}`;
    const ms = positive(options.timeout, "timeout") ?? this.#timeout + (c.waitMs ?? 0);
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(
      () => ctrl.abort(new TimeoutError(`${what}: the node at ${ep.base} did not answer within ${ms} ms`)),
      ms,
    );
    try {
      const headers: Record<string, string> = { Accept: c.accept ?? "application/json" };
      if (ep.token) headers.Authorization = `Bearer ${ep.token}`;
      let body: string | undefined;
      if (c.body !== undefined) {
        body = JSON.stringify(c.body);
        headers["Content-Type"] = "application/json";
      }
      const url = ep.base + c.path + (c.query && c.query.size > 0 ? "?" + c.query.toString() : "");
      let res: Response;
      try {
        res = await fetch(url, { method: c.method, headers, body, signal: ctrl.signal });
      } catch (err) {
        throw this.#failure(err, ctrl.signal, ep, what);
      }
      const text = await this.#read(res, ctrl.signal, ep, what);
      if (res.status === 401 && !ep.token) {
        throw new UnauthorizedError(`${what}: the node at ${ep.base} needs an API token: pass token, or the dataDir of the node`);
      }
      if (res.status < 200 || res.status > 299) {
        throw errorFromDocument(res.status, parseJSON(text), res.headers.get("retry-after"), what);
      }
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new IACPError("INTERNAL_ERROR", `${what}: the node's answer is not JSON: ${text.slice(0, 200)}`, { status: res.status });
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Reads an answer of at most the client's limit; a larger one is never parsed cut. */
  async #read(res: Response, abort: AbortSignal, ep: Endpoint, what: string): Promise<string> {
    const tooLarge = (size: string) => {
      const hint = what.startsWith("GET /v1/inbox")
        ? "one message in the inbox is this large (the node's max_message_bytes is above the client's limit): read it with a client whose maxAnswerBytes is larger"
        : "raise the client's maxAnswerBytes";
      return new AnswerTooLargeError(`${what} answered ${size} bytes, more than the ${this.#maxAnswer} this client reads: ${hint}`);
    };
    const declared = Number(res.headers.get("content-length") ?? NaN);
    if (declared > this.#maxAnswer) {
      await res.body?.cancel().catch(() => {});
      throw tooLarge(String(declared));
    }
    if (!res.body) return "";
    const reader = res.body.getReader();
    const chunks: Uint8Array[] = [];
    let total = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        total += value.byteLength;
        if (total > this.#maxAnswer) {
          await reader.cancel().catch(() => {});
          throw tooLarge(`more than ${this.#maxAnswer}`);
        }
        chunks.push(value);
      }
    } catch (err) {
      if (err instanceof AnswerTooLargeError) throw err;
      throw this.#failure(err, abort, ep, what);
    }
    return Buffer.concat(chunks, total).toString("utf8");
  }

  /** What a failed fetch means: our timeout, the caller's abort, or no node. */
  #failure(err: unknown, abort: AbortSignal, ep: Endpoint, what: string): unknown {
    if (abort.aborted) return abort.reason;
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const code = cause?.code;
    if (!(err instanceof TypeError) || (code === undefined && !/fetch failed|terminated/.test(err.message))) return err;
    // Another start of the node may have written another api.addr: read it again next time.
    if (!this.#addr) this.#endpoint = undefined;
    const dataDir = this.#addr ? undefined : this.#dataDir;
    const where = ep.base.replace(/^http:\/\//, "");
    let message: string;
    if (code === "ECONNREFUSED") {
      message = dataDir
        ? `no node answers at ${where} (from ${join(dataDir, "api.addr")}): is \`iacp-node run --data-dir ${dataDir}\` running?`
        : `no node answers at ${where}: is \`iacp-node run\` running, with --api ${where}?`;
    } else {
      message = `${what}: the connection to the node at ${where} failed (${code ?? cause?.message ?? err.message}): is \`iacp-node run\` running?`;
    }
    return new NodeUnreachableError(message, { addr: ep.base, dataDir, cause: err });
  }
}

/** Reads `<dataDir>/api.token`, refusing one that others can read (as the node and CLI do). */
async function readToken(dataDir: string, optional: boolean): Promise<string> {
  const path = join(dataDir, "api.token");
  let text: string;
  try {
    const st = await stat(path);
    if (process.platform !== "win32" && (st.mode & 0o077) !== 0) {
      throw new UnauthorizedError(
        `${path} has mode ${(st.mode & 0o777).toString(8)}: it must be readable by its owner only (chmod 600 ${path})`,
        { status: undefined },
      );
    }
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      if (optional) return "";
      throw new UnauthorizedError(`no API token at ${path}: pass token, or the dataDir of the node (\`iacp-node init\` writes it)`, {
        status: undefined,
        cause: err,
      });
    }
    throw err;
  }
  const token = text.trim();
  if (!token) {
    throw new UnauthorizedError(`${path} is empty: delete it and restart the node to create a new one`, { status: undefined });
  }
  return token;
}

/** A {@link MessageInput} as the document the binding takes; a document as it is. */
export function toOutgoing(m: MessageInput | OutgoingMessage): OutgoingMessage {
  if ("envelope" in m && "message" in m) return m;
  const input = m as MessageInput;
  if (!input.to) throw new TypeError("a message needs `to`: the agent id of its recipient");
  if (!input.intent) throw new TypeError("a message needs an `intent`, e.g. handoff");
  const envelope: OutgoingMessage["envelope"] = { recipient: { agent_id: input.to } };
  if (input.channel) envelope.recipient.channel = input.channel;
  if (input.messageId) envelope.message_id = input.messageId;
  if (input.correlationId) envelope.correlation_id = input.correlationId;
  if (input.ttlSeconds) envelope.ttl_seconds = input.ttlSeconds;
  const doc: OutgoingMessage = {
    envelope,
    message: { type: input.type ?? "request", intent: input.intent, payload: input.payload ?? {} },
  };
  if (input.security) doc.security = input.security;
  return doc;
}

function positive(v: number | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) {
    throw new RangeError(`${name} must be a positive number of milliseconds (or bytes), not ${String(v)}`);
  }
  return v;
}

function parseJSON(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
