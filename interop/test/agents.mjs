// What the interop tests share: a mesh of real nodes (the TypeScript client's harness), agents
// that answer through a node's local API as any HTTP agent does, and the bridge processes.
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

export { NodeProc, freePort, nodeBinary, scratch, startMesh } from "../../clients/typescript/test/harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The node's API token. */
export async function tokenOf(node) {
  return (await readFile(join(node.dir, "api.token"), "utf8")).trim();
}

/**
 * An agent behind node's local API: it takes each request from the inbox and answers it with
 * a response whose payload is {status: "accepted", ...reply(payload)}. Returns its stop.
 */
export async function answer(node, reply) {
  const auth = { Authorization: `Bearer ${await tokenOf(node)}` };
  const base = `http://${node.apiAddr}`;
  const stop = new AbortController();
  const loop = (async () => {
    let after = 0;
    while (!stop.signal.aborted) {
      let page;
      try {
        const res = await fetch(`${base}/v1/inbox?after=${after}&wait=1s`, { headers: auth, signal: stop.signal });
        page = await res.json();
      } catch {
        continue; // stopped, or the node is restarting
      }
      for (const it of page.messages ?? []) {
        const m = it.message;
        if (m.message.type === "request") {
          const doc = {
            envelope: { recipient: { agent_id: m.envelope.sender.agent_id }, correlation_id: m.envelope.message_id },
            message: { type: "response", intent: m.message.intent, payload: { status: "accepted", ...reply(m.message.payload) } },
          };
          await fetch(`${base}/.well-known/iacp/v1/message`, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify(doc) });
        }
        await fetch(`${base}/v1/inbox/${encodeURIComponent(it.message_id)}/ack`, { method: "POST", headers: auth });
      }
      after = page.next_after ?? after;
    }
  })();
  return async () => {
    stop.abort();
    await loop;
  };
}

/** Spawns `iacp-node args...` and returns it with its output so far (log). */
export function launch(binary, args) {
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"] });
  child.log = "";
  child.stdout.on("data", (b) => (child.log += b));
  child.stderr.on("data", (b) => (child.log += b));
  child.stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  };
  return child;
}

/** Waits until url answers 200 (at most 20 s). */
export async function until(url, what) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${what} did not answer ${url} within 20 s`);
    await sleep(50);
  }
}

/** Two nodes of one mesh, as startMesh, each with capabilities: alice has tool:chat, bob tool:summarise. */
export async function capableMesh(binary, dir) {
  const { NodeProc } = await import("../../clients/typescript/test/harness.mjs");
  const a = new NodeProc(binary, dir, "a");
  const b = new NodeProc(binary, dir, "b");
  a.agentId = "test:local:alice";
  b.agentId = "test:local:bob";
  await a.init("--agent-id", a.agentId, "--capabilities", "tool:chat");
  await a.start();
  await b.init("--join", await a.invite(b.agentId), "--capabilities", "tool:summarise");
  await b.start("--bootstrap", a.peerAddr());
  return { a, b };
}
