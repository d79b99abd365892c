"""A Python agent and a TypeScript agent hand work to each other through their libraries.

Node A's agent is Python (this library's decorator loop, in a thread); node B's is a Node.js
process on @iacp/client (clients/typescript/dist) with its Agent loop. Each asks the other
once and gets the other's answer. Skipped when Node.js 20+ is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import unittest

import harness
from harness import Mesh, eventually

import iacp

PY_AGENT = "test:cross:python"
TS_AGENT = "test:cross:typescript"
TS_DIST = os.path.join(harness.REPO, "clients", "typescript", "dist", "index.js")

# The TypeScript agent: answers one handoff request, asks the Python agent once, prints the
# answer's payload as a JSON line, and exits.
TS_SCRIPT = """
import { Agent, Client } from %(dist)s;
const client = new Client({ dataDir: %(dir)s });
const agent = new Agent(client);
agent.on("handoff", async (msg) => ({ status: "accepted", by: "typescript", echo: msg.message.payload }));
const served = agent.run({ maxMessages: 1 });
const answer = await client.request({ to: %(peer)s, intent: "handoff", payload: { task: "from typescript" } }, { wait: 20000 });
await served;
console.log(JSON.stringify(answer.message.payload));
"""


def node_ok() -> bool:
    node = shutil.which("node")
    if node is None:
        return False
    out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
    try:
        return int(out.strip().lstrip("v").split(".")[0]) >= 20
    except ValueError:
        return False


@unittest.skipUnless(node_ok(), "Node.js 20+ is not installed: the TypeScript agent needs it")
class CrossLanguageTest(unittest.TestCase):
    def test_python_and_typescript_agents_hand_work_to_each_other(self) -> None:
        mesh = Mesh(PY_AGENT, TS_AGENT)
        self.addCleanup(mesh.close)
        node_py, node_ts = mesh.nodes
        py = iacp.Client(data_dir=node_py.dir, timeout=10)
        self.addCleanup(py.close)
        eventually(lambda: py.resolve(TS_AGENT), what="the Python agent's node resolves the TypeScript agent")

        agent = iacp.Agent(py, poll_wait=2)

        @agent.on("handoff")
        def handoff(msg: iacp.Message) -> dict:
            return {"status": "accepted", "by": "python", "echo": msg.payload}

        stop = threading.Event()
        loop = threading.Thread(target=agent.run, kwargs={"stop_event": stop, "max_messages": 1}, daemon=True)
        loop.start()
        self.addCleanup(lambda: (stop.set(), loop.join(10)))

        script = TS_SCRIPT % {"dist": json.dumps(TS_DIST), "dir": json.dumps(node_ts.dir), "peer": json.dumps(PY_AGENT)}
        ts = subprocess.Popen([shutil.which("node"), "--input-type=module", "-e", script],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(ts.kill)

        answer = py.request(TS_AGENT, "handoff", {"task": "from python"}, wait=20)
        self.assertEqual(answer.payload.get("by"), "typescript", answer.payload)
        self.assertEqual(answer.payload.get("echo"), {"task": "from python"})

        out, err = ts.communicate(timeout=30)
        self.assertEqual(ts.returncode, 0, "the TypeScript agent failed:\n%s\n%s" % (err, mesh.logs()))
        got = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(got.get("by"), "python", got)
        self.assertEqual(got.get("echo"), {"task": "from typescript"})
        loop.join(10)
        self.assertFalse(loop.is_alive(), "the Python agent loop did not stop after its one message")


if __name__ == "__main__":
    unittest.main()
