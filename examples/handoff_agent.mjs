// A handoff agent in Node.js (20+) with no npm packages: it long-polls its node's inbox,
// answers every handoff request with a correlated response, and acknowledges what it took.
//
//   node handoff_agent.mjs --data-dir .data/c
//   node handoff_agent.mjs --api 127.0.0.1:9702 --token T [--once]
import { readFileSync } from "node:fs";
import { join } from "node:path";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const dataDir = opt("--data-dir", process.env.IACP_DATA_DIR || ".data/node");
const once = args.includes("--once");
let addr, token;
try {
  addr = opt("--api") || readFileSync(join(dataDir, "api.addr"), "utf8").trim();
  token = opt("--token") || readFileSync(join(dataDir, "api.token"), "utf8").trim();
} catch {
  console.error(`no node is running with data dir ${dataDir}: start one with \`iacp-node run\``);
  process.exit(1);
}
const base = addr.startsWith("http") ? addr : `http://${addr}`;

async function call(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, Accept: "application/json", "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const doc = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(doc)}`);
  return doc;
}

for (;;) {
  const { messages } = await call("GET", "/v1/inbox?wait=30s");
  for (const { message: msg } of messages) {
    const env = msg.envelope;
    if (msg.message.type === "request" && msg.message.intent === "handoff") {
      await call("POST", "/.well-known/iacp/v1/message", {
        envelope: {
          correlation_id: env.message_id,
          recipient: { agent_id: env.sender.agent_id, channel: env.recipient.channel },
        },
        message: {
          type: "response",
          intent: "handoff",
          payload: { status: "accepted", detail: "done by the node.js agent", echo: msg.message.payload },
        },
      });
      console.log("answered", env.message_id, "from", env.sender.agent_id);
    }
    await call("POST", `/v1/inbox/${env.message_id}/ack`);
    if (once) process.exit(0);
  }
}
