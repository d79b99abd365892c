"""The synchronous client of a node's local API (docs/api.md)."""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from . import __version__
from ._http import Answer, Transport, _Refused, decode_error
from .errors import Cancelled, IACPError, NodeUnreachable, Timeout, Unauthorized
from .models import (
    AgentInfo,
    AskResult,
    AgentRecord,
    CancelResult,
    Conversation,
    DiscoverResult,
    Event,
    Health,
    InboxItem,
    InboxPage,
    Message,
    NodeStatus,
    Outbox,
    Peer,
    SendResult,
)

__all__ = ["Client", "EventStream", "DEFAULT_ANSWER_LIMIT", "DEFAULT_DATA_DIR", "format_wait"]

#: The data directory the CLI uses when none is given (and $IACP_DATA_DIR is not set).
DEFAULT_DATA_DIR = ".data/node"
#: The largest answer a client reads: one message of the default max_message_bytes (16 MiB)
#: and 1 MiB of JSON around it (the Go client's api.DefaultAnswerLimit).
DEFAULT_ANSWER_LIMIT = 17 << 20
#: The byte budget of an inbox page the client asks for (the node's default, 8 MiB).
INBOX_PAGE_BYTES = 8 << 20
_INBOX_PAGE_SLACK = 64 << 10

MESSAGE_PATH = "/.well-known/iacp/v1/message"
_JSON = "application/json"

#: The endpoints of docs/openapi.yaml this client calls, as (method, path): a test holds them
#: to the spec, so that the client cannot drift from it.
ENDPOINTS = frozenset({
    ("POST", MESSAGE_PATH),
    ("POST", "/v1/broadcast"),
    ("POST", "/v1/ask"),
    ("GET", "/v1/inbox"),
    ("POST", "/v1/inbox/{message_id}/ack"),
    ("GET", "/v1/outbox"),
    ("DELETE", "/v1/outbox/{message_id}"),
    ("GET", "/v1/discover"),
    ("GET", "/v1/resolve/{agent_id}"),
    ("GET", "/v1/agents"),
    ("GET", "/v1/peers"),
    ("GET", "/v1/status"),
    ("GET", "/healthz"),
    ("GET", "/v1/conversations/{id}"),
    ("GET", "/v1/events"),
})

Seconds = Union[float, int, datetime.timedelta]


def _seconds(v: Seconds) -> float:
    return v.total_seconds() if isinstance(v, datetime.timedelta) else float(v)


def format_wait(wait: Seconds) -> str:
    """A wait in seconds (or a timedelta) as the API's ``?wait=`` takes it: ``1500ms``."""
    ms = int(round(_seconds(wait) * 1000))
    if ms <= 0:
        raise ValueError("wait must be positive, not %r" % (wait,))
    return "%dms" % ms


def _dumps(obj: Any) -> bytes:
    if hasattr(obj, "to_dict"):
        obj = obj.to_dict()
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError as e:  # NaN or infinity: not JSON
        raise IACPError("PAYLOAD_INVALID", "the document is not JSON: %s" % e) from e


def _list(xs: Union[None, str, Iterable[str]]) -> List[str]:
    if xs is None:
        return []
    if isinstance(xs, str):
        return [xs]
    return list(xs)


