// The client and the agent loop against a fake node (node:http on 127.0.0.1), for what a real
// node does not readily show: the order of answer and ack, answers the node refuses, the event
// stream cut anywhere, silence, oversized answers, Retry-After, the data dir's files.
import assert from "node:assert/strict";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { Agent, AnswerTooLargeError, Client, IACPError, NodeUnreachableError, TimeoutError, UnauthorizedError } from "../dist/index.js";
import { scratch } from "./harness.mjs";

const TOKEN = "fake-token";

/** A request of alice's, as it sits in bob's inbox. */
function item(seq, type, intent, payload = {}) {
  const id = `00000000-0000-7000-8000-00000000000${seq}`;
  return {
    seq,
    received: "2026-01-01T00:00:00Z",
    peer: "12D3KooWfake",
    message_id: id,
    message: {
      envelope: {
        version: "1.0",
        message_id: id,
        correlation_id: id,
        sender: { agent_id: "test:local:alice", identity_sig: "sig", peer_id: "12D3KooWfake" },
        recipient: { agent_id: "test:local:bob", channel: "x-chan" },
        timestamp: "2026-01-01T00:00:00Z",
        ttl_seconds: 3600,
      },
      message: { type, intent, payload },
    },
  };
}

/**
 * A fake node: an inbox of items, a log of the calls ("POST message <type> <correlation>",
 * "POST ack <id>"), and per-test hooks for the message POST and the event stream.
 */
class FakeNode {
  constructor() {
    this.items = [];
    this.calls = [];
    this.sent = [];
    this.onMessage = () => [202, { message_id: "m", status: "accepted" }];
    this.onEvents = undefined;
    this.onOther = undefined;
    this.server = createServer((req, res) => this.serve(req, res));
  }

  async listen() {
    await new Promise((r) => this.server.listen(0, "127.0.0.1", r));
    this.addr = `127.0.0.1:${this.server.address().port}`;
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  async serve(req, res) {
    const url = new URL(req.url, "http://x");
    let body = "";
    for await (const chunk of req) body += chunk;
    const send = (status, doc, headers = {}) => {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(typeof doc === "string" ? doc : JSON.stringify(doc));
    };
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      return send(401, { error: { code: "IDENTITY_INVALID", message: "missing or wrong bearer token", retryable: false } });
    }
    if (this.onOther) {
      const handled = await this.onOther(req, res, url);
      if (handled) return;
    }
    if (req.method === "GET" && url.pathname === "/v1/inbox") {
      this.calls.push(`GET inbox after=${url.searchParams.get("after") ?? 0}`);
      const afterSeq = Number(url.searchParams.get("after") ?? 0);
      const waiting = this.items.filter((it) => it.seq > afterSeq);
      const page = waiting.slice(0, Number(url.searchParams.get("limit") ?? 1000));
      if (page.length === 0 && url.searchParams.get("wait")) await new Promise((r) => setTimeout(r, 100));
      const last = page.at(-1)?.seq ?? afterSeq;
      return send(200, { messages: page, more: waiting.length > page.length, next_after: last });
    }
    const ack = url.pathname.match(/^\/v1\/inbox\/([^/]+)\/ack$/);
    if (req.method === "POST" && ack) {
      const id = decodeURIComponent(ack[1]);
      this.calls.push(`POST ack ${id}`);
      const i = this.items.findIndex((it) => it.message_id === id);
      if (i < 0) return send(404, { error: { code: "PAYLOAD_INVALID", message: "not in the inbox", retryable: false } });
      this.items.splice(i, 1);
      return send(200, { acked: id });
    }
    if (req.method === "POST" && url.pathname === "/.well-known/iacp/v1/message") {
      const doc = JSON.parse(body);
      this.sent.push(doc);
      this.calls.push(`POST message ${doc.message.type} ${doc.envelope.correlation_id ?? ""}`);
      const [status, answer, headers] = this.onMessage(doc, url);
      return send(status, answer, headers);
    }
    if (req.method === "GET" && url.pathname === "/v1/events" && this.onEvents) {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      return this.onEvents(res, url);
    }
    send(404, { error: { code: "PAYLOAD_INVALID", message: `no route ${req.method} ${url.pathname}`, retryable: false } });
  }
}

