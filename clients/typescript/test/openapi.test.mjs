// The client held to docs/openapi.yaml (as docs/openapi.json, which a Go test keeps equal to
// it): every endpoint the client calls is in the spec, every operation of the spec is called or
// left out on purpose, the send statuses are the spec's, and the interfaces of src/types.ts
// have the members of the spec's schemas, so that the client cannot drift from the API.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { ENDPOINTS, MESSAGE_PATH, SEND_STATUSES } from "../dist/index.js";

const pkg = dirname(dirname(fileURLToPath(import.meta.url)));
const spec = JSON.parse(await readFile(join(pkg, "..", "..", "docs", "openapi.json"), "utf8"));
const types = await readFile(join(pkg, "src", "types.ts"), "utf8");

/** The operations the TypeScript client leaves out, and why. */
const notCovered = {
  "GET /.well-known/iacp/v1/connect": "the WebSocket binding: the client long-polls the inbox instead",
  "GET /v1/discover": "POST /v1/discover carries the same query",
  "GET /metrics": "Prometheus scrapes it",
  "POST /auth/token": "an operator's call (iacp-node token)",
  "GET /v1/trust": "an operator's call (iacp-node trust)",
  "POST /v1/trust/forget": "an operator's call (iacp-node trust forget)",
  "POST /v1/trust/invites": "an operator's call (iacp-node invite)",
  "POST /v1/trust/revoke": "an operator's call (iacp-node revoke)",
  "GET /v1/trust/certificates": "an operator's call (iacp-node certs)",
  "GET /v1/approvals": "an operator's call (iacp-node approvals)",
  "POST /v1/approvals/{message_id}/approve": "an operator's call (iacp-node approve)",
  "POST /v1/approvals/{message_id}/reject": "an operator's call (iacp-node reject)",
  "POST /v1/coord/any": "coordination: the CLI's request --capability",
  "POST /v1/coord/fallback": "coordination: the CLI's request --fallback",
  "POST /v1/coord/scatter": "coordination: the CLI's scatter",
  "POST /v1/coord/pipeline": "coordination: the CLI's pipeline",
  "POST /v1/workflows": "workflows: the CLI's workflow run",
  "GET /v1/workflows": "workflows: the CLI's workflow list",
  "GET /v1/workflows/{id}": "workflows: the CLI's workflow status",
  "POST /v1/workflows/{id}/cancel": "workflows: the CLI's workflow cancel",
};

/** Each interface of src/types.ts and the spec's schema of the same document. */
const models = {
  SendResult: "SendResult",
  CancelResult: "CancelResult",
  InboxItem: "InboxItem",
  InboxPage: "InboxPage",
  AgentRecord: "Record",
  AskResult: "AskResult",
  OutboxResult: "Outbox",
  OutboxEntry: "OutboxEntry",
  EventPayload: "Event",
};

function operations() {
  const out = [];
  for (const [path, ops] of Object.entries(spec.paths)) {
    for (const method of Object.keys(ops)) if (method !== "parameters") out.push(`${method.toUpperCase()} ${path}`);
  }
  return out;
}

/** The members of interface name in src/types.ts (its own, not those it extends). */
function members(name) {
  const start = types.indexOf(`export interface ${name} `);
  assert.ok(start >= 0, `src/types.ts has no interface ${name}`);
  let i = types.indexOf("{", start) + 1;
  const out = new Set();
  for (let depth = 1, line = ""; depth > 0 && i < types.length; i++) {
    const c = types[i];
    if (c === "{") depth++;
    if (c === "}") depth--;
    if (c === "\n") {
      const m = depth === 1 && /^\s*([a-z_]+)\??:/.exec(line);
      if (m) out.add(m[1]);
      line = "";
    } else line += c;
  }
  return out;
}

describe("the client against docs/openapi.yaml", () => {
  it("calls only endpoints the spec describes", () => {
    const ops = new Set(operations());
    for (const e of ENDPOINTS) assert.ok(ops.has(e), `the client calls ${e}, which docs/openapi.yaml does not describe`);
  });

  it("calls every operation of the spec, or says why not", () => {
    for (const op of operations()) {
      assert.ok(ENDPOINTS.includes(op) || op in notCovered, `docs/openapi.yaml describes ${op}: call it in the client (and ENDPOINTS), or say in notCovered why not`);
    }
    for (const op of Object.keys(notCovered)) assert.ok(!ENDPOINTS.includes(op), `${op} is called and listed as left out`);
  });

  it("has the members of the spec's schemas", () => {
    for (const [iface, schema] of Object.entries(models)) {
      const want = new Set(Object.keys(spec.components.schemas[schema].properties));
      assert.deepEqual(members(iface), want, `${iface} and the spec's ${schema} differ`);
    }
  });

  it("knows the spec's send statuses and its queue_unknown parameter", () => {
    assert.deepEqual([...SEND_STATUSES].sort(), [...spec.components.schemas.SendResult.properties.status.enum].sort());
    const params = spec.paths[MESSAGE_PATH].post.parameters.map((p) => p.$ref?.split("/").pop());
    assert.ok(params.includes("queue_unknown"));
  });
});
