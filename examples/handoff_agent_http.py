#!/usr/bin/env python3
"""A handoff agent that uses only HTTP and the Python standard library.

It long-polls its node's inbox (GET /v1/inbox?wait=30s), answers every handoff request with a
response correlated to it (POST /.well-known/iacp/v1/message), and acknowledges each message
it took (POST /v1/inbox/{id}/ack). This is the HTTP binding by hand, for an agent that wants
nothing but the standard library; examples/handoff_agent.py does the same with the iacp
library (clients/python).

    python3 handoff_agent_http.py --data-dir .data/b            # address and token from the data dir
    python3 handoff_agent_http.py --api 127.0.0.1:9701 --token T [--once]
"""
import argparse
import json
import os
import sys
import urllib.request


def read(path):
    with open(path) as f:
        return f.read().strip()


class Node:
    def __init__(self, addr, token):
        self.base = addr if addr.startswith("http") else "http://" + addr
        self.token = token

    def call(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + self.token)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")


def answer(req):
    """The agent's work: accept the handoff and say what was done."""
    payload = req["message"].get("payload", {})
    return {"status": "accepted", "detail": "done by the python agent", "echo": payload}


def serve(node, once):
    while True:
        inbox = node.call("GET", "/v1/inbox?wait=30s")
        for item in inbox["messages"]:
            msg = item["message"]
            env, body = msg["envelope"], msg["message"]
            if body.get("type") == "request" and body.get("intent") == "handoff":
                node.call("POST", "/.well-known/iacp/v1/message", {
                    "envelope": {
                        "correlation_id": env["message_id"],
                        "recipient": {"agent_id": env["sender"]["agent_id"], "channel": env["recipient"]["channel"]},
                    },
                    "message": {"type": "response", "intent": "handoff", "payload": answer(msg)},
                })
                print("answered", env["message_id"], "from", env["sender"]["agent_id"], flush=True)
            node.call("POST", "/v1/inbox/%s/ack" % env["message_id"])
            if once:
                return


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("IACP_DATA_DIR", ".data/node"))
    p.add_argument("--api", help="host:port of the node's API (default: <data-dir>/api.addr)")
    p.add_argument("--token", help="API token (default: <data-dir>/api.token)")
    p.add_argument("--once", action="store_true", help="exit after the first message")
    a = p.parse_args()
    try:
        addr = a.api or read(os.path.join(a.data_dir, "api.addr"))
        token = a.token or read(os.path.join(a.data_dir, "api.token"))
    except FileNotFoundError:
        sys.exit("no node is running with data dir %s: start one with `iacp-node run`" % a.data_dir)
    try:
        serve(Node(addr, token), a.once)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
