"""Real iacp-node processes for the tests and the benchmark, as e2e/harness_test.go runs them.

The binary is $IACP_NODE_BINARY, else one built once with `go build` from the repository
(skipped, with a message, when neither works). Each node has its own data directory in a
temporary directory, loopback ports, 1 s heartbeats and no mDNS; ``Mesh.close`` kills them.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))

if PACKAGE_DIR not in sys.path:  # test this tree's iacp, installed or not
    sys.path.insert(0, PACKAGE_DIR)

_built: Optional[str] = None
_build_dir: Optional[str] = None


def binary() -> str:
    """The iacp-node binary: $IACP_NODE_BINARY, or one built once from the repository."""
    global _built, _build_dir
    env = os.environ.get("IACP_NODE_BINARY")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError("IACP_NODE_BINARY=%s is not an executable file: run `make build`" % env)
        return env
    if _built:
        return _built
    go = shutil.which("go")
    if go is None or not os.path.exists(os.path.join(REPO, "go.mod")):
        raise unittest.SkipTest("no iacp-node binary: set IACP_NODE_BINARY, or run from the repository with Go")
    _build_dir = tempfile.mkdtemp(prefix="iacp-py-bin-")
    atexit.register(shutil.rmtree, _build_dir, True)
    out = os.path.join(_build_dir, "iacp-node")
    sys.stderr.write("building iacp-node (set IACP_NODE_BINARY to skip this)...\n")
    subprocess.run([go, "build", "-o", out, "./cmd/iacp-node"], cwd=REPO, check=True, timeout=600)
    _built = out
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One iacp-node process with its data directory and ports."""

    def __init__(self, root: str, name: str) -> None:
        self.name = name
        self.dir = os.path.join(root, name)
        self.p2p_port = free_port()
        self.api_port = free_port()
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(root, name + ".log")
        self.agent_id = ""

    @property
    def api(self) -> str:
        return "127.0.0.1:%d" % self.api_port

    @property
    def token(self) -> str:
        with open(os.path.join(self.dir, "api.token")) as f:
            return f.read().strip()

    def cli(self, *args: str, timeout: float = 30) -> str:
        p = subprocess.run([binary(), *args], capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError("iacp-node %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p.stdout

    def init(self, *args: str) -> None:
        self.cli("init", "--data-dir", self.dir, *args)

    def start(self, *args: str, bootstrap: Optional[str] = None) -> None:
        """Runs the node and waits (at most 20 s) until its API answers."""
        cmd = [binary(), "run", "--data-dir", self.dir, "--listen", "/ip4/127.0.0.1/tcp/%d" % self.p2p_port,
               "--api", self.api, "--nat=false", "--mdns=false", "--heartbeat-interval", "1s",
               "--log-level", "warn", *args]
        if bootstrap:
            cmd += ["--bootstrap", bootstrap]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s:\n%s" % (self.name, self.proc.returncode, self.log()))
            try:
                with urllib.request.urlopen("http://%s/healthz" % self.api, timeout=2) as r:
                    doc = json.loads(r.read())
                    self.agent_id = doc.get("agent_id", "")
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("%s did not start within 20 s:\n%s" % (self.name, self.log()))
            time.sleep(0.05)

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def peer_addr(self) -> str:
        """The node's full multiaddr, from its printed 'listen' line."""
        for line in self.log().splitlines():
            f = line.split()
            if len(f) == 2 and f[0] == "listen":
                return f[1]
        raise RuntimeError("%s printed no listen address:\n%s" % (self.name, self.log()))

    def invite(self, agent_id: str) -> str:
        out = self.cli("invite", "--data-dir", self.dir, "--api", self.api, "--agent", agent_id, "-o", "json")
        return json.loads(out)["token"]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None


class Mesh:
    """A founder node A and nodes that joined it with its invitations."""

    def __init__(self, founder_id: str, *others: str, run_args: Optional[dict] = None) -> None:
        self.root = tempfile.mkdtemp(prefix="iacp-py-")
        self.nodes: List[Node] = []
        run_args = run_args or {}
        try:
            a = Node(self.root, "a")
            self.nodes.append(a)
            a.init("--agent-id", founder_id)
            a.start(*run_args.get(founder_id, ()))
            boot = a.peer_addr()
            for i, agent_id in enumerate(others):
                n = Node(self.root, chr(ord("b") + i))
                self.nodes.append(n)
                n.init("--join", a.invite(agent_id))
                n.start(*run_args.get(agent_id, ()), bootstrap=boot)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Kills every node and removes the data directories."""
        for n in self.nodes:
            n.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join("--- log of %s:\n%s" % (n.name, n.log()) for n in self.nodes)


def eventually(fn, timeout: float = 15.0, interval: float = 0.2, what: str = "condition"):
    """Calls fn until it returns a true value (returned) or timeout seconds passed (fails
    with the last exception, if any)."""
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(interval)
    raise AssertionError("%s not met within %gs (last error: %r)" % (what, timeout, last))
