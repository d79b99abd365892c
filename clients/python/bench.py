#!/usr/bin/env python3
"""What a request through the library costs over raw HTTP, in the same run.

Two real nodes on loopback: alice's (A) and bob's (B). Bob's node hands each request to a
fixed responder, a small stdlib HTTP server in its own process behind B's webhook, which
answers every request at once with the same response; so every request is the same round
trip alice -> B -> responder -> B -> alice, whoever sends it. Alice sends N requests
(POST /.well-known/iacp/v1/message?wait=10s) each way, in interleaved rounds (the order of
the ways rotates every round, so drift on a shared machine falls on all of them alike):

- library:     iacp.Client.request (a kept-alive connection, the answer as an iacp.Message);
- urllib:      urllib.request.urlopen with the same JSON and headers, the answer json.loads'd
               (what examples/handoff_agent_http.py does: a new connection per call);
- http.client: one kept-alive http.client.HTTPConnection, the answer json.loads'd (the floor).

It prints each way's p50, p90 and mean (ms), the CPU time this process spent per request (a
figure that the machine's load disturbs less than the wall clock), and the library's p50
minus each raw way's; the goal is at most 1 ms over raw HTTP. --check exits 1 when the library's p50 is more
than 1 ms over urllib's.

    IACP_NODE_BINARY=../../bin/iacp-node python3 bench.py [-n 1000] [--round 20] [--check]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))

import iacp  # noqa: E402
from harness import Mesh, eventually, free_port  # noqa: E402

ALICE = "bench:py:alice"
BOB = "bench:py:bob"
REPLY = b'{"envelope":{},"message":{"type":"response","payload":{"status":"accepted","detail":"fixed"}}}'
PAYLOAD = {"task": "bench", "n": 1}


class Responder(http.server.BaseHTTPRequestHandler):
    """The fixed responder: every posted request is answered with REPLY."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

    def log_message(self, *a: object) -> None:
        pass

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)


def serve_responder(port: int) -> None:
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Responder).serve_forever()


def pct(xs: List[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=1000, help="requests each way (default 1000)")
    ap.add_argument("--round", type=int, default=20, help="requests each way per round (default 20)")
    ap.add_argument("--warmup", type=int, default=50, help="requests each way before measuring")
    ap.add_argument("--check", action="store_true", help="exit 1 when the library is more than 1 ms over urllib")
    ap.add_argument("--responder", type=int, help=argparse.SUPPRESS)  # internal: run the responder
    a = ap.parse_args()
    if a.responder:
        serve_responder(a.responder)
        return 0

    port = free_port()
    responder = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--responder", str(port)])
    mesh = None
    try:
        hook = "http://127.0.0.1:%d/.well-known/iacp/v1/message" % port
        mesh = Mesh(ALICE, BOB, run_args={BOB: ["--webhook", hook]})
        node_a = mesh.nodes[0]
        client = iacp.Client(data_dir=node_a.dir, timeout=15)
        eventually(lambda: client.request(BOB, "handoff", PAYLOAD, wait=5), timeout=30, what="bob's responder answers")

        url = "http://%s/.well-known/iacp/v1/message?wait=10000ms" % node_a.api
        body = json.dumps(iacp.Message.new(BOB, "handoff", PAYLOAD).to_dict()).encode()
        headers = {"Authorization": "Bearer " + node_a.token, "Content-Type": "application/json",
                   "Accept": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", node_a.api_port, timeout=15)

        def library() -> None:
            r = client.request(BOB, "handoff", PAYLOAD, wait=10)
            assert r.payload["status"] == "accepted"

        def raw_urllib() -> None:
            req = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(req, timeout=15) as resp:
                doc = json.loads(resp.read())
            assert doc["message"]["payload"]["status"] == "accepted"

        def raw_http_client() -> None:
            conn.request("POST", "/.well-known/iacp/v1/message?wait=10000ms", body=body, headers=headers)
            resp = conn.getresponse()
            doc = json.loads(resp.read())
            assert resp.status == 200 and doc["message"]["payload"]["status"] == "accepted"

        ways: Dict[str, Callable[[], None]] = {"library": library, "urllib": raw_urllib,
                                                "http.client": raw_http_client}
        for fn in ways.values():
            for _ in range(a.warmup):
                fn()
        times: Dict[str, List[float]] = {k: [] for k in ways}
        cpu: Dict[str, List[float]] = {k: [] for k in ways}
        order = list(ways)
        started = time.monotonic()
        rounds = 0
        while len(times["library"]) < a.n:
            k = min(a.round, a.n - len(times["library"]))
            for name in order:
                fn = ways[name]
                for _ in range(k):
                    c0 = time.process_time()
                    t0 = time.perf_counter()
                    fn()
                    times[name].append((time.perf_counter() - t0) * 1000)
                    cpu[name].append((time.process_time() - c0) * 1000)
            order = order[1:] + order[:1]
            rounds += 1
        elapsed = time.monotonic() - started
        conn.close()
        client.close()

        print("%d requests each way, %d interleaved rounds, %.1f s; request/response alice -> bob's fixed "
              "responder (webhook)" % (a.n, rounds, elapsed))
        print("%-12s %8s %8s %8s %14s" % ("way", "p50 ms", "p90 ms", "mean ms", "client CPU ms"))
        for name, xs in times.items():
            print("%-12s %8.3f %8.3f %8.3f %14.3f" % (name, pct(xs, 0.5), pct(xs, 0.9), statistics.fmean(xs),
                                                     statistics.fmean(cpu[name])))
        lib = pct(times["library"], 0.5)
        d_urllib = lib - pct(times["urllib"], 0.5)
        d_conn = lib - pct(times["http.client"], 0.5)
        print("library p50 - urllib p50      = %+.3f ms" % d_urllib)
        print("library p50 - http.client p50 = %+.3f ms" % d_conn)
        ok = d_urllib <= 1.0
        print("goal (at most 1 ms over raw HTTP): %s" % ("met" if ok else "NOT met"))
        return 0 if ok or not a.check else 1
    finally:
        if mesh is not None:
            mesh.close()
        responder.kill()
        responder.wait(10)


if __name__ == "__main__":
    sys.exit(main())
