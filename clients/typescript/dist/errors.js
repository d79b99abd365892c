// The codes the IACP registry marks retryable (protocol/errors.go).
const retryableCodes = new Set(["RATE_LIMITED", "TIMEOUT", "INTERNAL_ERROR", "AGENT_NOT_FOUND", "NODE_UNREACHABLE"]);
/**
 * An error in IACP's terms: the node refused a call (its error document's code, message and
 * HTTP status), an agent answered a request with an `error` message, or no node answered.
 *
 * Throw one from an {@link Agent} handler to answer the request with an `error` message of
 * that code: `throw new IACPError("CAPABILITY_MISMATCH", "I only review Go")`.
 */
export class IACPError extends Error {
    /** The IACP error code, e.g. `AGENT_NOT_FOUND`. */
    code;
    /** The HTTP status of the node's answer; undefined when the error did not come from one. */
    status;
    /** Whether trying again may succeed. */
    retryable;
    /** Seconds to wait before trying again, when the node said (RATE_LIMITED, Retry-After). */
    retryAfter;
    /** The id of the message the error is about, when there is one. */
    messageId;
    /** The error's `detail`, when the node sent one. */
    detail;
    constructor(code, message, options = {}) {
        super(message, options.cause === undefined ? undefined : { cause: options.cause });
        this.name = new.target.name;
        this.code = code;
        this.status = options.status;
        this.retryable = options.retryable ?? retryableCodes.has(code);
        this.retryAfter = options.retryAfter;
        this.messageId = options.messageId;
        this.detail = options.detail;
    }
    /** The error as the payload of an `error` message (what an Agent sends back). */
    toPayload() {
        const p = { code: this.code, message: this.message, retryable: this.retryable };
        if (this.retryAfter !== undefined)
            p.retry_after = this.retryAfter;
        if (this.detail !== undefined)
            p.detail = this.detail;
        return p;
    }
}
/**
 * No node answered: nothing listens at the address (connection refused), the connection
 * failed, or the data dir has no `api.addr` (no node runs with it). Its code is
 * `NODE_UNREACHABLE`, which is the client's own and never on the wire; it is retryable.
 */
export class NodeUnreachableError extends IACPError {
    /** The address the client tried (`http://host:port`), when it knew one. */
    addr;
    /** The data dir the client read, when it was given one. */
    dataDir;
    constructor(message, options = {}) {
        super("NODE_UNREACHABLE", message, { retryable: true, ...options });
        this.addr = options.addr;
        this.dataDir = options.dataDir;
    }
}
/** The node refused the API token (HTTP 401, `IDENTITY_INVALID`). */
export class UnauthorizedError extends IACPError {
    constructor(message, options = {}) {
        super("IDENTITY_INVALID", message, { status: 401, retryable: false, ...options });
    }
}
/**
 * Time ran out (`TIMEOUT`): the node found no response within a request's `wait` (HTTP 504),
 * or the call's own timeout passed before the node answered (then `status` is undefined).
 */
export class TimeoutError extends IACPError {
    constructor(message, options = {}) {
        super("TIMEOUT", message, { retryable: true, ...options });
    }
}
/**
 * The node's answer is larger than the client reads (`maxAnswerBytes`, 17 MiB by default);
 * it is never parsed cut. Raise the limit for a node whose `max_message_bytes` is larger.
 */
export class AnswerTooLargeError extends Error {
    constructor(message) {
        super(message);
        this.name = "AnswerTooLargeError";
    }
}
/** The error a node's error document describes, as the right class. */
export function errorFromDocument(status, doc, retryAfterHeader, what) {
    const d = doc;
    const e = d?.error;
    if (!e || typeof e.code !== "string" || e.code === "") {
        const text = typeof doc === "string" ? doc.trim().slice(0, 500) : JSON.stringify(doc ?? null).slice(0, 500);
        return new IACPError("INTERNAL_ERROR", `${what}: the node answered HTTP ${status} with no IACP error document: ${text}`, {
            status,
        });
    }
    let retryAfter = typeof e.retry_after === "number" && e.retry_after > 0 ? e.retry_after : undefined;
    if (retryAfter === undefined && retryAfterHeader) {
        const s = Number(retryAfterHeader);
        if (Number.isFinite(s) && s > 0)
            retryAfter = s;
    }
    const options = {
        status,
        retryAfter,
        messageId: d?.message_id || undefined,
        detail: e.detail,
    };
    if (typeof e.retryable === "boolean")
        options.retryable = e.retryable;
    const message = `${e.code}: ${e.message ?? ""}`.replace(/: $/, "");
    if (status === 401) {
        return new UnauthorizedError(`${message} (HTTP 401): the node refused the API token; use the token in <data-dir>/api.token of the node you call`, options);
    }
    if (e.code === "TIMEOUT")
        return new TimeoutError(`${message} (HTTP ${status})`, options);
    return new IACPError(e.code, `${message} (HTTP ${status})`, options);
}
