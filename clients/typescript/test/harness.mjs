// Starts real iacp-node processes on 127.0.0.1 for the tests, as e2e/harness_test.go does:
// the founder inits and runs, invites the others, which init with --join and bootstrap from it.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
/** The repository's root: clients/typescript/test/../../.. */
export const repoRoot = resolve(here, "..", "..", "..");

const live = new Set();
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** A scratch directory, removed by the returned cleanup. */
export async function scratch() {
  const dir = await mkdtemp(join(tmpdir(), "iacp-ts-"));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** The node binary: $IACP_NODE_BINARY, else built from the repository into dir. */
export async function nodeBinary(dir) {
  if (process.env.IACP_NODE_BINARY) return resolve(process.env.IACP_NODE_BINARY);
  const out = join(dir, "iacp-node");
  await run("go", ["build", "-o", out, "./cmd/iacp-node"], { cwd: repoRoot, timeout: 300_000 });
  return out;
}

/** A TCP port free on 127.0.0.1 a moment ago. */
export function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One iacp-node process with its data dir and ports. */
export class NodeProc {
  constructor(binary, dir, name) {
    this.binary = binary;
    this.name = name;
    this.dir = join(dir, name);
    this.log = "";
    this.child = undefined;
  }

  /** iacp-node init with args (--agent-id ID founds a mesh; --join TOKEN joins one). */
  async init(...args) {
    this.p2pPort = await freePort();
    this.apiPort = await freePort();
    await run(this.binary, ["init", "--data-dir", this.dir, ...args], { timeout: 30_000 });
  }

  get apiAddr() {
    return `127.0.0.1:${this.apiPort}`;
  }

  /** Runs the node and resolves once its API answers (at most 20 s). */
  async start(...extra) {
    const args = ["run", "--data-dir", this.dir, "--listen", `/ip4/127.0.0.1/tcp/${this.p2pPort}`, "--api", this.apiAddr,
      "--nat=false", "--heartbeat-interval", "1s", "--log-level", "warn", ...extra];
    const child = spawn(this.binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    live.add(child);
    child.stdout.on("data", (b) => (this.log += b));
    child.stderr.on("data", (b) => (this.log += b));
    child.once("exit", () => live.delete(child));
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${this.name} exited at start:\n${this.log}`);
      try {
        const res = await fetch(`http://${this.apiAddr}/healthz`, { signal: AbortSignal.timeout(2000) });
        await res.arrayBuffer();
        if (res.ok) return;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline) throw new Error(`${this.name} did not start within 20 s:\n${this.log}`);
      await sleep(50);
    }
  }

  /** The node's full multiaddr from its printed `listen` line, for others to bootstrap from. */
  peerAddr() {
    for (const line of this.log.split("\n")) {
      const f = line.trim().split(/\s+/);
      if (f.length === 2 && f[0] === "listen") return f[1];
    }
    throw new Error(`${this.name} printed no listen address:\n${this.log}`);
  }

  /** A one-time invitation for agentId from this (the founder's) node, as `iacp-node invite`. */
  async invite(agentId) {
    const { stdout } = await run(this.binary, ["invite", "--data-dir", this.dir, "--api", this.apiAddr, "--agent", agentId, "-o", "json"], {
      timeout: 30_000,
    });
    return JSON.parse(stdout).token;
  }

  /** SIGKILL, and wait for the exit. */
  async kill() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
  }
}

/**
 * Two nodes of one mesh: A (agent test:local:alice) founds it, B (test:local:bob) joins it.
 * bRunArgs go to B's run.
 */
export async function startMesh(binary, dir, bRunArgs = []) {
  const a = new NodeProc(binary, dir, "a");
  const b = new NodeProc(binary, dir, "b");
  a.agentId = "test:local:alice";
  b.agentId = "test:local:bob";
  await a.init("--agent-id", a.agentId);
  await a.start();
  await b.init("--join", await a.invite(b.agentId));
  await b.start("--bootstrap", a.peerAddr(), ...bRunArgs);
  return { a, b };
}