class Client:
    """A client of one node's local API. Safe for use by several threads at once.

    Give the node's data directory (the client reads ``<data_dir>/api.addr``, which the
    running node writes, and ``<data_dir>/api.token``), or the address and token::

        client = iacp.Client(data_dir=".data/b")
        client = iacp.Client("127.0.0.1:9701", token="...")
        client = iacp.Client()  # $IACP_DATA_DIR, else .data/node, as the CLI does

    Nothing is read or connected until the first call, so a client can be made before its
    node starts; a call raises :class:`iacp.NodeUnreachable` while none runs. With a data
    directory the client reads ``api.addr`` again when the node does not answer (it may have
    restarted on another port), and ``api.token`` again when the node refuses the token.

    Every call has a timeout: ``timeout`` seconds (30 by default) for the node to answer,
    plus the ``wait`` of a long poll. Connections are kept alive between calls; ``close()``
    (or ``with``) closes them.

    Every error answer raises :class:`iacp.IACPError` (or its subclasses
    :class:`iacp.Unauthorized` and :class:`iacp.Timeout`) with the node's IACP code.
    """

    def __init__(
        self,
        addr: Optional[str] = None,
        token: Optional[str] = None,
        data_dir: Optional[str] = None,
        *,
        timeout: float = 30.0,
        answer_limit: int = DEFAULT_ANSWER_LIMIT,
    ) -> None:
        if addr is None and data_dir is None:
            data_dir = os.environ.get("IACP_DATA_DIR") or DEFAULT_DATA_DIR
        self.data_dir: Optional[str] = data_dir
        self.timeout = float(timeout)
        self.answer_limit = max(int(answer_limit), 1 << 20)
        self._addr = addr
        self._token = token
        self._token_from_file = token is None and data_dir is not None
        self._transport: Optional[Transport] = None
        self._lock = threading.Lock()

    # --- plumbing ---

    @property
    def addr(self) -> Optional[str]:
        """The API address in use (None until known: read from api.addr at the first call)."""
        t = self._transport
        return t.addr if t else self._addr

    def close(self) -> None:
        """Closes the kept-alive connections (the client can still be used afterwards)."""
        t = self._transport
        if t is not None:
            t.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, anything may be gone
            pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self._addr or "data_dir=%s" % self.data_dir
        return "iacp.Client(%s)" % where

    def _addr_file(self) -> str:
        return os.path.join(self.data_dir or "", "api.addr")

    def _token_file(self) -> str:
        return os.path.join(self.data_dir or "", "api.token")

    def _read_addr(self) -> str:
        try:
            with open(self._addr_file(), encoding="utf-8") as f:
                addr = f.read().strip()
        except FileNotFoundError:
            raise NodeUnreachable(
                "no node is running with data dir %s (no %s, which a running node writes): start one with "
                "`iacp-node run --data-dir %s`" % (self.data_dir, self._addr_file(), self.data_dir)) from None
        if not addr:
            raise NodeUnreachable("%s is empty: is the node starting? try again" % self._addr_file())
        return addr

    def _get_transport(self, fresh: bool = False) -> Transport:
        with self._lock:
            t = self._transport
            if t is not None and not fresh:
                return t
            addr = self._addr if self._addr is not None else self._read_addr()
            if t is not None and t.addr == addr:
                return t
            if t is not None:
                t.close()
            t = Transport(addr, self.answer_limit)
            self._transport = t
            return t

    def _get_token(self, reread: bool = False) -> Optional[str]:
        if not self._token_from_file:
            return self._token
        if self._token is None or reread:
            try:
                with open(self._token_file(), encoding="utf-8") as f:
                    self._token = f.read().strip() or None
            except FileNotFoundError:
                raise Unauthorized(
                    "IDENTITY_INVALID", "no API token: %s does not exist" % self._token_file(),
                    hint="initialise the node with `iacp-node init --data-dir %s`, or pass token=" % self.data_dir
                ) from None
        return self._token

    def _unreachable(self, t: Transport) -> NodeUnreachable:
        if self.data_dir is not None and self._addr is None:
            return NodeUnreachable(
                "no node answers at %s (read from %s): is `iacp-node run --data-dir %s` running? "
                "(a node that was killed leaves its api.addr behind)" % (t.addr, self._addr_file(), self.data_dir))
        return NodeUnreachable(
            "no node answers at %s: is `iacp-node run --api %s` running? (or give the client the node's "
            "data_dir, where it writes its address)" % (t.addr, t.addr))

    def _unauthorized_hint(self) -> str:
        if self._token_from_file:
            return "the client read its token from %s: is that the data dir of the node at %s?" % (
                self._token_file(), self.addr)
        if self._token is None:
            return "the client has no token: pass token= or data_dir="
        return "the token given does not match <data-dir>/api.token of the node at %s" % self.addr

    def _send(
        self,
        method: str,
        path: str,
        body: Optional[bytes] = None,
        *,
        timeout: Optional[float] = None,
        accept: str = _JSON,
        cancel: Optional[threading.Event] = None,
    ) -> Answer:
        """Sends one call, retrying once after re-reading api.addr (refused) or api.token
        (401) when they come from the data directory."""
        timeout = self.timeout if timeout is None else timeout
        t = self._get_transport()
        reread_addr = reread_token = False
        while True:
            headers = {"Accept": accept, "User-Agent": "iacp-python/" + __version__}
            tok = self._get_token(reread=reread_token)
            if tok:
                headers["Authorization"] = "Bearer " + tok
            if body is not None:
                headers["Content-Type"] = _JSON
            try:
                ans = t.call(method, path, body, headers, timeout, cancel)
            except _Refused:
                if self._addr is None and not reread_addr:
                    reread_addr = True
                    nt = self._get_transport(fresh=True)
                    if nt is not t:
                        t = nt
                        continue
                raise self._unreachable(t) from None
            if ans.status == 401 and self._token_from_file and not reread_token:
                old = self._token
                reread_token = True
                if self._get_token(reread=True) != old:
                    continue
            return ans

    def _call(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        """One call whose 2xx answer is JSON: returns it decoded; an error answer raises."""
        raw = _dumps(body) if body is not None else None
        ans = self._send(method, path, raw, **kw)
        if ans.status // 100 != 2:
            raise decode_error(ans, hint=self._unauthorized_hint() if ans.status == 401 else "")
        if not ans.body:
            return {}
        try:
            return json.loads(ans.body)
        except ValueError as e:
            raise IACPError("INTERNAL_ERROR", "%s %s answered HTTP %d with a body that is not JSON: %.200r" % (
                method, path.split("?")[0], ans.status, ans.body)) from e

    # --- messages ---

    def send(
        self,
        to: str,
        intent: str,
        payload: Optional[Dict[str, Any]] = None,
        *,
        type: str = "request",
        channel: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        correlation_id: Optional[str] = None,
        queue_unknown: bool = False,
    ) -> SendResult:
        """Sends a message to agent ``to`` and returns once the recipient's node has it
        (status ``accepted``), or once it is queued for a known agent that cannot be
        reached now (status ``queued``: the node retries until its TTL; :meth:`cancel`
        takes it back).

        An agent id nothing knows (a typo, most often) raises :class:`iacp.IACPError`
        ``AGENT_NOT_FOUND`` at once, unless ``queue_unknown`` queues the message for an
        agent that will join later. ``type`` is request (default), response, event or
        error; the node fills the id, time, sender, signature, the channel from the intent,
        and a request's correlation id. The answer to a request sent this way arrives later
        in the inbox; to wait for it use :meth:`request`.
        """
        return self.send_message(Message.new(to, intent, payload, type=type, channel=channel,
                                             ttl_seconds=ttl_seconds, correlation_id=correlation_id),
                                 queue_unknown=queue_unknown)

    def send_message(self, message: Union[Message, Dict[str, Any]], *, queue_unknown: bool = False) -> SendResult:
        """Sends an IACP document (a :class:`Message` or its dict) as it is; the node fills
        and signs what it leaves out (see :meth:`send`)."""
        path = MESSAGE_PATH + ("?queue_unknown=true" if queue_unknown else "")
        return SendResult.from_dict(self._call("POST", path, message))

    def cancel(self, message: Union[str, SendResult, Message]) -> CancelResult:
        """Takes a queued message out of the node's outbox: it is never delivered. A
        message the outbox does not hold (delivered, refused, expired, or cancelled
        already) raises :class:`iacp.IACPError` (HTTP 404)."""
        mid = message if isinstance(message, str) else (
            message.message_id if isinstance(message, SendResult) else message.envelope.message_id)
        return CancelResult.from_dict(self._call("DELETE", "/v1/outbox/" + urllib.parse.quote(mid, safe="")))

    def outbox(self) -> Outbox:
        """The messages the node still tries to deliver, with their attempts."""
        return Outbox.from_dict(self._call("GET", "/v1/outbox"))

    def request(
        self,
        to: str,
        intent: str,
        payload: Optional[Dict[str, Any]] = None,
        *,
        wait: Seconds = 30.0,
        channel: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
    ) -> Message:
        """Sends a request to agent ``to`` and waits up to ``wait`` seconds for its
        response, which it returns.

        An ``error`` reply raises :class:`iacp.IACPError` with the replier's code; no reply
        within ``wait`` raises :class:`iacp.Timeout`, and the request is never delivered
        after that (it lives no longer than ``wait``). An agent id nothing knows raises
        ``AGENT_NOT_FOUND`` at once. ``cancel``, a ``threading.Event``, abandons the wait
        when set (:class:`iacp.Cancelled`).
        """
        m = Message.new(to, intent, payload, type="request", channel=channel, ttl_seconds=ttl_seconds)
        return self.request_message(m, wait=wait, cancel=cancel)

    def request_message(
        self,
        message: Union[Message, Dict[str, Any]],
        *,
        wait: Seconds = 30.0,
        cancel: Optional[threading.Event] = None,
    ) -> Message:
        """Sends a request document as it is and waits up to ``wait`` seconds for its
        response (see :meth:`request`)."""
        w = format_wait(wait)
        doc = self._call("POST", MESSAGE_PATH + "?wait=" + w, message,
                         timeout=_seconds(wait) + self.timeout, cancel=cancel)
        return Message.from_dict(doc)

    def reply(self, request: Message, payload: Optional[Dict[str, Any]] = None, *,
              type: str = "response") -> SendResult:
        """Answers ``request`` with a response correlated to it: to its sender, on its
        channel, with its intent, its message id as correlation id. A payload without a
        ``status`` is sent with ``"status": "accepted"`` (a response needs one of accepted,
        rejected, pending, counter)."""
        p = dict(payload or {})
        if type == "response":
            p.setdefault("status", "accepted")
        return self.send_message(_answer(request, type, p))

    def reply_error(
        self,
        request: Message,
        code: str,
        message: str = "",
        *,
        retryable: Optional[bool] = None,
        retry_after: Optional[float] = None,
        detail: Any = None,
    ) -> SendResult:
        """Answers ``request`` with an ``error`` message of IACP ``code`` (its requester's
        :meth:`request` raises IACPError with that code)."""
        err = IACPError(code, message, retryable=retryable, retry_after=retry_after, detail=detail)
        return self.send_message(_answer(request, "error", err.to_payload()))

    def broadcast(
        self,
        event_type: str,
        detail: Optional[str] = None,
        *,
        severity: Optional[str] = None,
        data: Any = None,
    ) -> SendResult:
        """Publishes an event to every agent of the mesh (gossip). ``severity`` is info,
        warning or critical. 503 (CAPABILITY_MISMATCH) when gossip is off on the node."""
        ev: Dict[str, Any] = {"event_type": event_type}
        if detail is not None:
            ev["detail"] = detail
        if severity is not None:
            ev["severity"] = severity
        if data is not None:
            ev["data"] = data
        return SendResult.from_dict(self._call("POST", "/v1/broadcast", ev))

    def ask(
        self,
        group: Optional[str] = None,
        intent: str = "query",
        payload: Optional[Dict[str, Any]] = None,
        *,
        deadline: Seconds = 2.0,
        count: int = 0,
        expect: Optional[List[str]] = None,
    ) -> AskResult:
        """A broadcast query (docs/coordination.md): asks the agents of capability ``group``,
        or every agent when None, over gossip, and returns their direct answers once
        ``count`` agents answered, every agent of ``expect`` answered, or ``deadline``
        seconds passed. ``intent`` query (the default) is answered by every node with its
        capability manifest. Bad input raises :class:`iacp.IACPError` (PAYLOAD_INVALID);
        no member reachable, AGENT_NOT_FOUND."""
        body: Dict[str, Any] = {"intent": intent, "deadline": format_wait(deadline)}
        if group:
            body["group"] = group
        if payload is not None:
            body["payload"] = payload
        if count:
            body["count"] = count
        if expect:
            body["expect"] = list(expect)
        doc = self._call("POST", "/v1/ask", body, timeout=_seconds(deadline) + self.timeout)
        return AskResult.from_dict(doc)

    # --- the inbox ---

    def inbox(
        self,
        after: int = 0,
        *,
        wait: Optional[Seconds] = None,
        limit: Optional[int] = None,
        max_bytes: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
    ) -> InboxPage:
        """One page of the messages waiting with seq greater than ``after``, oldest first.

        With ``wait`` (seconds) it long-polls while none waits. ``limit`` (1-1000) and
        ``max_bytes`` bound the page; when ``page.more``, ask again with
        ``after=page.next_after``. Listing takes nothing: :meth:`ack` does.
        """
        q: Dict[str, str] = {"dialect": "iacp"}  # items in IACP, whatever the agent's dialect
        if after:
            q["after"] = str(int(after))
        if limit is not None:
            q["limit"] = str(int(limit))
        mb = max_bytes if max_bytes is not None else min(INBOX_PAGE_BYTES, self.answer_limit - _INBOX_PAGE_SLACK)
        q["max_bytes"] = str(int(mb))
        timeout = self.timeout
        if wait is not None:
            q["wait"] = format_wait(wait)
            timeout += _seconds(wait)
        doc = self._call("GET", "/v1/inbox?" + urllib.parse.urlencode(q), timeout=timeout, cancel=cancel)
        return InboxPage.from_dict(doc)

    def iter_inbox(
        self,
        after: int = 0,
        *,
        wait: Seconds = 30.0,
        follow: bool = True,
        limit: Optional[int] = None,
        cancel: Optional[threading.Event] = None,
    ) -> Iterator[InboxItem]:
        """Yields the inbox's messages, page after page, oldest first.

        With ``follow`` (the default) it then long-polls (``wait`` seconds a poll) for new
        ones and never ends by itself: break out of the loop, or set ``cancel`` (a
        ``threading.Event``; the generator then ends within 0.2 s). Without ``follow`` it
        ends after the last page. It takes nothing: :meth:`ack` each message handled.
        """
        more = True
        while True:
            if cancel is not None and cancel.is_set():
                return
            poll = wait if (follow and not more) else None
            try:
                page = self.inbox(after, wait=poll, limit=limit, cancel=cancel)
            except Cancelled:
                return
            for item in page.messages:
                yield item
            after = page.next_after
            more = page.more
            if not more and not follow:
                return

    def ack(self, message: Union[str, InboxItem, Message]) -> str:
        """Takes a message out of the inbox for good (give its id, its InboxItem or its
        Message); returns its id. A message not in the inbox (taken already) raises
        IACPError PAYLOAD_INVALID (HTTP 404)."""
        mid = message if isinstance(message, str) else message.message_id
        if not mid:
            raise ValueError("ack needs a message id")
        doc = self._call("POST", "/v1/inbox/%s/ack" % urllib.parse.quote(mid, safe=""))
        return str(doc.get("acked", mid))

    # --- the mesh ---

    def discover(
        self,
        *,
        tools: Union[None, str, Iterable[str]] = None,
        models: Union[None, str, Iterable[str]] = None,
        domains: Union[None, str, Iterable[str]] = None,
        prefer_tools: Union[None, str, Iterable[str]] = None,
        prefer_models: Union[None, str, Iterable[str]] = None,
        prefer_domains: Union[None, str, Iterable[str]] = None,
        locality: Optional[str] = None,
        max_latency_ms: Optional[int] = None,
    ) -> DiscoverResult:
        """Finds the agents that have every required tool, model and domain, best first
        (those with more of the preferred ones first). Name at least one."""
        q: List[Any] = []
        for key, xs in (("tool", tools), ("model", models), ("domain", domains), ("prefer_tool", prefer_tools),
                        ("prefer_model", prefer_models), ("prefer_domain", prefer_domains)):
            q.extend((key, x) for x in _list(xs))
        if locality:
            q.append(("locality", locality))
        if max_latency_ms:
            q.append(("max_latency_ms", str(int(max_latency_ms))))
        return DiscoverResult.from_dict(self._call("GET", "/v1/discover?" + urllib.parse.urlencode(q)))

    def resolve(self, agent_id: str) -> AgentRecord:
        """The record of an agent (its peer, addresses and manifest). An unknown agent raises
        IACPError AGENT_NOT_FOUND (HTTP 404)."""
        return AgentRecord.from_dict(self._call("GET", "/v1/resolve/" + urllib.parse.quote(agent_id, safe=":")))

    def agents(self) -> List[AgentInfo]:
        """The agents the node hears heartbeats from, with their state (alive, suspect...)."""
        doc = self._call("GET", "/v1/agents")
        return [AgentInfo.from_dict(a) for a in doc.get("agents") or []]

    def peers(self) -> List[Peer]:
        """The connected libp2p peers."""
        doc = self._call("GET", "/v1/peers")
        return [Peer.from_dict(p) for p in doc.get("peers") or []]

    def status(self) -> NodeStatus:
        """The node's status: its agent, peer, addresses, inbox depth, discovery, safety."""
        return NodeStatus.from_dict(self._call("GET", "/v1/status"))

    def health(self) -> Health:
        """``/healthz``: whether the node's API answers (needs no token)."""
        return Health.from_dict(self._call("GET", "/healthz"))

    def conversation(self, conversation_id: str, *, after: int = 0, limit: Optional[int] = None) -> Conversation:
        """A conversation as the node's audit log recorded it: every message whose id or
        correlation id is ``conversation_id``, and their answers (a request's message id
        names its conversation). ``after``/``limit`` page through it (``next_after``).
        409 CAPABILITY_MISMATCH when the node's audit log is off."""
        q: Dict[str, str] = {}
        if after:
            q["after"] = str(int(after))
        if limit:
            q["limit"] = str(int(limit))
        path = "/v1/conversations/" + urllib.parse.quote(conversation_id, safe="")
        if q:
            path += "?" + urllib.parse.urlencode(q)
        return Conversation.from_dict(self._call("GET", path))

    # --- events ---

    def events(
        self,
        kinds: Union[None, str, Sequence[str]] = None,
        *,
        agent: Optional[str] = None,
        group: Optional[str] = None,
        idle_timeout: float = 45.0,
    ) -> "EventStream":
        """Follows the node's event stream (Server-Sent Events): an iterator of
        :class:`iacp.Event`, to close when done (``with client.events(...) as s:``).

        ``kinds`` filters by kind: event, group, heartbeat, transition, message,
        trust.conflict (default all); ``agent`` by agent id; ``group`` by capability group.
        The node sends a keep-alive every 15 s, so the stream raises :class:`iacp.Timeout`
        when nothing at all arrives for ``idle_timeout`` seconds. ``close()``, from any
        thread, ends the iteration.
        """
        q: Dict[str, str] = {}
        ks = _list(kinds)
        if ks:
            q["kinds"] = ",".join(ks)
        if agent:
            q["agent"] = agent
        if group:
            q["group"] = group
        path = "/v1/events" + ("?" + urllib.parse.urlencode(q) if q else "")
        return EventStream(self, path, idle_timeout)


def _answer(request: Message, type: str, payload: Dict[str, Any]) -> Message:
    """The answer to request: to its sender, on its channel, correlated to it."""
    if not request.message_id or not request.sender_id:
        raise ValueError("the request has no message_id or sender: only a received message can be answered")
    return Message.new(request.sender_id, request.intent or "handoff", payload, type=type,
                       channel=request.channel, correlation_id=request.message_id)


_MAX_LINE = 2 << 20  # one gossip message is at most 1 MiB; its JSON fits twice


class EventStream:
    """An open event stream: iterate it for :class:`iacp.Event` items; close it when done.

    It is its own iterator and a context manager. Iteration raises :class:`iacp.Timeout`
    when nothing arrives for ``idle_timeout`` seconds, :class:`iacp.NodeUnreachable` when
    the node goes away, and ends quietly once :meth:`close` was called (from any thread).
    """

    def __init__(self, client: Client, path: str, idle_timeout: float) -> None:
        self._client = client
        self.idle_timeout = float(idle_timeout)
        self._closed = False
        self._conn = None
        self._resp = None
        self._open(path)

    def _open(self, path: str) -> None:
        c = self._client
        for attempt in (0, 1):
            t = c._get_transport(fresh=attempt == 1)
            headers = {"Accept": "text/event-stream", "User-Agent": "iacp-python/" + __version__}
            tok = c._get_token(reread=attempt == 1)
            if tok:
                headers["Authorization"] = "Bearer " + tok
            try:
                conn, resp = t.open_stream(path, headers, c.timeout)
            except _Refused:
                if attempt == 0 and c._addr is None:
                    continue
                raise c._unreachable(t) from None
            if resp.status == 200:
                self._conn, self._resp = conn, resp
                conn.sock.settimeout(self.idle_timeout)
                return
            body = resp.read(1 << 20)
            conn.close()
            ans = Answer(resp.status, resp.headers, body)
            if resp.status == 401 and attempt == 0 and c._token_from_file:
                continue
            raise decode_error(ans, hint=c._unauthorized_hint() if resp.status == 401 else "")

    def close(self) -> None:
        """Ends the stream; an iteration blocked in another thread returns."""
        self._closed = True
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if conn is not None:
            conn.close()

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        name: Optional[str] = None
        eid: Optional[str] = None
        data: List[str] = []
        while True:
            line = self._readline()
            if line is None:
                raise StopIteration
            if line == "":
                if data:
                    return _event(name, eid, data)
                name = None
                continue
            if line.startswith(":"):
                continue  # a comment: keep-alive, or items dropped for a slow reader
            key, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if key == "data":
                data.append(value)
            elif key == "event":
                name = value
            elif key == "id":
                eid = value

    def _readline(self) -> Optional[str]:
        if self._closed or self._resp is None:
            return None
        try:
            raw = self._resp.readline(_MAX_LINE)
        except socket.timeout:
            if self._closed:
                return None
            self.close()
            raise Timeout("TIMEOUT", "the event stream of %s sent nothing for %gs (the node sends a keep-alive "
                          "every 15 s)" % (self._client.addr, self.idle_timeout), retryable=True) from None
        except (OSError, ValueError, AttributeError) as e:
            if self._closed:
                return None
            self.close()
            raise NodeUnreachable("the event stream of %s broke: %s" % (self._client.addr, e),
                                  hint="did the node stop?") from e
        if not raw:
            if self._closed:
                return None
            self.close()
            raise NodeUnreachable("the node at %s ended the event stream" % self._client.addr,
                                  hint="did it stop? open a new stream when it runs again")
        if len(raw) >= _MAX_LINE and not raw.endswith(b"\n"):
            self.close()
            raise IACPError("PAYLOAD_INVALID", "an event stream line is longer than %d bytes" % _MAX_LINE)
        return raw.decode("utf-8", "replace").rstrip("\r\n")


def _event(name: Optional[str], eid: Optional[str], data: List[str]) -> Event:
    try:
        doc = json.loads("\n".join(data))
    except ValueError as e:
        raise IACPError("INTERNAL_ERROR", "an event of the stream is not JSON: %s" % e) from e
    ev = Event.from_dict(doc)
    if not ev.kind and name:
        ev.kind = name
    ev.id = eid
    return ev
