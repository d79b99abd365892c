// A Server-Sent Events parser (the WHATWG "event stream" format) over a byte stream.

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
export async function* parseSSE(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  maxLine: number,
  onBytes?: () => void,
): AsyncGenerator<SSEEvent, void, undefined> {
  const decoder = new TextDecoder("utf-8");
  let buf = "";
  let event = "";
  let data: string[] = [];
  let dataLen = 0;
  let lastId: string | undefined;
  let afterCR = false;

  const line = (l: string): SSEEvent | undefined => {
    if (l === "") {
      if (data.length === 0) {
        event = "";
        return undefined;
      }
      const ev = { event: event || "message", data: data.join("\n"), id: lastId };
      event = "";
      data = [];
      dataLen = 0;
      return ev;
    }
    if (l.startsWith(":")) return undefined;
    const colon = l.indexOf(":");
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? "" : l.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        event = value;
        break;
      case "data":
        dataLen += value.length + 1;
        if (dataLen > maxLine) throw new Error(`event stream: an event's data is longer than ${maxLine} characters`);
        data.push(value);
        break;
      case "id":
        if (!value.includes("\0")) lastId = value;
        break;
    }
    return undefined;
  };

  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      buf += decoder.decode();
      break;
    }
    onBytes?.();
    buf += decoder.decode(value, { stream: true });
    // Lines end with \n, \r\n or \r. A line that ended with \r is dispatched at once; the
    // \n of its \r\n may come with the next chunk, and is skipped then.
    let start = 0;
    if (afterCR && buf.startsWith("\n")) start = 1;
    afterCR = false;
    for (;;) {
      const i = indexOfEOL(buf, start);
      if (i < 0) break;
      const ev = line(buf.slice(start, i));
      if (buf[i] === "\r" && i === buf.length - 1) afterCR = true;
      start = i + (buf[i] === "\r" && buf[i + 1] === "\n" ? 2 : 1);
      if (ev) yield ev;
    }
    buf = buf.slice(start);
    if (buf.length > maxLine) throw new Error(`event stream: a line is longer than ${maxLine} characters`);
  }
  // The stream ended: an event not followed by its blank line is not dispatched (the spec).
}

function indexOfEOL(s: string, from: number): number {
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 10 || c === 13) return i;
  }
  return -1;
}
