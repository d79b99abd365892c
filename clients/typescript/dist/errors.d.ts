import type { ErrorCode, ErrorPayload } from "./types.js";
/** Options of {@link IACPError}'s constructor. */
export interface IACPErrorOptions {
    /** The HTTP status the node answered with; absent for errors the client or a handler made. */
    status?: number;
    /** Whether trying again may succeed; default: what the IACP registry says of the code. */
    retryable?: boolean;
    /** Seconds to wait before trying again (RATE_LIMITED). */
    retryAfter?: number;
    /** The id of the message the error is about. */
    messageId?: string;
    /** The error's `detail`, as the node sent it. */
    detail?: unknown;
    cause?: unknown;
}
/**
 * An error in IACP's terms: the node refused a call (its error document's code, message and
 * HTTP status), an agent answered a request with an `error` message, or no node answered.
 *
 * Throw one from an {@link Agent} handler to answer the request with an `error` message of
 * that code: `throw new IACPError("CAPABILITY_MISMATCH", "I only review Go")`.
 */
export declare class IACPError extends Error {
    /** The IACP error code, e.g. `AGENT_NOT_FOUND`. */
    readonly code: ErrorCode;
    /** The HTTP status of the node's answer; undefined when the error did not come from one. */
    readonly status: number | undefined;
    /** Whether trying again may succeed. */
    readonly retryable: boolean;
    /** Seconds to wait before trying again, when the node said (RATE_LIMITED, Retry-After). */
    readonly retryAfter: number | undefined;
    /** The id of the message the error is about, when there is one. */
    readonly messageId: string | undefined;
    /** The error's `detail`, when the node sent one. */
    readonly detail: unknown;
    constructor(code: ErrorCode, message: string, options?: IACPErrorOptions);
    /** The error as the payload of an `error` message (what an Agent sends back). */
    toPayload(): ErrorPayload;
}
/**
 * No node answered: nothing listens at the address (connection refused), the connection
 * failed, or the data dir has no `api.addr` (no node runs with it). Its code is
 * `NODE_UNREACHABLE`, which is the client's own and never on the wire; it is retryable.
 */
export declare class NodeUnreachableError extends IACPError {
    /** The address the client tried (`http://host:port`), when it knew one. */
    readonly addr: string | undefined;
    /** The data dir the client read, when it was given one. */
    readonly dataDir: string | undefined;
    constructor(message: string, options?: IACPErrorOptions & {
        addr?: string;
        dataDir?: string;
    });
}
/** The node refused the API token (HTTP 401, `IDENTITY_INVALID`). */
export declare class UnauthorizedError extends IACPError {
    constructor(message: string, options?: IACPErrorOptions);
}
/**
 * Time ran out (`TIMEOUT`): the node found no response within a request's `wait` (HTTP 504),
 * or the call's own timeout passed before the node answered (then `status` is undefined).
 */
export declare class TimeoutError extends IACPError {
    constructor(message: string, options?: IACPErrorOptions);
}
/**
 * The node's answer is larger than the client reads (`maxAnswerBytes`, 17 MiB by default);
 * it is never parsed cut. Raise the limit for a node whose `max_message_bytes` is larger.
 */
export declare class AnswerTooLargeError extends Error {
    constructor(message: string);
}
/** The error a node's error document describes, as the right class. */
export declare function errorFromDocument(status: number, doc: unknown, retryAfterHeader: string | null, what: string): IACPError;
