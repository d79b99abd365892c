// The A2A bridge (`iacp-node a2a serve`) with clients the project did not write: @a2a-js/sdk
// 1.x (A2A 1.0, JSON-RPC and HTTP+JSON) and 0.3 (A2A 0.3), each reaching a mesh agent (bob, on
// another node) and the serving node's own agent (alice); and the card's signature checked
// with the 1.x SDK's verifier, its key fetched from the JWKS the signature's jku names.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { Role, TaskState, verifyAgentCardSignature } from "@a2a-js/sdk";
import * as legacy from "a2a-js-03/client";
import { importJWK } from "jose";

import { answer, freePort, launch, nodeBinary, scratch, startMesh, tokenOf, until } from "./agents.mjs";

test("A2A 1.0 and 0.3 clients reach a mesh agent and the node's own agent; the card's signature verifies", async (t) => {
  const { dir, cleanup } = await scratch();
  t.after(cleanup);
  const bin = await nodeBinary(dir);
  const { a, b } = await startMesh(bin, dir);
  t.after(() => Promise.all([a.kill(), b.kill()]));
  const stops = [await answer(a, (p) => ({ echo: p.text, by: "alice" })), await answer(b, (p) => ({ echo: p.text, by: "bob" }))];
  t.after(() => Promise.all(stops.map((s) => s())));
  const port = await freePort();
  const bridge = launch(bin, ["a2a", "serve", "--data-dir", a.dir, "--api", a.apiAddr, "--listen", `127.0.0.1:${port}`, "--wait", "20s"]);
  t.after(() => bridge.stop());
  const root = `http://127.0.0.1:${port}`;
  await until(`${root}/.well-known/agent-card.json`, "a2a serve");
  const token = await tokenOf(a);
  const authFetch = (url, init = {}) => fetch(url, { ...init, headers: { ...(init.headers ?? {}), Authorization: `Bearer ${token}` } });

  for (const [base, who] of [[`${root}/agents/${b.agentId}/`, "bob"], [`${root}/`, "alice"]]) {
    for (const transport of [new JsonRpcTransportFactory({ fetchImpl: authFetch }), new RestTransportFactory({ fetchImpl: authFetch })]) {
      const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [transport], preferredTransports: [transport.protocolName],
      }));
      const client = await until10(() => factory.createFromUrl(base), `a 1.0 client of ${base}`);
      const task = await client.sendMessage({
        message: { messageId: randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: "text", value: `hi ${who}` } }] },
      });
      assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED, `${who} over ${transport.protocolName}: ${JSON.stringify(task)}`);
      const data = task.artifacts[0].parts.find((p) => p.content?.$case === "data").content.value;
      assert.equal(data.echo, `hi ${who}`);
      assert.equal(data.by, who);
    }

    const legacyFactory = new legacy.ClientFactory(legacy.ClientFactoryOptions.createFrom(legacy.ClientFactoryOptions.default, {
      transports: [new legacy.JsonRpcTransportFactory({ fetchImpl: authFetch })],
    }));
    const old = await legacyFactory.createFromUrl(base);
    const res = await old.sendMessage({ message: { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: `old ${who}` }] } });
    assert.equal(res.kind, "task", JSON.stringify(res));
    assert.equal(res.status.state, "completed", JSON.stringify(res));
    const part = res.artifacts[0].parts.find((p) => p.kind === "data");
    assert.equal(part.data.echo, `old ${who}`);

    const card = await (await fetch(`${base}.well-known/agent-card.json`)).json();
    let fetched = "";
    await verifyAgentCardSignature(async (kid, jku) => {
      fetched = jku;
      const set = await (await fetch(jku)).json();
      return importJWK(set.keys.find((k) => k.kid === kid), "EdDSA");
    })(card);
    assert.equal(fetched, `${root}/.well-known/jwks.json`);
    card.skills[0].id = "forged";
    const debug = console.debug;
    console.debug = () => {}; // the verifier logs each signature that fails
    try {
      await assert.rejects(verifyAgentCardSignature(async (kid, jku) => importJWK((await (await fetch(jku)).json()).keys[0], "EdDSA"))(card));
    } finally {
      console.debug = debug;
    }
  }

  // An agent nobody knows has no card.
  await assert.rejects(new DefaultAgentCardResolver({ fetchImpl: authFetch }).resolve(`${root}/agents/test:local:nobody/`), /404/);
});

/** Retries fn for up to 10 s: the mesh agent's card is there once discovery found it. */
async function until10(fn, what) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`${what}: ${e}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