describe("the agent loop against a fake node", { timeout: 30_000 }, () => {
  let node, client;
  before(async () => {
    node = new FakeNode();
    await node.listen();
    client = new Client({ addr: node.addr, token: TOKEN });
  });
  after(() => node.close());

  it("answers a request, then acknowledges it; takes an event; leaves what it does not handle", async () => {
    node.calls = [];
    node.sent = [];
    node.items = [item(1, "request", "handoff", { task: "t" }), item(2, "event", "notify", { event_type: "e" }), item(3, "request", "x-other")];
    const seen = [];
    const agent = new Agent(client, { onError: (e) => assert.fail(e) })
      .on("handoff", async (msg, ctx) => {
        assert.equal(ctx.item.seq, 1);
        assert.equal(node.calls.filter((c) => c.startsWith("POST")).length, 0, "nothing is sent or acked before the handler returns");
        await new Promise((r) => setTimeout(r, 20));
        seen.push(msg.message.intent);
        return { detail: "done" };
      })
      .on("notify", (msg) => void seen.push(msg.message.intent));
    const summary = await agent.run({ maxMessages: 2, wait: 1000 });
    assert.deepEqual(summary, { handled: 2, replied: 1, acked: 2, failed: 0 });
    assert.deepEqual(seen, ["handoff", "notify"]);
    const id1 = "00000000-0000-7000-8000-000000000001";
    assert.deepEqual(
      node.calls.filter((c) => c.startsWith("POST")),
      [`POST message response ${id1}`, `POST ack ${id1}`, `POST ack 00000000-0000-7000-8000-000000000002`],
    );
    assert.deepEqual(node.sent[0], {
      envelope: { recipient: { agent_id: "test:local:alice", channel: "x-chan" }, correlation_id: id1 },
      message: { type: "response", intent: "handoff", payload: { detail: "done", status: "accepted" } },
    });
    assert.deepEqual(
      node.items.map((it) => it.seq),
      [3],
      "the request no handler takes is left in the inbox",
    );
  });

  it("sends an error answer for a thrown IACPError, INTERNAL_ERROR for anything else", async () => {
    node.calls = [];
    node.sent = [];
    node.items = [item(1, "request", "handoff"), item(2, "request", "negotiate")];
    const errors = [];
    const agent = new Agent(client, { onError: (e) => errors.push(e) })
      .on("handoff", () => {
        throw new IACPError("PERMISSION_DENIED", "not for you", { retryable: false, detail: { why: "policy" } });
      })
      .on("negotiate", () => {
        throw new Error("a secret stack");
      });
    const summary = await agent.run({ maxMessages: 2, wait: 1000 });
    assert.deepEqual(summary, { handled: 2, replied: 2, acked: 2, failed: 0 });
    assert.deepEqual(node.sent[0].message, {
      type: "error",
      intent: "handoff",
      payload: { code: "PERMISSION_DENIED", message: "not for you", retryable: false, detail: { why: "policy" } },
    });
    assert.equal(node.sent[1].message.payload.code, "INTERNAL_ERROR");
    assert.doesNotMatch(node.sent[1].message.payload.message, /secret/, "the error's text stays local");
    assert.equal(errors.length, 1);
    assert.match(errors[0].message, /a secret stack/);
  });

  it("does not acknowledge a request whose answer the node refused", async () => {
    node.calls = [];
    node.items = [item(1, "request", "handoff")];
    node.onMessage = () => [403, { error: { code: "PERMISSION_DENIED", message: "the recipient's policy forbids it", retryable: false } }];
    const errors = [];
    const agent = new Agent(client, { onError: (e) => errors.push(e) }).on("handoff", () => ({ status: "accepted" }));
    const summary = await agent.run({ maxMessages: 1, wait: 1000 });
    node.onMessage = () => [202, { message_id: "m", status: "accepted" }];
    assert.deepEqual(summary, { handled: 1, replied: 0, acked: 0, failed: 1 });
    assert.equal(errors[0].code, "PERMISSION_DENIED");
    assert.equal(errors[0].status, 403);
    assert.ok(!node.calls.some((c) => c.startsWith("POST ack")));
    assert.equal(node.items.length, 1, "the request stays in the inbox");
  });

  it("refuses what it does not handle with unhandled: refuse, and stops on its signal", async () => {
    node.calls = [];
    node.sent = [];
    node.items = [item(1, "request", "x-other"), item(2, "response", "handoff", { status: "accepted" })];
    const stop = new AbortController();
    const agent = new Agent(client, { unhandled: "refuse" }).on("handoff", () => {});
    const running = agent.run({ signal: stop.signal, wait: 1000 });
    for (let i = 0; i < 250 && node.items.length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    const summary = await running;
    assert.deepEqual(summary, { handled: 0, replied: 1, acked: 2, failed: 0 });
    assert.equal(node.sent[0].message.type, "error");
    assert.equal(node.sent[0].message.payload.code, "CAPABILITY_MISMATCH");
    assert.match(node.sent[0].message.payload.message, /handles no x-other requests \(it handles: handoff\)/);
  });

  it("rejects when the node goes away", async () => {
    const gone = new FakeNode();
    await gone.listen();
    const addr = gone.addr;
    await gone.close();
    const agent = new Agent(new Client({ addr, token: TOKEN }));
    await assert.rejects(agent.run({ maxMessages: 1 }), NodeUnreachableError);
  });
});

describe("the client against a fake node", { timeout: 30_000 }, () => {
  let node, client, dir, cleanup;
  before(async () => {
    node = new FakeNode();
    await node.listen();
    client = new Client({ addr: node.addr, token: TOKEN });
    ({ dir, cleanup } = await scratch());
  });
  after(async () => {
    await node.close();
    await cleanup();
  });

  it("parses the event stream however it is cut, and ends quietly on abort", async () => {
    const stream =
      ": keep-alive\r\n\r\n" +
      'id: 1\r\nevent: event\r\ndata: {"kind":"event","at":"t","event":{"event_type":"a"}}\r\n\r\n' +
      'event: transition\ndata: {"kind":"transition",\ndata: "at":"t","transition":{"from":"alive","to":"suspect"}}\n\n' +
      'data: {"kind":"message","at":"t"}\r\r';
    node.onEvents = async (res, url) => {
      assert.equal(url.searchParams.get("kinds"), "event,transition,message");
      assert.equal(url.searchParams.get("agent"), "acme:b:bot");
      // One byte at a time: every line end is split somewhere.
      for (const ch of Buffer.from(stream)) {
        res.write(Buffer.from([ch]));
        await new Promise((r) => setImmediate(r));
      }
    };
    const stop = new AbortController();
    const got = [];
    for await (const ev of client.events({ kinds: ["event", "transition", "message"], agent: "acme:b:bot", signal: stop.signal })) {
      got.push(ev);
      if (got.length === 3) stop.abort();
    }
    assert.deepEqual(
      got.map((e) => e.kind),
      ["event", "transition", "message"],
    );
    assert.equal(got[0].id, "1");
    assert.equal(got[0].event.event_type, "a");
    assert.equal(got[1].transition.to, "suspect");
  });

  it("fails a stream the node closes, and one that falls silent", async () => {
    node.onEvents = (res) => res.end(": bye\n\n");
    await assert.rejects(
      async () => {
        for await (const _ of client.events()) assert.fail("no event");
      },
      (err) => err instanceof NodeUnreachableError && /closed the event stream/.test(err.message),
    );
    node.onEvents = (res) => res.write(": hello\n\n");
    await assert.rejects(
      async () => {
        for await (const _ of client.events({ idleTimeout: 200 })) assert.fail("no event");
      },
      (err) => err instanceof TimeoutError && /silent for 200 ms/.test(err.message),
    );
    node.onEvents = undefined;
  });

  it("reports Retry-After, non-IACP error answers and oversized answers", async () => {
    node.onMessage = () => [429, { error: { code: "RATE_LIMITED", message: "slow down", retryable: true } }, { "Retry-After": "3" }];
    await assert.rejects(client.send({ to: "a:b:c", intent: "handoff" }), (err) => {
      assert.equal(err.code, "RATE_LIMITED");
      assert.equal(err.status, 429);
      assert.equal(err.retryAfter, 3);
      assert.equal(err.retryable, true);
      return true;
    });
    node.onMessage = () => [502, "<html>bad gateway</html>"];
    await assert.rejects(client.send({ to: "a:b:c", intent: "handoff" }), (err) => {
      assert.ok(err instanceof IACPError);
      assert.equal(err.code, "INTERNAL_ERROR");
      assert.equal(err.status, 502);
      assert.match(err.message, /HTTP 502 with no IACP error document: <html>bad gateway/);
      return true;
    });
    node.onMessage = () => [202, { message_id: "m", status: "accepted" }];
    const big = "x".repeat(2 << 20);
    node.onOther = (req, res, url) => {
      if (url.pathname !== "/v1/status") return false;
      res.writeHead(200, { "Content-Type": "application/json" }); // chunked: no Content-Length
      res.end(JSON.stringify({ big }));
      return true;
    };
    const small = new Client({ addr: node.addr, token: TOKEN, maxAnswerBytes: 1 << 20 });
    await assert.rejects(small.status(), (err) => err instanceof AnswerTooLargeError && /maxAnswerBytes/.test(err.message));
    assert.equal((await client.status()).big.length, big.length);
    node.onOther = undefined;
  });

  it("refuses a message without a recipient or intent before it leaves", async () => {
    await assert.rejects(client.send({ intent: "handoff" }), TypeError);
    await assert.rejects(client.send({ to: "a:b:c" }), TypeError);
    await assert.rejects(client.request({ to: "a:b:c", intent: "notify", type: "event" }), /use send/);
    assert.throws(() => new Client({ timeout: -1 }), RangeError);
  });

  it("reads api.addr and api.token from the data dir, and refuses a token others can read", async () => {
    const dd = join(dir, "node");
    await mkdir(dd);
    await writeFile(join(dd, "api.addr"), `${node.addr}\n`);
    await writeFile(join(dd, "api.token"), `${TOKEN}\n`, { mode: 0o600 });
    node.calls = [];
    node.items = [item(1, "request", "handoff")];
    const page = await new Client({ dataDir: dd }).inbox();
    assert.equal(page.messages.length, 1);
    await chmod(join(dd, "api.token"), 0o644);
    await assert.rejects(new Client({ dataDir: dd }).inbox(), (err) => err instanceof UnauthorizedError && /chmod 600/.test(err.message));
    await chmod(join(dd, "api.token"), 0o600);
    await writeFile(join(dd, "api.token"), "wrong\n");
    await assert.rejects(new Client({ dataDir: dd }).inbox(), (err) => err instanceof UnauthorizedError && err.status === 401);
    await assert.rejects(new Client({ addr: node.addr, dataDir: join(dir, "none") }).inbox(), (err) => {
      assert.ok(err instanceof UnauthorizedError);
      assert.match(err.message, /needs an API token: pass token/);
      return true;
    });
  });

  it("follows the inbox page by page and ends with follow: false", async () => {
    node.items = [item(1, "event", "notify"), item(2, "event", "notify"), item(3, "event", "notify")];
    const seqs = [];
    for await (const it of client.messages({ follow: false, limit: 2 })) seqs.push(it.seq);
    assert.deepEqual(seqs, [1, 2, 3]);
  });
});
