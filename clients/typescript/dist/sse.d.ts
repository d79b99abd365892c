/** One dispatched Server-Sent Event. */
export interface SSEEvent {
    /** The `event:` field; `message` when the event named none. */
    event: string;
    /** The `data:` lines joined with newlines. */
    data: string;
    /** The last `id:` seen, when any. */
    id: string | undefined;
}
/**
 * Parses the event stream read from `reader`, yielding each event as its blank line
 * dispatches it. Comment lines (`:`, the node's keep-alives) are skipped but still reach
 * `onBytes`. A line longer than `maxLine` characters, or an event whose data grows past it,
 * fails the stream rather than growing without bound.
 */
export declare function parseSSE(reader: ReadableStreamDefaultReader<Uint8Array>, maxLine: number, onBytes?: () => void): AsyncGenerator<SSEEvent, void, undefined>;
