// A handoff agent in Node.js (20+) on the TypeScript client, @iacp/client (clients/typescript;
// this example imports its committed dist/, so nothing needs installing). It long-polls its
// node's inbox, answers every handoff request with a correlated response, refuses requests of
// other intents, and acknowledges each message once it is answered.
//
//   node handoff_agent.mjs --data-dir .data/c
//   node handoff_agent.mjs --api 127.0.0.1:9702 --token T [--once]
//
// In your own project: npm install <path to clients/typescript>, then import from "@iacp/client".
import { Agent, Client } from "../clients/typescript/dist/index.js";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};

const client = new Client({ dataDir: opt("--data-dir"), addr: opt("--api"), token: opt("--token") });
const agent = new Agent(client, { unhandled: "refuse" });
agent.on("handoff", (msg) => {
  console.log("answering", msg.envelope.message_id, "from", msg.envelope.sender.agent_id);
  return { status: "accepted", detail: "done by the node.js agent", echo: msg.message.payload };
});

// Ctrl-C stops the agent once the message in hand is answered and acknowledged.
const stop = new AbortController();
process.once("SIGINT", () => stop.abort());
process.once("SIGTERM", () => stop.abort());

try {
  const summary = await agent.run({ signal: stop.signal, maxMessages: args.includes("--once") ? 1 : undefined });
  console.log(`handled ${summary.handled}, answered ${summary.replied}, acknowledged ${summary.acked}`);
} catch (err) {
  console.error(err.message); // e.g. "no node is running with data dir .data/c: start one with ..."
  process.exit(1);
}
