/**
 * A client of an iacp-node's local API, for Node.js 20+ and no dependencies: the IACP HTTP
 * binding (send, request), the inbox (pages, a following iterator, acks), the event stream,
 * discovery and status, and an agent loop that answers requests. docs/clients/typescript.md
 * walks through it.
 *
 * @packageDocumentation
 */
export { Client, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_TIMEOUT, ENDPOINTS, MESSAGE_PATH, SEND_STATUSES, defaultDataDir, toOutgoing, } from "./client.js";
export type { CallOptions, ClientOptions, ConversationOptions, EventsOptions, InboxOptions, MessagesOptions, RequestOptions, SendOptions, } from "./client.js";
export { Agent, errorAnswer, responseTo } from "./agent.js";
export type { AgentOptions, Handler, HandlerContext, RunOptions, RunSummary, UnhandledPolicy } from "./agent.js";
export { AnswerTooLargeError, IACPError, NodeUnreachableError, TimeoutError, UnauthorizedError } from "./errors.js";
export type { IACPErrorOptions } from "./errors.js";
export type * from "./types.js";
