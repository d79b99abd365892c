import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { AnswerTooLargeError, IACPError, NodeUnreachableError, TimeoutError, UnauthorizedError, errorFromDocument, } from "./errors.js";
import { parseSSE } from "./sse.js";
/** The path of the IACP HTTP binding. */
export const MESSAGE_PATH = "/.well-known/iacp/v1/message";
/** The statuses a send answers with (docs/openapi.yaml's SendResult.status). */
export const SEND_STATUSES = ["accepted", "queued", "pending"];
/**
 * The endpoints of docs/openapi.yaml this client calls, as "METHOD path": a test holds them to
 * the spec, so that the client cannot drift from it.
 */
export const ENDPOINTS = [
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
export function defaultDataDir() {
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
    #addr;
    #token;
    #dataDir;
    #timeout;
    #maxAnswer;
    #endpoint;
    constructor(options = {}) {
        this.#addr = options.addr;
        this.#token = options.token;
        this.#dataDir = options.dataDir ?? defaultDataDir();
        this.#timeout = positive(options.timeout, "timeout") ?? DEFAULT_TIMEOUT;
        this.#maxAnswer = Math.max(positive(options.maxAnswerBytes, "maxAnswerBytes") ?? DEFAULT_MAX_ANSWER_BYTES, 1 << 20);
    }
    /** The data dir the client reads `api.addr` and `api.token` from. */
    get dataDir() {
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
    async send(message, options = {}) {
        const query = options.queueUnknown ? new URLSearchParams({ queue_unknown: "true" }) : undefined;
        return this.#call({ method: "POST", path: MESSAGE_PATH, query, body: toOutgoing(message) }, options);
    }
    /**
     * Takes a queued message (one {@link Client.send} answered `queued`) out of the node's
     * outbox: it is never delivered. A message the outbox does not hold rejects (HTTP 404).
     */
    async cancel(message, options = {}) {
        const id = typeof message === "string" ? message : message.message_id;
        return this.#call({ method: "DELETE", path: `/v1/outbox/${encodeURIComponent(id)}` }, options);
    }
    /**
     * Sends a request and waits up to `wait` (default 30 s) for its response, which it returns.
     * An `error` answer rejects with an {@link IACPError} of its code; no answer in time with a
     * {@link TimeoutError} (HTTP 504), and the request is never delivered after that: it lives
     * no longer than `wait`. An agent id nothing knows rejects at once with AGENT_NOT_FOUND.
     */
    async request(message, options = {}) {
        const wait = positive(options.wait, "wait") ?? 30_000;
        const doc = toOutgoing(message);
        if (doc.message.type !== undefined && doc.message.type !== "request") {
            throw new TypeError(`request sends a request, not a ${doc.message.type}: use send`);
        }
        const query = new URLSearchParams({ wait: `${Math.ceil(wait)}ms` });
        if (options.queueUnknown)
            query.set("queue_unknown", "true");
        return this.#call({ method: "POST", path: MESSAGE_PATH, query, body: doc, waitMs: wait }, options);
    }
    /** Publishes an event to every agent (gossip). Fails with 503 when gossip is off. */
    async broadcast(event, options = {}) {
        return this.#call({ method: "POST", path: "/v1/broadcast", body: event }, options);
    }
    /**
     * A broadcast query (docs/coordination.md): asks a capability group, or every agent, over
     * gossip, and resolves with the direct answers once `count` agents answered, every agent of
     * `expect` answered, or `deadline` (ms, default 2,000) passed. Bad input rejects with an
     * {@link IACPError} PAYLOAD_INVALID; no member reachable, AGENT_NOT_FOUND.
     */
    async ask(request = {}, options = {}) {
        const deadline = positive(request.deadline, "deadline") ?? 2_000;
        const body = { ...request, deadline: `${Math.ceil(deadline)}ms` };
        return this.#call({ method: "POST", path: "/v1/ask", body, waitMs: deadline }, options);
    }
    // ---- the rest of the node ----
    /** Runs a capability query; the matches come best first. */
    async discover(query, options = {}) {
        return this.#call({ method: "POST", path: "/v1/discover", body: query }, options);
    }
    /** Returns an agent's record (AGENT_NOT_FOUND, HTTP 404, when no node knows it). */
    async resolve(agentId, options = {}) {
        return this.#call({ method: "GET", path: `/v1/resolve/${encodeURIComponent(agentId)}` }, options);
    }
    /** Returns the liveness table: the agents whose heartbeats this node hears. */
    async agents(options = {}) {
        return this.#call({ method: "GET", path: "/v1/agents" }, options);
    }
    /** Returns the node's status. */
    async status(options = {}) {
        return this.#call({ method: "GET", path: "/v1/status" }, options);
    }
    /** Returns the connected libp2p peers. */
    async peers(options = {}) {
        return this.#call({ method: "GET", path: "/v1/peers" }, options);
    }
    /** Returns the durable outbox: messages the node is still trying to deliver. */
    async outbox(options = {}) {
        return this.#call({ method: "GET", path: "/v1/outbox" }, options);
    }
    /** Calls `/healthz`, which needs no token. */
    async health(options = {}) {
        return this.#call({ method: "GET", path: "/healthz" }, options);
    }
    // ---- pull mode ----
    /**
     * Returns one page of the inbox, oldest first: the messages with a seq greater than
     * `after`, long-polling up to `wait` while there is none. Listing takes nothing: acknowledge
     * what you handled with {@link Client.ack}. While `more` is true, more messages wait: ask
     * again with `after: page.next_after`.
     */
    async inbox(options = {}) {
        const q = new URLSearchParams();
        if (options.after)
            q.set("after", String(options.after));
        if (options.limit)
            q.set("limit", String(options.limit));
        const budget = Math.min(options.maxBytes ?? INBOX_PAGE_BYTES, this.#maxAnswer - INBOX_PAGE_SLACK);
        q.set("max_bytes", String(budget));
        q.set("dialect", "iacp"); // items are IACP documents, whatever the agent's own dialect
        const wait = positive(options.wait, "wait");
        if (wait)
            q.set("wait", `${Math.ceil(wait)}ms`);
        return this.#call({ method: "GET", path: "/v1/inbox", query: q, waitMs: wait }, options);
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
    async *messages(options = {}) {
        const { signal, limit, timeout } = options;
        const follow = options.follow ?? true;
        const wait = positive(options.wait, "wait") ?? 30_000;
        let after = options.after ?? 0;
        while (!signal?.aborted) {
            const started = Date.now();
            let page;
            try {
                page = await this.inbox({ after, limit, wait: follow ? wait : undefined, signal, timeout });
            }
            catch (err) {
                if (signal?.aborted)
                    return;
                throw err;
            }
            for (const item of page.messages)
                yield item;
            after = page.next_after;
            if (!follow && !page.more)
                return;
            // A node honours wait, so an empty page comes after it; should one come back at once,
            // do not spin on it.
            if (page.messages.length === 0 && Date.now() - started < Math.min(wait, 1000) / 2) {
                await sleep(Math.min(wait, 1000), signal);
            }
        }
    }
    /** Takes a message out of the inbox for good (PAYLOAD_INVALID, HTTP 404, when it is not there). */
    async ack(messageId, options = {}) {
        return this.#call({ method: "POST", path: `/v1/inbox/${encodeURIComponent(messageId)}/ack` }, options);
    }
    /**
     * Lists a conversation from the node's audit log: every message whose id or correlation id
     * is `id`, and the answers to those, oldest first, with what happened to each here.
     * Follow it with `after: page.next_after` while `more` is true. HTTP 409 when the node's
     * audit log is off.
     */
    async conversation(id, options = {}) {
        const q = new URLSearchParams();
        if (options.after)
            q.set("after", String(options.after));
        if (options.limit)
            q.set("limit", String(options.limit));
        return this.#call({ method: "GET", path: `/v1/conversations/${encodeURIComponent(id)}`, query: q }, options);
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
    async *events(options = {}) {
        const { signal } = options;
        const q = new URLSearchParams();
        if (options.kinds?.length)
            q.set("kinds", options.kinds.join(","));
        if (options.agent)
            q.set("agent", options.agent);
        if (options.group)
            q.set("group", options.group);
        const idle = positive(options.idleTimeout, "idleTimeout") ?? 45_000;
        if (signal?.aborted)
            return;
        const ep = await this.#resolveEndpoint();
        const ctrl = new AbortController();
        const onAbort = () => ctrl.abort(signal?.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        const what = "GET /v1/events";
        const openTimeout = positive(options.timeout, "timeout") ?? this.#timeout;
        let timer = setTimeout(() => ctrl.abort(new TimeoutError(`${what}: the node at ${ep.base} did not answer within ${openTimeout} ms`)), openTimeout);
        const rearm = () => {
            clearTimeout(timer);
            timer = setTimeout(() => ctrl.abort(new TimeoutError(`${what}: the event stream of ${ep.base} was silent for ${idle} ms (the node sends a keep-alive every 15 s): the node or the connection is gone`)), idle);
        };
        try {
            let res;
            try {
                res = await fetch(ep.base + "/v1/events?" + q.toString(), {
                    headers: { Authorization: `Bearer ${ep.token}`, Accept: "text/event-stream" },
                    signal: ctrl.signal,
                });
            }
            catch (err) {
                throw this.#failure(err, ctrl.signal, ep, what);
            }
            if (res.status !== 200) {
                const text = await this.#read(res, ctrl.signal, ep, what);
                throw errorFromDocument(res.status, parseJSON(text), res.headers.get("retry-after"), what);
            }
            if (!res.body)
                throw new NodeUnreachableError(`${what}: the node at ${ep.base} sent no stream`, { addr: ep.base });
            rearm();
            const reader = res.body.getReader();
            options.onOpen?.();
            try {
                for await (const ev of parseSSE(reader, 2 << 20, rearm)) {
                    let item;
                    try {
                        item = JSON.parse(ev.data);
                    }
                    catch {
                        throw new IACPError("INTERNAL_ERROR", `${what}: an event's data is not JSON: ${ev.data.slice(0, 200)}`);
                    }
                    if (ev.id !== undefined && item.id === undefined)
                        item.id = ev.id;
                    yield item;
                }
            }
            catch (err) {
                if (err instanceof IACPError)
                    throw err;
                throw this.#failure(err, ctrl.signal, ep, what);
            }
            finally {
                reader.cancel().catch(() => { });
            }
            throw new NodeUnreachableError(`${what}: the node at ${ep.base} closed the event stream: is \`iacp-node run\` still running?`, {
                addr: ep.base,
                dataDir: this.#addr ? undefined : this.#dataDir,
            });
        }
        catch (err) {
            if (signal?.aborted)
                return; // the caller stopped the stream: the loop just ends
            throw err;
        }
        finally {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            ctrl.abort();
        }
    }
    // ---- the machinery ----
    /** Finds the API: the options', else the data dir's api.addr and api.token (cached). */
    async #resolveEndpoint() {
        if (this.#endpoint)
            return this.#endpoint;
        let addr = this.#addr;
        if (!addr) {
            try {
                addr = (await readFile(join(this.#dataDir, "api.addr"), "utf8")).trim();
            }
            catch (err) {
                if (err.code === "ENOENT") {
                    throw new NodeUnreachableError(`no node is running with data dir ${this.#dataDir}: start one with \`iacp-node run --data-dir ${this.#dataDir}\` (or pass addr)`, { dataDir: this.#dataDir, cause: err });
                }
                throw err;
            }
            if (!addr)
                throw new NodeUnreachableError(`${join(this.#dataDir, "api.addr")} is empty: is the node starting?`, { dataDir: this.#dataDir });
        }
        // With an address and no token, a missing token file is no error: /healthz needs none,
        // and the node's 401 says what else does.
        const token = this.#token ?? (await readToken(this.#dataDir, this.#addr !== undefined));
        const base = (addr.includes("://") ? addr : `http://${addr}`).replace(/\/+$/, "");
        this.#endpoint = { base, token };
        return this.#endpoint;
    }
    async #call(c, options) {
        const { signal } = options;
        signal?.throwIfAborted();
        const ep = await this.#resolveEndpoint();
        const what = `${c.method} ${c.path}`;
        const ms = positive(options.timeout, "timeout") ?? this.#timeout + (c.waitMs ?? 0);
        const ctrl = new AbortController();
        const onAbort = () => ctrl.abort(signal?.reason);
        signal?.addEventListener("abort", onAbort, { once: true });
        const timer = setTimeout(() => ctrl.abort(new TimeoutError(`${what}: the node at ${ep.base} did not answer within ${ms} ms`)), ms);
        try {
            const headers = { Accept: c.accept ?? "application/json" };
            if (ep.token)
                headers.Authorization = `Bearer ${ep.token}`;
            let body;
            if (c.body !== undefined) {
                body = JSON.stringify(c.body);
                headers["Content-Type"] = "application/json";
            }
            const url = ep.base + c.path + (c.query && c.query.size > 0 ? "?" + c.query.toString() : "");
            let res;
            try {
                res = await fetch(url, { method: c.method, headers, body, signal: ctrl.signal });
            }
            catch (err) {
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
                return JSON.parse(text);
            }
            catch {
                throw new IACPError("INTERNAL_ERROR", `${what}: the node's answer is not JSON: ${text.slice(0, 200)}`, { status: res.status });
            }
        }
        finally {
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
        }
    }
    /** Reads an answer of at most the client's limit; a larger one is never parsed cut. */
    async #read(res, abort, ep, what) {
        const tooLarge = (size) => {
            const hint = what.startsWith("GET /v1/inbox")
                ? "one message in the inbox is this large (the node's max_message_bytes is above the client's limit): read it with a client whose maxAnswerBytes is larger"
                : "raise the client's maxAnswerBytes";
            return new AnswerTooLargeError(`${what} answered ${size} bytes, more than the ${this.#maxAnswer} this client reads: ${hint}`);
        };
        const declared = Number(res.headers.get("content-length") ?? NaN);
        if (declared > this.#maxAnswer) {
            await res.body?.cancel().catch(() => { });
            throw tooLarge(String(declared));
        }
        if (!res.body)
            return "";
        const reader = res.body.getReader();
        const chunks = [];
        let total = 0;
        try {
            for (;;) {
                const { done, value } = await reader.read();
                if (done)
                    break;
                total += value.byteLength;
                if (total > this.#maxAnswer) {
                    await reader.cancel().catch(() => { });
                    throw tooLarge(`more than ${this.#maxAnswer}`);
                }
                chunks.push(value);
            }
        }
        catch (err) {
            if (err instanceof AnswerTooLargeError)
                throw err;
            throw this.#failure(err, abort, ep, what);
        }
        return Buffer.concat(chunks, total).toString("utf8");
    }
    /** What a failed fetch means: our timeout, the caller's abort, or no node. */
    #failure(err, abort, ep, what) {
        if (abort.aborted)
            return abort.reason;
        const cause = err.cause;
        const code = cause?.code;
        if (!(err instanceof TypeError) || (code === undefined && !/fetch failed|terminated/.test(err.message)))
            return err;
        // Another start of the node may have written another api.addr: read it again next time.
        if (!this.#addr)
            this.#endpoint = undefined;
        const dataDir = this.#addr ? undefined : this.#dataDir;
        const where = ep.base.replace(/^http:\/\//, "");
        let message;
        if (code === "ECONNREFUSED") {
            message = dataDir
                ? `no node answers at ${where} (from ${join(dataDir, "api.addr")}): is \`iacp-node run --data-dir ${dataDir}\` running?`
                : `no node answers at ${where}: is \`iacp-node run\` running, with --api ${where}?`;
        }
        else {
            message = `${what}: the connection to the node at ${where} failed (${code ?? cause?.message ?? err.message}): is \`iacp-node run\` running?`;
        }
        return new NodeUnreachableError(message, { addr: ep.base, dataDir, cause: err });
    }
}
/** Reads `<dataDir>/api.token`, refusing one that others can read (as the node and CLI do). */
async function readToken(dataDir, optional) {
    const path = join(dataDir, "api.token");
    let text;
    try {
        const st = await stat(path);
        if (process.platform !== "win32" && (st.mode & 0o077) !== 0) {
            throw new UnauthorizedError(`${path} has mode ${(st.mode & 0o777).toString(8)}: it must be readable by its owner only (chmod 600 ${path})`, { status: undefined });
        }
        text = await readFile(path, "utf8");
    }
    catch (err) {
        if (err.code === "ENOENT") {
            if (optional)
                return "";
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
export function toOutgoing(m) {
    if ("envelope" in m && "message" in m)
        return m;
    const input = m;
    if (!input.to)
        throw new TypeError("a message needs `to`: the agent id of its recipient");
    if (!input.intent)
        throw new TypeError("a message needs an `intent`, e.g. handoff");
    const envelope = { recipient: { agent_id: input.to } };
    if (input.channel)
        envelope.recipient.channel = input.channel;
    if (input.messageId)
        envelope.message_id = input.messageId;
    if (input.correlationId)
        envelope.correlation_id = input.correlationId;
    if (input.ttlSeconds)
        envelope.ttl_seconds = input.ttlSeconds;
    const doc = {
        envelope,
        message: { type: input.type ?? "request", intent: input.intent, payload: input.payload ?? {} },
    };
    if (input.security)
        doc.security = input.security;
    return doc;
}
function positive(v, name) {
    if (v === undefined)
        return undefined;
    if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) {
        throw new RangeError(`${name} must be a positive number of milliseconds (or bytes), not ${String(v)}`);
    }
    return v;
}
function parseJSON(text) {
    try {
        return JSON.parse(text);
    }
    catch {
        return text;
    }
}
function sleep(ms, signal) {
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
