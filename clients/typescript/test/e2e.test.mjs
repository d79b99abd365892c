// The client against two real nodes on 127.0.0.1: A (alice, this test's agent) and B (bob,
// whose agent answers with the Agent loop). Every call of the client is used once, and the
// errors a caller meets: no node, a wrong token, a refused message, a timeout, an abort.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Agent, Client, IACPError, NodeUnreachableError, TimeoutError, UnauthorizedError } from "../dist/index.js";
import { freePort, nodeBinary, scratch, startMesh } from "./harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits for p, or ms at most (and holds no timer after). */
async function within(p, ms) {
  let timer;
  try {
    await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Calls fn until it returns something truthy, at most ms; the last error fails the test. */
async function eventually(what, ms, fn) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await sleep(200);
  }
  throw new Error(`${what}: not within ${ms} ms${last ? `: ${last.message}` : ""}`);
}

describe("the client against two real nodes", { timeout: 120_000 }, () => {
  let dir, cleanup, a, b, alice, bob;
  let agentRun;
  const stopAgent = new AbortController();
  const bobSaw = [];
  const agentErrors = [];

  before(async () => {
    ({ dir, cleanup } = await scratch());
    const binary = await nodeBinary(dir);
    ({ a, b } = await startMesh(binary, dir, ["--capabilities", "tool:review,domain:code"]));
    alice = new Client({ dataDir: a.dir });
    bob = new Client({ dataDir: b.dir });
    await eventually("alice resolves bob", 20_000, () => alice.resolve(b.agentId));
    await eventually("alice hears bob's heartbeats", 20_000, async () =>
      (await alice.agents()).agents.some((x) => x.agent_id === b.agentId && x.state === "alive"),
    );

    const agent = new Agent(bob, { onError: (err, item) => agentErrors.push({ err, item }) });
    agent
      .on("handoff", async (msg) => {
        bobSaw.push(msg);
        return { detail: "reviewed by bob", echo: msg.message.payload };
      })
      .on("negotiate", () => {
        throw new IACPError("CAPABILITY_MISMATCH", "bob does not negotiate", { retryable: false });
      })
      .on("notify", (msg) => {
        bobSaw.push(msg);
      });
    agentRun = agent.run({ signal: stopAgent.signal, wait: 5_000 });
  });

  after(async () => {
    stopAgent.abort();
    await agentRun?.catch(() => {});
    await a?.kill();
    await b?.kill();
    await cleanup?.();
  });

  it("reads the node: health, status, peers, agents, resolve, discover, outbox", async () => {
    const health = await alice.health();
    assert.equal(health.agent_id, a.agentId);
    const status = await alice.status();
    assert.equal(status.agent_id, a.agentId);
    assert.equal(status.inbox, true);
    assert.ok(status.peers >= 1);
    const peers = await alice.peers();
    assert.ok(peers.peers.length >= 1);
    const agents = await alice.agents();
    assert.ok(agents.agents.some((x) => x.agent_id === b.agentId));
    const record = await alice.resolve(b.agentId);
    assert.equal(record.agent_id, b.agentId);
    assert.deepEqual(record.manifest.tools, ["review"]);
    const found = await alice.discover({ required: { tools: ["review"] }, preferred: { domains: ["code"] } });
    assert.equal(found.matches[0]?.agent_id, b.agentId);
    assert.equal(found.matches[0].preferred_matches, 1);
    const outbox = await alice.outbox();
    assert.equal(typeof outbox.durable, "boolean");
  });

  it("request: bob's agent answers a handoff, correlated", async () => {
    const res = await alice.request({ to: b.agentId, intent: "handoff", payload: { task: "review PR 12" } }, { wait: 10_000 });
    assert.equal(res.message.type, "response");
    assert.equal(res.message.intent, "handoff");
    assert.equal(res.envelope.sender.agent_id, b.agentId);
    assert.equal(res.message.payload.status, "accepted");
    assert.deepEqual(res.message.payload.echo, { task: "review PR 12" });
    const req = bobSaw.find((m) => m.message.payload.task === "review PR 12");
    assert.ok(req, "bob's handler saw the request");
    assert.equal(res.envelope.correlation_id, req.envelope.message_id);
  });

  it("request: an IACPError thrown by the handler comes back with its code", async () => {
    await assert.rejects(alice.request({ to: b.agentId, intent: "negotiate", payload: { offer: 1 } }, { wait: 10_000 }), (err) => {
      assert.ok(err instanceof IACPError);
      assert.equal(err.code, "CAPABILITY_MISMATCH");
      assert.equal(err.status, 422);
      assert.equal(err.retryable, false);
      assert.match(err.message, /bob does not negotiate/);
      assert.ok(err.messageId);
      return true;
    });
  });

  it("request: no answer within wait is a TimeoutError (504); bob's agent leaves what it does not handle", async () => {
    let id;
    await assert.rejects(alice.request({ to: b.agentId, intent: "x-audit", payload: { q: "anyone?" } }, { wait: 500 }), (err) => {
      assert.ok(err instanceof TimeoutError);
      assert.equal(err.code, "TIMEOUT");
      assert.equal(err.status, 504);
      id = err.messageId;
      return true;
    });
    const left = await eventually("the query is in bob's inbox", 10_000, async () => {
      const page = await bob.inbox();
      return page.messages.find((m) => m.message_id === id);
    });
    assert.equal(left.message.message.intent, "x-audit");
  });

  it("send: an agent nobody knows fails at once; queueUnknown queues, and cancel takes it back", async () => {
    // Until alice's node settled in the mesh its DHT's "not found" is no answer: a message sent
    // before is queued (and cancelled here).
    const refused = await eventually("a send to an agent nobody knows refused", 10_000, async () => {
      try {
        await alice.cancel(await alice.send({ to: "test:local:nobody", intent: "handoff", payload: {} }));
        return undefined;
      } catch (err) {
        return err;
      }
    });
    assert.ok(refused instanceof IACPError);
    assert.equal(refused.code, "AGENT_NOT_FOUND");
    assert.equal(refused.status, 404);
    const queued = await alice.send({ to: "test:local:later", intent: "handoff", payload: {} }, { queueUnknown: true });
    assert.equal(queued.status, "queued");
    assert.ok((await alice.outbox()).entries.some((e) => e.message_id === queued.message_id));
    assert.equal((await alice.cancel(queued)).cancelled, queued.message_id);
    await assert.rejects(alice.cancel(queued.message_id), (err) => err instanceof IACPError && err.status === 404);
  });

  it("send, the answer in the inbox and on the event stream, ack, the conversation", async () => {
    const watching = new AbortController();
    const seen = [];
    let ready;
    const opened = new Promise((r) => (ready = r));
    const watch = (async () => {
      for await (const ev of alice.events({ kinds: ["message"], signal: watching.signal, onOpen: ready })) {
        seen.push(ev);
        if (seen.length >= 1) break;
      }
    })();
    await Promise.race([opened, watch]);

    const sent = await alice.send({ to: b.agentId, intent: "handoff", payload: { task: "translate" } });
    assert.equal(sent.status, "accepted");
    assert.ok(sent.message_id);

    let answer;
    for await (const item of alice.messages({ signal: AbortSignal.timeout(15_000), wait: 2_000 })) {
      if (item.message.envelope.correlation_id === sent.message_id) {
        answer = item;
        break;
      }
    }
    assert.ok(answer, "the response reached alice's inbox");
    assert.equal(answer.message.message.type, "response");
    assert.deepEqual(answer.message.message.payload.echo, { task: "translate" });

    const page = await alice.inbox({ after: answer.seq - 1, limit: 1 });
    assert.equal(page.messages[0].message_id, answer.message_id);
    assert.equal(page.next_after, answer.seq);

    await within(watch, 10_000);
    watching.abort();
    await watch;
    assert.equal(seen[0]?.kind, "message");
    assert.equal(seen[0].inbound.message_id, answer.message_id);
    assert.equal(seen[0].inbound.type, "response");

    assert.deepEqual(await alice.ack(answer.message_id), { acked: answer.message_id });
    await assert.rejects(alice.ack(answer.message_id), (err) => err instanceof IACPError && err.status === 404);

    const conv = await alice.conversation(sent.message_id);
    assert.equal(conv.conversation, sent.message_id);
    const events = conv.messages.map((m) => `${m.event} ${m.type}`);
    assert.ok(events.includes("sent request"), events.join(", "));
    assert.ok(events.includes("received response"), events.join(", "));
    assert.ok(conv.messages.some((m) => m.event === "acked" && m.message_id === answer.message_id), events.join(", "));
    const rest = await alice.conversation(sent.message_id, { after: conv.next_after, limit: 10 });
    assert.deepEqual(rest.messages, []);
  });

  it("send an event: bob's notify handler takes it", async () => {
    const sent = await alice.send({ to: b.agentId, type: "event", intent: "notify", payload: { event_type: "work.done", n: 1 } });
    await eventually("bob's agent took the event", 10_000, () => bobSaw.some((m) => m.envelope.message_id === sent.message_id));
  });

  it("ask: bob's agent answers a query to its group", async () => {
    let res;
    await eventually("bob answering alice's query to the group review", 30_000, async () => {
      res = await alice.ask({ group: "review", intent: "handoff", payload: { task: "query" }, deadline: 3_000, count: 1 });
      return res.answers.length === 1;
    });
    const [ans] = res.answers;
    assert.equal(ans.agent_id, b.agentId);
    assert.equal(ans.status, "accepted");
    assert.equal(ans.payload.detail, "reviewed by bob");
    assert.equal(res.ended, "count");
    await assert.rejects(alice.ask({ group: "no spaces" }), (err) => err instanceof IACPError && err.code === "PAYLOAD_INVALID");
  });

  it("broadcast reaches bob's event stream", async () => {
    const stop = AbortSignal.timeout(20_000);
    let got;
    let ready;
    const opened = new Promise((r) => (ready = r));
    const watch = (async () => {
      for await (const ev of bob.events({ kinds: ["event"], signal: stop, onOpen: ready })) {
        if (ev.event?.event_type === "deploy.done") {
          got = ev;
          return;
        }
      }
    })();
    await Promise.race([opened, watch]);
    // Gossip may need a moment to carry the first one: publish until bob hears one.
    while (!got && !stop.aborted) {
      const res = await alice.broadcast({ event_type: "deploy.done", detail: "v1.2", severity: "info" });
      assert.equal(res.status, "accepted");
      await within(watch, 500);
    }
    await watch;
    assert.ok(got, "bob heard the broadcast");
    assert.equal(got.kind, "event");
    assert.equal(got.agent_id, a.agentId);
  });

  it("no node: NodeUnreachableError says what to do", async () => {
    const port = await freePort();
    await assert.rejects(new Client({ addr: `127.0.0.1:${port}`, token: "x" }).status(), (err) => {
      assert.ok(err instanceof NodeUnreachableError);
      assert.ok(err instanceof IACPError);
      assert.equal(err.code, "NODE_UNREACHABLE");
      assert.match(err.message, new RegExp(`no node answers at 127\\.0\\.0\\.1:${port}: is \`iacp-node run\``));
      return true;
    });
    await assert.rejects(new Client({ dataDir: dir }).status(), (err) => {
      assert.ok(err instanceof NodeUnreachableError);
      assert.match(err.message, /no node is running with data dir .*: start one with `iacp-node run --data-dir/);
      return true;
    });
  });

  it("a wrong token: UnauthorizedError", async () => {
    await assert.rejects(new Client({ addr: a.apiAddr, token: "not-the-token" }).status(), (err) => {
      assert.ok(err instanceof UnauthorizedError);
      assert.equal(err.code, "IDENTITY_INVALID");
      assert.equal(err.status, 401);
      return true;
    });
  });

  it("refused: an unknown agent, a malformed payload, a bad agent id", async () => {
    await assert.rejects(alice.resolve("test:local:nobody"), (err) => {
      assert.ok(err instanceof IACPError);
      assert.equal(err.code, "AGENT_NOT_FOUND");
      assert.equal(err.status, 404);
      return true;
    });
    await assert.rejects(alice.send({ to: b.agentId, type: "event", intent: "notify", payload: { n: 1 } }), (err) => {
      assert.equal(err.code, "PAYLOAD_INVALID");
      assert.equal(err.status, 400);
      assert.match(err.message, /event_type/);
      return true;
    });
    await assert.rejects(alice.request({ to: "not an id", intent: "handoff" }, { wait: 1000 }), (err) => {
      assert.equal(err.code, "PAYLOAD_INVALID");
      return true;
    });
  });

  it("the call's own timeout and an abort", async () => {
    await assert.rejects(alice.inbox({ wait: 10_000, timeout: 300 }), (err) => {
      assert.ok(err instanceof TimeoutError);
      assert.equal(err.status, undefined);
      assert.match(err.message, /did not answer within 300 ms/);
      return true;
    });
    const ctrl = new AbortController();
    setTimeout(() => ctrl.abort(), 200);
    await assert.rejects(alice.inbox({ wait: 10_000, signal: ctrl.signal }), { name: "AbortError" });
    // A stopped iterator ends quietly.
    const quiet = new AbortController();
    setTimeout(() => quiet.abort(), 200);
    for await (const ev of alice.events({ kinds: ["transition"], signal: quiet.signal })) assert.fail(`unexpected ${ev.kind}`);
  });

  it("bob's agent stops on its signal, having acknowledged only what it answered", async () => {
    stopAgent.abort();
    const summary = await agentRun;
    assert.deepEqual(agentErrors, []);
    // handoff (request), negotiate (refused), handoff (send), notify (event), and the
    // queries of "ask" that reached bob (at least the one answered)
    const asked = bobSaw.filter((m) => m.message.payload.task === "query").length;
    assert.ok(asked >= 1);
    assert.equal(summary.handled, 4 + asked);
    assert.equal(summary.replied, 3 + asked);
    assert.equal(summary.acked, 4 + asked);
    assert.equal(summary.failed, 0);
    const left = await bob.inbox();
    assert.deepEqual(
      left.messages.map((m) => m.message.message.intent),
      ["x-audit"],
    );
  });
});
