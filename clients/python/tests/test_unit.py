"""The library without a node: models, errors, the agent's rules, and the transport against
a small stdlib HTTP server (kept-alive connections the server closes, SSE parsing)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import tempfile
import threading
import time
import unittest
from typing import Any, List

from harness import free_port  # harness also puts this tree's iacp on sys.path

import iacp
from iacp.agent import Agent
from iacp.client import format_wait

REQUEST = {
    "envelope": {
        "version": "1.0",
        "message_id": "0196f3a2-0000-7000-8000-000000000001",
        "correlation_id": "0196f3a2-0000-7000-8000-000000000001",
        "sender": {"agent_id": "acme:a:bot", "identity_sig": "c2ln", "peer_id": "12D3KooWA"},
        "recipient": {"agent_id": "acme:b:bot", "channel": "handoff"},
        "timestamp": "2026-05-01T10:00:00.123Z",
        "ttl_seconds": 3600,
        "x-trace": "t1",
    },
    "message": {"type": "request", "intent": "handoff", "payload": {"task": "review"}},
    "security": {"auth_token": "tok"},
}


class ModelTest(unittest.TestCase):
    def test_message_round_trip_keeps_unknown_members(self) -> None:
        m = iacp.Message.from_dict(REQUEST)
        self.assertEqual(m.to_dict(), REQUEST)
        self.assertEqual((m.sender_id, m.recipient_id, m.channel), ("acme:a:bot", "acme:b:bot", "handoff"))
        self.assertEqual((m.type, m.intent, m.payload), ("request", "handoff", {"task": "review"}))
        self.assertEqual(m.envelope.extra, {"x-trace": "t1"})
        self.assertEqual(m.extra, {"security": {"auth_token": "tok"}})
        self.assertIsNone(m.error)

    def test_new_leaves_out_what_the_node_fills(self) -> None:
        m = iacp.Message.new("acme:b:bot", "handoff", {"task": "x"})
        self.assertEqual(m.to_dict(), {"envelope": {"recipient": {"agent_id": "acme:b:bot"}},
                                       "message": {"type": "request", "intent": "handoff", "payload": {"task": "x"}}})

    def test_nested_models(self) -> None:
        page = iacp.InboxPage.from_dict({"messages": [{"seq": 4, "message_id": "m", "message": REQUEST}],
                                         "more": True, "next_after": 4})
        self.assertIsInstance(page.messages[0], iacp.InboxItem)
        self.assertEqual(page.messages[0].message.sender_id, "acme:a:bot")
        ev = iacp.Event.from_dict({"kind": "transition", "at": "2026-05-01T10:00:00Z", "agent_id": "acme:c:bot",
                                   "transition": {"from": "alive", "to": "suspect", "reason": "silent"}})
        self.assertEqual((ev.transition.from_, ev.transition.to), ("alive", "suspect"))
        self.assertEqual(ev.to_dict()["transition"], {"from": "alive", "to": "suspect", "reason": "silent"})
        m = iacp.Match.from_dict({"agent_id": "acme:b:bot", "manifest": {"agent_id": "acme:b:bot", "tools": ["t"],
                                  "rate_limit": {"requests_per_minute": 5}}, "preferred_matches": 2, "load": 0.5})
        self.assertEqual((m.manifest.tools, m.manifest.rate_limit.requests_per_minute, m.preferred_matches),
                         (["t"], 5, 2))
        err = iacp.Message.from_dict({"envelope": {}, "message": {"type": "error", "payload": {
            "code": "RATE_LIMITED", "message": "slow down", "retryable": True, "retry_after": 2}}}).error
        self.assertEqual((err.code, err.retry_after), ("RATE_LIMITED", 2))

    def test_parse_time(self) -> None:
        t = iacp.parse_time("2026-11-23T20:38:53.829307228Z")
        self.assertEqual((t.year, t.microsecond, t.utcoffset().total_seconds()), (2026, 829307, 0))
        self.assertEqual(iacp.parse_time("2026-11-23T20:38:53Z").second, 53)

    def test_format_wait(self) -> None:
        self.assertEqual(format_wait(10), "10000ms")
        self.assertEqual(format_wait(0.25), "250ms")
        with self.assertRaises(ValueError):
            format_wait(0)


class AgentRuleTest(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = Agent(iacp.Client("127.0.0.1:1"))
        self.req = iacp.Message.from_dict(REQUEST)

    def test_outcomes(self) -> None:
        o = self.agent._outcome
        self.assertEqual(o(self.req, {"detail": "ok"}), ("response", {"status": "accepted", "detail": "ok"}))
        self.assertEqual(o(self.req, {"status": "rejected"}), ("response", {"status": "rejected"}))
        self.assertIsNone(o(self.req, None))
        kind, p = o(self.req, exc=iacp.IACPError("RATE_LIMITED", "busy", retry_after=3))
        self.assertEqual((kind, p["code"], p["retryable"], p["retry_after"]), ("error", "RATE_LIMITED", True, 3))
        with self.assertLogs("iacp.agent", "ERROR") as logs:
            kind, p = o(self.req, "not a dict")
        self.assertIn("return the response payload", logs.output[0])
        self.assertEqual((kind, p["code"]), ("error", "INTERNAL_ERROR"))
        event = iacp.Message.new("acme:b:bot", "notify", {"event_type": "x"}, type="event")
        self.assertIsNone(o(event, {"status": "accepted"}))

    def test_handler_lookup(self) -> None:
        @self.agent.on("handoff")
        def h(msg: Any) -> dict:
            return {}

        @self.agent.on("*", type="event")
        def any_event(msg: Any) -> None:
            return None

        self.assertIs(self.agent.handler_for(self.req), h)
        self.assertIs(self.agent.handler_for(iacp.Message.new("x:y:z", "notify", type="event")), any_event)
        self.assertIsNone(self.agent.handler_for(iacp.Message.new("x:y:z", "query")))


class NoNodeTest(unittest.TestCase):
    def test_nothing_listens(self) -> None:
        port = free_port()
        with self.assertRaises(iacp.NodeUnreachable) as cm:
            iacp.Client("127.0.0.1:%d" % port, token="t", timeout=5).status()
        e = cm.exception
        self.assertIsInstance(e, iacp.IACPError)
        self.assertEqual((e.code, e.status, e.retryable), ("NODE_UNREACHABLE", 0, True))
        self.assertIn("no node answers at 127.0.0.1:%d" % port, str(e))
        self.assertIn("iacp-node run", str(e))

    def test_data_dir_without_a_node(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            c = iacp.Client(data_dir=d)
            with self.assertRaises(iacp.NodeUnreachable) as cm:
                c.send("acme:b:bot", "handoff", {})
            self.assertIn("no node is running with data dir %s" % d, str(cm.exception))
            self.assertIn("iacp-node run --data-dir %s" % d, str(cm.exception))
            with self.assertRaises(iacp.NodeUnreachable):
                c.events()

    def test_default_data_dir_from_the_environment(self) -> None:
        old = os.environ.get("IACP_DATA_DIR")
        os.environ["IACP_DATA_DIR"] = "/nonexistent/iacp"
        try:
            self.assertEqual(iacp.Client().data_dir, "/nonexistent/iacp")
        finally:
            if old is None:
                del os.environ["IACP_DATA_DIR"]
            else:
                os.environ["IACP_DATA_DIR"] = old

    def test_bad_address(self) -> None:
        with self.assertRaises(ValueError):
            iacp.Client("ftp://127.0.0.1:9700").status()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: List[Any] = []

    def log_message(self, *a: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.connection not in self.connections:
            self.connections.append(self.connection)
        if self.path.startswith("/v1/events"):
            body = (b": iacp-node event stream\n\nid: 1\nevent: event\ndata: {\"kind\":\"event\",\"agent_id\":\"a:b:c\","
                    b"\"event\":{\"event_type\":\"x\"}}\n\n: keep-alive\n\nid: 2\nevent: transition\n"
                    b"data: {\"kind\":\"transition\",\n"
                    b"data: \"transition\":{\"from\":\"alive\",\"to\":\"dead\"}}\n\n")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (body[:40], body[40:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/v1/status":
            if self.headers.get("Authorization") != "Bearer good":
                return self._json(401, {"error": {"code": "IDENTITY_INVALID", "message": "wrong token",
                                                  "retryable": False}})
            return self._json(200, {"agent_id": "a:b:c"})
        if self.path == "/v1/agents":
            return self._json(429, {"error": {"code": "RATE_LIMITED", "message": "slow down", "retryable": True}},
                              {"Retry-After": "3"})
        if self.path == "/v1/peers":
            return self._raw(502, b"bad gateway", "text/plain")
        self._json(404, {"error": {"code": "PAYLOAD_INVALID", "message": "no route"}})

    def _json(self, status: int, doc: Any, headers: Any = None) -> None:
        self._raw(status, json.dumps(doc).encode(), "application/json", headers)

    def _raw(self, status: int, body: bytes, ctype: str, headers: Any = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


class TransportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.server.daemon_threads = True
        cls.thread = threading.Thread(target=cls.server.serve_forever, daemon=True)
        cls.thread.start()
        cls.addr = "127.0.0.1:%d" % cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.shutdown()
        cls.server.server_close()
        cls.thread.join(5)

    def test_keeps_the_connection_and_replaces_one_the_server_closed(self) -> None:
        _Handler.connections.clear()
        c = iacp.Client(self.addr, token="good", timeout=5)
        self.assertEqual(c.status().agent_id, "a:b:c")
        self.assertEqual(c.status().agent_id, "a:b:c")
        self.assertEqual(len(_Handler.connections), 1, "the connection was not kept alive")
        _Handler.connections[0].shutdown(socket.SHUT_RDWR)  # the server drops the idle connection
        time.sleep(0.1)
        self.assertEqual(c.status().agent_id, "a:b:c")
        self.assertEqual(len(_Handler.connections), 2)
        c.close()

    def test_error_documents(self) -> None:
        c = iacp.Client(self.addr, token="bad", timeout=5)
        with self.assertRaises(iacp.Unauthorized) as cm:
            c.status()
        self.assertEqual((cm.exception.code, cm.exception.status), ("IDENTITY_INVALID", 401))
        with self.assertRaises(iacp.IACPError) as cm:
            c.agents()
        self.assertEqual((cm.exception.code, cm.exception.retry_after, cm.exception.retryable), ("RATE_LIMITED", 3, True))
        with self.assertRaises(iacp.IACPError) as cm:
            c.peers()
        self.assertEqual((cm.exception.code, cm.exception.status), ("INTERNAL_ERROR", 502))
        self.assertIn("bad gateway", cm.exception.message)

    def test_answer_limit(self) -> None:
        c = iacp.Client(self.addr, token="good", timeout=5, answer_limit=1)
        c.answer_limit = 4  # below the 1 MiB floor, to test the check
        c._transport = None
        with self.assertRaises(iacp.AnswerTooLarge) as cm:
            c.status()
        self.assertEqual(cm.exception.code, "ANSWER_TOO_LARGE")

    def test_event_stream_parsing(self) -> None:
        c = iacp.Client(self.addr, token="good", timeout=5)
        with c.events(kinds=["event", "transition"], idle_timeout=5) as s:
            evs = [next(s), next(s)]
        self.assertEqual((evs[0].kind, evs[0].id, evs[0].event.event_type), ("event", "1", "x"))
        self.assertEqual((evs[1].kind, evs[1].id, evs[1].transition.to), ("transition", "2", "dead"))
        with c.events() as s:
            next(s)
            next(s)
            with self.assertRaises(iacp.NodeUnreachable):
                next(s)  # the server ended the stream


if __name__ == "__main__":
    unittest.main()
