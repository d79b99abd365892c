"""The library against two real nodes: every call of the surface once, the agent loop, and
the errors a node answers.

Node A (alice) founds the mesh; node B (bob) joins it. A Python agent on B answers handoff
requests with the decorator loop while the tests, as alice, call the API.
"""

from __future__ import annotations

import asyncio
import threading
import time
import unittest
from typing import List

import harness  # noqa: F401 - puts this tree's iacp on sys.path
from harness import Mesh, eventually

import iacp

ALICE = "test:py:alice"
BOB = "test:py:bob"


class MeshTest(unittest.TestCase):
    mesh: Mesh
    a: iacp.Client
    b: iacp.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.mesh = Mesh(ALICE, BOB, run_args={BOB: ["--capabilities", "tool:python,domain:review"]})
        cls.addClassCleanup(cls.mesh.close)
        node_a, node_b = cls.mesh.nodes
        cls.a = iacp.Client(data_dir=node_a.dir, timeout=10)
        cls.b = iacp.Client(data_dir=node_b.dir, timeout=10)
        cls.addClassCleanup(cls.a.close)
        cls.addClassCleanup(cls.b.close)
        eventually(lambda: cls.a.resolve(BOB), what="alice's node resolves bob")

        # Bob's agent: the decorator loop on node B, in a thread until tearDownClass.
        cls.seen: List[iacp.Message] = []
        cls.holding = threading.Event()
        cls.release = threading.Event()
        agent = iacp.Agent(cls.b, poll_wait=5)

        @agent.on("handoff")
        def handoff(msg: iacp.Message) -> dict:
            cls.seen.append(msg)
            p = msg.payload
            if p.get("deny"):
                raise iacp.IACPError("PERMISSION_DENIED", "bob does not take %s" % p.get("task"))
            if p.get("crash"):
                raise RuntimeError("the handler broke")
            if p.get("hold"):
                cls.holding.set()
                cls.release.wait(15)
            return {"status": "accepted", "detail": "done by bob", "echo": p}

        cls.stop = threading.Event()
        cls.agent_thread = threading.Thread(target=agent.run, kwargs={"stop_event": cls.stop}, daemon=True)
        cls.agent_thread.start()
        cls.addClassCleanup(cls._stop_agent)

    @classmethod
    def _stop_agent(cls) -> None:
        cls.stop.set()
        cls.release.set()
        cls.agent_thread.join(5)
        assert not cls.agent_thread.is_alive(), "the agent loop did not stop within 5 s"

    def fail_with_logs(self, msg: str) -> None:
        self.fail(msg + "\n" + self.mesh.logs())

    # --- the node and the mesh ---

    def test_status_health_peers(self) -> None:
        st = self.a.status()
        self.assertEqual(st.agent_id, ALICE)
        self.assertTrue(st.peer_id.startswith("12D3KooW"), st.peer_id)
        self.assertTrue(st.inbox)
        self.assertGreater(st.max_message_bytes, 0)
        self.assertIn("queue_bytes", st.safety)
        self.assertEqual(self.a.health().agent_id, ALICE)
        self.assertEqual(self.b.status().manifest.tools, ["python"])
        peers = eventually(self.a.peers, what="alice's node has a peer")
        self.assertIn(self.b.status().peer_id, [p.peer_id for p in peers])

    def test_agents(self) -> None:
        def bob_alive():
            return [x for x in self.a.agents() if x.agent_id == BOB and x.state == "alive"]

        (bob,) = eventually(bob_alive, what="alice hears bob's heartbeats")
        self.assertEqual(bob.peer_id, self.b.status().peer_id)

    def test_resolve_and_discover(self) -> None:
        rec = self.a.resolve(BOB)
        self.assertEqual(rec.agent_id, BOB)
        self.assertEqual(rec.peer_id, self.b.status().peer_id)
        self.assertIn("python", rec.manifest.tools)
        self.assertIn("review", rec.manifest.domains)

        def found():
            return [m for m in self.a.discover(tools="python", prefer_domains=["review"]).matches if m.agent_id == BOB]

        (m,) = eventually(found, what="discover finds bob by tool:python")
        self.assertEqual(m.preferred_matches, 1)
        with self.assertRaises(iacp.IACPError) as cm:
            self.a.resolve("test:py:nobody")
        self.assertEqual((cm.exception.code, cm.exception.status), ("AGENT_NOT_FOUND", 404))

    # --- requests answered by bob's agent loop ---

    def test_request_answered_by_agent_loop(self) -> None:
        r = self.a.request(BOB, "handoff", {"task": "review PR 12"}, wait=10)
        self.assertEqual(r.type, "response")
        self.assertEqual(r.intent, "handoff")
        self.assertEqual(r.sender_id, BOB)
        self.assertEqual(r.recipient_id, ALICE)
        self.assertEqual(r.payload["status"], "accepted")
        self.assertEqual(r.payload["echo"], {"task": "review PR 12"})
        req = [m for m in self.seen if m.message_id == r.correlation_id]
        self.assertEqual(len(req), 1, "the response is not correlated to the request the handler saw")
        self.assertEqual(req[0].sender_id, ALICE)

        # The conversation, as both nodes' audit logs recorded it.
        conv = eventually(lambda: self.a.conversation(r.correlation_id), what="alice's conversation")
        kinds = [(e.event, e.type) for e in conv.messages]
        self.assertIn(("sent", "request"), kinds)
        self.assertIn(("received", "response"), kinds)
        self.assertTrue(all(e.correlation_id == r.correlation_id for e in conv.messages))
        first = self.a.conversation(r.correlation_id, limit=1)
        self.assertEqual(len(first.messages), 1)
        self.assertTrue(first.more)
        rest = self.a.conversation(r.correlation_id, after=first.next_after)
        seqs = [e.seq for e in first.messages + rest.messages]  # more may have come meanwhile (delivered)
        self.assertEqual(seqs[:len(conv.messages)], [e.seq for e in conv.messages])
        self.assertEqual(seqs, sorted(set(seqs)))
        bob_side = eventually(lambda: [e for e in self.b.conversation(r.correlation_id).messages
                                       if e.event == "sent" and e.type == "response"], what="bob's conversation")
        self.assertEqual(bob_side[0].from_, BOB)

    def test_handler_errors_come_back_with_their_code(self) -> None:
        with self.assertRaises(iacp.IACPError) as cm:
            self.a.request(BOB, "handoff", {"task": "deploy", "deny": True}, wait=10)
        e = cm.exception
        self.assertEqual((e.code, e.status), ("PERMISSION_DENIED", 403))
        self.assertIn("bob does not take deploy", e.message)
        self.assertTrue(e.message_id)

        with self.assertRaises(iacp.IACPError) as cm:
            self.a.request(BOB, "handoff", {"crash": True}, wait=10)
        self.assertEqual(cm.exception.code, "INTERNAL_ERROR")
        self.assertIn("RuntimeError: the handler broke", cm.exception.message)

        with self.assertRaises(iacp.IACPError) as cm:
            self.a.request(BOB, "x-translate", {"text": "hallo"}, wait=10)
        self.assertEqual((cm.exception.code, cm.exception.status), ("CAPABILITY_MISMATCH", 422))

    def test_agent_acks_only_after_the_handler_returned(self) -> None:
        self.holding.clear()
        self.release.clear()
        result: list = []
        t = threading.Thread(target=lambda: result.append(
            self.a.request(BOB, "handoff", {"task": "slow", "hold": True}, wait=20)), daemon=True)
        t.start()
        try:
            self.assertTrue(self.holding.wait(10), "the handler was not called")
            held = [m for m in self.seen if m.payload.get("hold")][-1]
            waiting = [i.message_id for i in self.b.inbox().messages]
            self.assertIn(held.message_id, waiting, "the message was acknowledged before its handler returned")
        finally:
            self.release.set()
        t.join(20)
        self.assertEqual(result[0].payload["echo"]["task"], "slow")
        eventually(lambda: held.message_id not in [i.message_id for i in self.b.inbox().messages],
                   what="bob's agent acknowledges the message after answering")

    # --- send, the inbox, acks, the event stream ---

    def test_send_inbox_ack_and_message_events(self) -> None:
        stream = self.a.events(kinds=["message"], idle_timeout=20)
        notices: List[iacp.Event] = []

        def follow() -> None:
            for ev in stream:
                notices.append(ev)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        try:
            sent = [self.b.send(ALICE, "notify", {"event_type": "work", "n": i}, type="event").message_id
                    for i in range(3)]
            for mid in sent:
                self.assertTrue(mid)

            def all_arrived():
                ids = [i.message_id for i in self.a.iter_inbox(follow=False, limit=2)]
                return all(m in ids for m in sent)

            eventually(all_arrived, what="the three messages reach alice's inbox")
            page = self.a.inbox(limit=2)
            self.assertEqual(len(page.messages), 2)
            self.assertTrue(page.more)
            items = [i for i in self.a.iter_inbox(follow=False) if i.message_id in sent]
            self.assertEqual([i.message.payload["n"] for i in items], [0, 1, 2])
            self.assertEqual({i.message.sender_id for i in items}, {BOB})
            for item in items:
                self.assertEqual(self.a.ack(item), item.message_id)
            with self.assertRaises(iacp.IACPError) as cm:
                self.a.ack(items[0].message_id)
            self.assertEqual((cm.exception.code, cm.exception.status), ("PAYLOAD_INVALID", 404))
            left = [i.message_id for i in self.a.iter_inbox(follow=False)]
            self.assertFalse(set(sent) & set(left))

            eventually(lambda: set(sent) <= {n.inbound.message_id for n in notices if n.inbound},
                       what="the event stream tells of the three messages")
            self.assertTrue(all(n.kind == "message" and n.id for n in notices))
        finally:
            stream.close()
            reader.join(5)
        self.assertFalse(reader.is_alive(), "close() did not end the event stream's iteration")

    def test_inbox_long_poll_follows_and_cancels(self) -> None:
        cancel = threading.Event()
        got: List[iacp.InboxItem] = []
        first = self.a.inbox().next_after

        def follow() -> None:
            for item in self.a.iter_inbox(after=first, wait=30, cancel=cancel):
                got.append(item)

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        mid = self.b.send(ALICE, "notify", {"event_type": "poke"}, type="event").message_id
        eventually(lambda: any(i.message_id == mid for i in got), what="the long poll returns the new message")
        started = time.monotonic()
        cancel.set()
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertLess(time.monotonic() - started, 2, "cancel did not end the long poll promptly")
        self.a.ack(mid)

    def test_broadcast_reaches_the_other_nodes_event_stream(self) -> None:
        got: List[iacp.Event] = []
        with self.b.events(kinds="event", agent=ALICE, idle_timeout=20) as stream:
            reader = threading.Thread(target=lambda: got.extend(ev for ev in stream), daemon=True)
            reader.start()

            def broadcast_seen():
                r = self.a.broadcast("deploy.done", "v1.2", severity="info", data={"build": 7})
                self.assertEqual(r.status, "accepted")
                time.sleep(0.5)
                return [e for e in got if e.event and e.event.event_type == "deploy.done"]

            (ev, *_) = eventually(broadcast_seen, interval=0.1, what="bob's node sees alice's broadcast")
        reader.join(5)
        self.assertEqual(ev.agent_id, ALICE)
        self.assertEqual((ev.event.detail, ev.event.severity, ev.event.data), ("v1.2", "info", {"build": 7}))
        self.assertEqual(ev.message.type, "event")

    def test_ask_collects_the_groups_answer(self) -> None:
        # Bob (capability tool:python) is an inbox agent: the query reaches its handler like
        # any request, and its answer comes back directly to alice's query.
        def answered():
            r = self.a.ask("python", "handoff", {"task": "review"}, deadline=3, count=1)
            return r if r.answers else None

        r = eventually(answered, timeout=30, what="bob answering alice's query to the group python")
        (ans,) = r.answers
        self.assertEqual((ans.agent_id, ans.status, ans.payload.get("detail")), (BOB, "accepted", "done by bob"))
        self.assertEqual((r.ended, r.group, r.missing), ("count", "python", []))
        with self.assertRaises(iacp.IACPError) as ctx:
            self.a.ask("no spaces")
        self.assertEqual(ctx.exception.code, "PAYLOAD_INVALID")

    # --- what the node refuses ---

    def test_refused_messages_raise_the_nodes_code(self) -> None:
        bad = {"envelope": {"recipient": {"agent_id": BOB}},
               "message": {"type": "request", "intent": "handoff", "payload": [1, 2]}}
        with self.assertRaises(iacp.IACPError) as cm:
            self.a.send_message(bad)
        e = cm.exception
        self.assertEqual((e.code, e.status, e.retryable), ("PAYLOAD_INVALID", 400, False))
        self.assertIn("payload must be a JSON object", e.message)
        self.assertTrue(e.message_id)

        with self.assertRaises(iacp.IACPError) as cm:
            self.a.send(BOB, "handoff", {"task": "x"}, channel="nonsense")
        self.assertEqual(cm.exception.code, "CHANNEL_UNKNOWN")

        with self.assertRaises(iacp.IACPError) as cm:
            self.a.resolve("not-an-agent-id")
        self.assertEqual((cm.exception.code, cm.exception.status), ("PAYLOAD_INVALID", 400))

        # A mistyped agent id fails at once, not queued (once alice's node settled in the
        # mesh: a message sent before is queued, and cancelled here).
        def refused():
            try:
                self.a.cancel(self.a.send("test:py:nobody", "handoff", {"task": "x"}))
            except iacp.IACPError as e:
                return e
            return None

        e = eventually(refused, what="a send to an agent nobody knows refused")
        self.assertEqual((e.code, e.status), ("AGENT_NOT_FOUND", 404))
        with self.assertRaises(iacp.IACPError) as cm:
            self.a.request("test:py:nobody", "handoff", {"task": "x"}, wait=10)
        self.assertEqual((cm.exception.code, cm.exception.status), ("AGENT_NOT_FOUND", 404))

    def test_queued_message_is_listed_and_cancelled(self) -> None:
        r = self.a.send("test:py:later", "handoff", {"task": "x"}, queue_unknown=True)
        self.assertEqual(r.status, "queued")
        self.assertIn(r.message_id, [e.message_id for e in self.a.outbox().entries])
        self.assertEqual(self.a.cancel(r).cancelled, r.message_id)
        self.assertNotIn(r.message_id, [e.message_id for e in self.a.outbox().entries])
        with self.assertRaises(iacp.IACPError) as cm:
            self.a.cancel(r.message_id)
        self.assertEqual(cm.exception.status, 404)

    def test_wrong_token_is_unauthorized(self) -> None:
        node_a = self.mesh.nodes[0]
        c = iacp.Client(node_a.api, token="not-the-token", timeout=5)
        with self.assertRaises(iacp.Unauthorized) as cm:
            c.status()
        e = cm.exception
        self.assertEqual((e.code, e.status), ("IDENTITY_INVALID", 401))
        self.assertIn("does not match", str(e))
        with self.assertRaises(iacp.Unauthorized):
            c.events()
        self.assertEqual(iacp.Client(node_a.api, token=node_a.token).status().agent_id, ALICE)

    def test_killed_node_is_unreachable(self) -> None:
        # A third node, killed: its api.addr stays behind, naming a port nobody listens on.
        root = self.mesh.root
        n = harness.Node(root, "gone")
        n.init("--agent-id", "test:py:gone", "--open")
        n.start()
        c = iacp.Client(data_dir=n.dir, timeout=5)
        self.assertEqual(c.status().agent_id, "test:py:gone")
        n.kill()
        with self.assertRaises(iacp.NodeUnreachable) as cm:
            c.status()
        self.assertEqual(cm.exception.code, "NODE_UNREACHABLE")
        self.assertIn("iacp-node run --data-dir %s" % n.dir, str(cm.exception))

    # --- asyncio ---

    def test_async_client(self) -> None:
        async def main() -> None:
            async with iacp.AsyncClient(data_dir=self.mesh.nodes[0].dir, timeout=10) as a:
                self.assertEqual((await a.status()).agent_id, ALICE)
                self.assertTrue(await a.agents())
                self.assertEqual((await a.resolve(BOB)).agent_id, BOB)
                r = await a.request(BOB, "handoff", {"task": "async"}, wait=10)
                self.assertEqual(r.payload["echo"], {"task": "async"})
                with self.assertRaises(iacp.IACPError) as cm:
                    await a.request(BOB, "handoff", {"deny": True}, wait=10)
                self.assertEqual(cm.exception.code, "PERMISSION_DENIED")
                self.assertEqual((await a.broadcast("async.done")).status, "accepted")
                self.assertIsInstance(await a.inbox(), iacp.InboxPage)

                async def first_heartbeat() -> iacp.Event:
                    async with a.events(kinds=["heartbeat"], agent=BOB) as stream:
                        async for ev in stream:
                            return ev
                    raise AssertionError("the stream ended")

                ev = await asyncio.wait_for(first_heartbeat(), 15)
                self.assertEqual((ev.kind, ev.agent_id), ("heartbeat", BOB))
                self.assertEqual(ev.heartbeat.status, "alive")

                # A cancelled long poll lets go at once.
                poll = asyncio.ensure_future(a.inbox(a.sync.inbox().next_after, wait=30))
                await asyncio.sleep(0.3)
                started = time.monotonic()
                poll.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await poll
                self.assertLess(time.monotonic() - started, 1)

        asyncio.run(asyncio.wait_for(main(), 45))

    def test_async_agent_answers_on_alice(self) -> None:
        async def main() -> iacp.Message:
            a = iacp.AsyncClient(data_dir=self.mesh.nodes[0].dir, timeout=10)
            agent = iacp.AsyncAgent(a, poll_wait=5, ack_unhandled=False)

            @agent.on("handoff")
            async def handoff(msg: iacp.Message) -> dict:
                await asyncio.sleep(0)
                return {"detail": "done by alice's async agent", "task": msg.payload.get("task")}

            ask = asyncio.ensure_future(asyncio.to_thread(self.b.request, ALICE, "handoff", {"task": "t1"}, wait=15))
            taken = await agent.run(max_messages=1)
            self.assertEqual(taken, 1)
            return await ask

        r = asyncio.run(asyncio.wait_for(main(), 30))
        self.assertEqual(r.sender_id, ALICE)
        self.assertEqual(r.payload, {"status": "accepted", "detail": "done by alice's async agent", "task": "t1"})


if __name__ == "__main__":
    unittest.main()
