import type { Client } from "./client.js";
import { IACPError } from "./errors.js";
import type { InboxItem, Intent, Message, OutgoingMessage, Payload } from "./types.js";
/** What a handler gets besides the message. */
export interface HandlerContext {
    /** The inbox item: its seq, when and from which peer it arrived. */
    item: InboxItem;
    /** The agent's client, to call the node while handling (ask another agent, say). */
    client: Client;
    /** Aborted when the agent is stopped: a long handler should give up and throw. */
    signal: AbortSignal;
}
/**
 * Handles one message. For a request, what it returns is the response's payload (a
 * `status` of `accepted` is filled in when it names none); what it throws is answered as an
 * `error` message: an {@link IACPError}'s code and message, else `INTERNAL_ERROR`. For an
 * event, what it returns is ignored.
 */
export type Handler = (message: Message, context: HandlerContext) => Payload | void | Promise<Payload | void>;
/** What {@link Agent.run} does with a message no handler takes. */
export type UnhandledPolicy = 
/** Leave it in the inbox for another reader (the default); this run goes past it. */
"leave"
/** Acknowledge it: it is gone. */
 | "ack"
/** Answer a request with CAPABILITY_MISMATCH, then acknowledge it; acknowledge anything else. */
 | "refuse";
/** Options of {@link Agent}. */
export interface AgentOptions {
    /** What to do with messages no handler takes; default `leave`. */
    unhandled?: UnhandledPolicy;
    /**
     * Told of what went wrong with one message without stopping the agent: a handler that threw
     * something other than an {@link IACPError}, a reply or an ack the node refused. Default:
     * `console.error`.
     */
    onError?: (error: unknown, item: InboxItem) => void;
}
/** Options of {@link Agent.run}. */
export interface RunOptions {
    /** Stops the agent: run resolves once the message in hand is answered and acknowledged. */
    signal?: AbortSignal;
    /** Stop after handling this many messages (those a handler took). */
    maxMessages?: number;
    /** Each long poll of the inbox waits up to this many milliseconds (default 30 s). */
    wait?: number;
}
/** What {@link Agent.run} did. */
export interface RunSummary {
    /** Messages a handler took. */
    handled: number;
    /** Answers sent: responses and `error` messages. */
    replied: number;
    /** Messages acknowledged. */
    acked: number;
    /** Messages that went wrong (told to onError), left in the inbox unless answered. */
    failed: number;
}
/**
 * An agent loop: it takes messages from the node's inbox (long-polling), calls the handler
 * registered for each one's intent, sends what the handler returns as the response to a
 * request, and acknowledges the message only once the handler returned and its answer was
 * sent. A message whose answer could not be sent stays in the inbox, and a later run gets it
 * again: delivery is at least once, so a handler should tolerate seeing a message twice.
 *
 * Messages are handled one at a time, oldest first.
 *
 * @example
 * const agent = new Agent(client);
 * agent.on("handoff", async (msg) => ({ status: "accepted", detail: `took ${msg.message.payload.task}` }));
 * await agent.run({ signal });
 */
export declare class Agent {
    #private;
    readonly client: Client;
    constructor(client: Client, options?: AgentOptions);
    /**
     * Handles requests and events of `intent` with `handler` (one handler an intent; a later
     * call replaces it). Returns the agent, to chain calls.
     */
    on(intent: Intent, handler: Handler): this;
    /**
     * Runs the loop until `signal` is aborted or `maxMessages` were handled, and says what it
     * did. It rejects when the node cannot be reached or refuses the inbox (a wrong token):
     * errors about one message go to onError and the loop goes on.
     */
    run(options?: RunOptions): Promise<RunSummary>;
}
/** The response to request `req` carrying `payload` (status `accepted` when it has none). */
export declare function responseTo(req: Message, payload?: Payload): OutgoingMessage;
/** The `error` answer to request `req`. */
export declare function errorAnswer(req: Message, err: IACPError): OutgoingMessage;
