import { IACPError } from "./errors.js";
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
export class Agent {
    client;
    #handlers = new Map();
    #unhandled;
    #onError;
    constructor(client, options = {}) {
        this.client = client;
        this.#unhandled = options.unhandled ?? "leave";
        this.#onError =
            options.onError ??
                ((error, item) => console.error(`iacp agent: message ${item.message_id} (${item.message.message.intent}):`, error));
    }
    /**
     * Handles requests and events of `intent` with `handler` (one handler an intent; a later
     * call replaces it). Returns the agent, to chain calls.
     */
    on(intent, handler) {
        this.#handlers.set(intent, handler);
        return this;
    }
    /**
     * Runs the loop until `signal` is aborted or `maxMessages` were handled, and says what it
     * did. It rejects when the node cannot be reached or refuses the inbox (a wrong token):
     * errors about one message go to onError and the loop goes on.
     */
    async run(options = {}) {
        const summary = { handled: 0, replied: 0, acked: 0, failed: 0 };
        const { maxMessages } = options;
        if (maxMessages !== undefined && maxMessages <= 0)
            return summary;
        // The loop's own signal: the caller's, and ours once maxMessages were handled.
        const stop = new AbortController();
        const onAbort = () => stop.abort(options.signal?.reason);
        if (options.signal?.aborted)
            return summary;
        options.signal?.addEventListener("abort", onAbort, { once: true });
        try {
            for await (const item of this.client.messages({ signal: stop.signal, wait: options.wait })) {
                await this.#handle(item, summary, stop.signal);
                if (maxMessages !== undefined && summary.handled >= maxMessages)
                    break;
                if (stop.signal.aborted)
                    break;
            }
        }
        finally {
            options.signal?.removeEventListener("abort", onAbort);
        }
        return summary;
    }
    async #handle(item, summary, signal) {
        const msg = item.message;
        const { type, intent } = msg.message;
        const handler = type === "request" || type === "event" ? this.#handlers.get(intent) : undefined;
        if (!handler) {
            if (this.#unhandled === "leave")
                return;
            if (this.#unhandled === "refuse" && type === "request") {
                const known = [...this.#handlers.keys()].join(", ") || "none";
                const refusal = new IACPError("CAPABILITY_MISMATCH", `this agent handles no ${intent} requests (it handles: ${known})`, {
                    retryable: false,
                });
                if (!(await this.#reply(item, errorAnswer(msg, refusal), summary)))
                    return;
            }
            await this.#ack(item, summary);
            return;
        }
        summary.handled++;
        let answer;
        try {
            const result = await handler(msg, { item, client: this.client, signal });
            if (type === "request")
                answer = responseTo(msg, result ?? undefined);
        }
        catch (err) {
            if (type === "request") {
                if (err instanceof IACPError) {
                    answer = errorAnswer(msg, err);
                }
                else {
                    this.#onError(err, item);
                    answer = errorAnswer(msg, new IACPError("INTERNAL_ERROR", "the agent failed to handle the request", { retryable: true }));
                }
            }
            else {
                // An event whose handler failed stays in the inbox: a later run tries it again.
                summary.failed++;
                this.#onError(err, item);
                return;
            }
        }
        if (answer && !(await this.#reply(item, answer, summary)))
            return;
        await this.#ack(item, summary);
    }
    /** Sends an answer; false (told to onError) when the node refused it. */
    async #reply(item, answer, summary) {
        try {
            // Not the run's signal: an answer the handler produced is sent even while stopping.
            await this.client.send(answer);
            summary.replied++;
            return true;
        }
        catch (err) {
            if (!(err instanceof IACPError) || err.code === "NODE_UNREACHABLE")
                throw err;
            summary.failed++;
            this.#onError(err, item);
            return false;
        }
    }
    async #ack(item, summary) {
        try {
            await this.client.ack(item.message_id);
            summary.acked++;
        }
        catch (err) {
            if (!(err instanceof IACPError) || err.code === "NODE_UNREACHABLE")
                throw err;
            // Another reader took it meanwhile (404): it is gone either way.
            if (err.status !== 404) {
                summary.failed++;
                this.#onError(err, item);
            }
        }
    }
}
/** The response to request `req` carrying `payload` (status `accepted` when it has none). */
export function responseTo(req, payload) {
    const p = { ...(payload ?? {}) };
    if (p.status === undefined)
        p.status = "accepted";
    return answerTo(req, "response", p);
}
/** The `error` answer to request `req`. */
export function errorAnswer(req, err) {
    return answerTo(req, "error", err.toPayload());
}
function answerTo(req, type, payload) {
    const recipient = { agent_id: req.envelope.sender.agent_id };
    if (req.envelope.recipient.channel)
        recipient.channel = req.envelope.recipient.channel;
    return {
        envelope: { recipient, correlation_id: req.envelope.message_id },
        message: { type, intent: req.message.intent, payload },
    };
}
