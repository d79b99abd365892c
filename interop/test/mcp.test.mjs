// The MCP server (`iacp-node mcp`) with the client the project did not write: the official MCP
// TypeScript SDK, over stdio and over streamable HTTP. Every tool is called, discover with a
// list; every tool's input schema passes the check the MCP Inspector's CLI and LLM
// function-calling converters make: an object schema whose members each have one plain type.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { answer, capableMesh, freePort, launch, nodeBinary, scratch, tokenOf } from "./agents.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The tool's structured answer; a tool error fails the test with its text. */
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${res.content?.[0]?.text}`);
  return res.structuredContent;
}

test("an MCP client calls every tool of iacp-node mcp, over stdio and streamable HTTP", async (t) => {
  const { dir, cleanup } = await scratch();
  t.after(cleanup);
  const bin = await nodeBinary(dir);
  const { a, b } = await capableMesh(bin, dir);
  t.after(() => Promise.all([a.kill(), b.kill()]));
  const stop = await answer(b, (p) => ({ summary: `short: ${p.text ?? ""}` }));
  t.after(stop);

  const client = new Client({ name: "interop", version: "1" });
  await client.connect(new StdioClientTransport({ command: bin, args: ["mcp", "--data-dir", a.dir, "--api", a.apiAddr], stderr: "pipe" }));
  t.after(() => client.close());

  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tl) => tl.name).sort(), ["agents", "ask", "broadcast", "cancel", "discover", "inbox", "outbox", "request", "resolve", "send"]);
  for (const tl of tools) {
    assert.equal(tl.inputSchema.type, "object", tl.name);
    for (const [name, prop] of Object.entries(tl.inputSchema.properties ?? {})) {
      assert.ok(prop.type === undefined || typeof prop.type === "string", `${tl.name}.${name} has type ${JSON.stringify(prop.type)}: want one plain type`);
    }
  }

  let found;
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(200)) {
    found = await call(client, "discover", { tools: ["summarise"] });
    if (found.matches?.length === 1) break;
  }
  assert.equal(found.matches[0].agent_id, b.agentId, JSON.stringify(found));
  const answered = await call(client, "request", { to: b.agentId, payload: { text: "a long text" }, wait_seconds: 10 });
  assert.equal(answered.payload.summary, "short: a long text");
  assert.equal((await call(client, "resolve", { agent_id: b.agentId })).agent_id, b.agentId);
  assert.ok(Array.isArray((await call(client, "agents", {})).agents));
  assert.ok((await call(client, "broadcast", { event_type: "build.done" })).message_id);
  const asked = await call(client, "ask", { group: "summarise", intent: "handoff", payload: { text: "x" }, deadline_seconds: 3, count: 1, expect: [b.agentId] });
  assert.ok(Array.isArray(asked.answers));
  assert.equal((await call(client, "send", { to: b.agentId, type: "event", payload: { event_type: "hello" } })).status, "accepted");

  // A typo fails at once (once the node settled in the mesh: until then its DHT's "not found"
  // is no answer, and the message is queued, here cancelled); queued for an agent not yet
  // seen, a message can be cancelled.
  let typo;
  for (const deadline = Date.now() + 10_000; ; await sleep(200)) {
    typo = await client.callTool({ name: "send", arguments: { to: "test:local:typo", type: "event", payload: { event_type: "x" } } });
    if (typo.isError || Date.now() > deadline) break;
    await call(client, "cancel", { message_id: typo.structuredContent.message_id });
  }
  assert.ok(typo.isError && typo.content[0].text.startsWith("AGENT_NOT_FOUND: no agent test:local:typo is known"), typo.content[0].text);
  const queued = await call(client, "send", { to: "test:local:later", type: "event", payload: { event_type: "x" }, queue_unknown: true });
  assert.equal(queued.status, "queued");
  assert.equal((await call(client, "outbox", {})).entries.length, 1);
  assert.equal((await call(client, "cancel", { message_id: queued.message_id })).cancelled, queued.message_id);
  const inbox = await call(client, "inbox", { wait_seconds: 1, ack: true });
  assert.ok(Array.isArray(inbox.messages));

  // Streamable HTTP, with the node's API token.
  const port = await freePort();
  const http = launch(bin, ["mcp", "--data-dir", a.dir, "--api", a.apiAddr, "--http", `127.0.0.1:${port}`]);
  t.after(() => http.stop());
  const token = await tokenOf(a);
  const remote = new Client({ name: "interop-http", version: "1" });
  for (const deadline = Date.now() + 20_000; ; await sleep(100)) {
    try {
      await remote.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
      break;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`mcp --http: ${e}\n${http.log}`);
    }
  }
  t.after(() => remote.close());
  const viaHTTP = await call(remote, "discover", { tools: ["summarise"], domains: [] });
  assert.equal(viaHTTP.matches[0].agent_id, b.agentId);
});
