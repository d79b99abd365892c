"""Typed models of the documents the node's API takes and answers (docs/api.md).

Each model is a dataclass with ``from_dict`` (from the decoded JSON) and ``to_dict`` (back
to it). Members the model does not know are kept in ``extra`` and written back by
``to_dict``, so a document read and written again keeps them (the node signs documents as
they are, and ignores members it does not know). ``to_dict`` leaves out fields that are
None.

Times are kept as the RFC 3339 strings the node writes (a signature covers the exact
string); parse them with :func:`parse_time` when you need a ``datetime``.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar

__all__ = [
    "Model",
    "Sender",
    "Recipient",
    "Envelope",
    "Body",
    "Message",
    "ErrorPayload",
    "EventPayload",
    "Heartbeat",
    "SendResult",
    "SEND_STATUSES",
    "CancelResult",
    "OutboxEntry",
    "Outbox",
    "InboxItem",
    "InboxPage",
    "RateLimit",
    "Manifest",
    "AgentRecord",
    "Match",
    "DiscoverResult",
    "AgentInfo",
    "Peer",
    "NodeStatus",
    "Health",
    "Transition",
    "InboundNotice",
    "Event",
    "ConversationEntry",
    "Conversation",
    "AskAnswer",
    "AskError",
    "AskResult",
    "parse_time",
]

M = TypeVar("M", bound="Model")


def _json(name: str, **kw: Any) -> Any:
    """A field whose JSON member is named differently (``from``), or None: not in JSON."""
    md = dict(kw.pop("metadata", {}))
    md["json"] = name
    return field(metadata=md, **kw)


def _converter(tp: Any) -> Optional[Callable[[Any], Any]]:
    """How a decoded JSON value becomes a field of type tp: a model's from_dict, a list of
    them, or None (the value as it is)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _converter(args[0]) if len(args) == 1 else None
    if origin in (list, List):
        args = typing.get_args(tp)
        inner = _converter(args[0]) if args else None
        if inner is None:
            return None
        return lambda v: [inner(x) if x is not None else None for x in v] if isinstance(v, list) else v
    if isinstance(tp, type) and issubclass(tp, Model):
        return tp.from_dict
    return None


def _plain(v: Any) -> Any:
    if isinstance(v, Model):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


class _Spec:
    """What from_dict and to_dict need of a model class, worked out once."""

    __slots__ = ("members", "names", "convert", "has_extra")

    def __init__(self, cls: type) -> None:
        hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
        self.members: Dict[str, str] = {}  # JSON member -> field
        self.names: List[Tuple[str, str]] = []  # (field, JSON member)
        self.convert: Dict[str, Optional[Callable[[Any], Any]]] = {}
        self.has_extra = False
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                self.has_extra = True
                continue
            j = f.metadata.get("json", f.name)
            if j is None:
                continue
            self.members[j] = f.name
            self.names.append((f.name, j))
            self.convert[f.name] = _converter(hints[f.name])


class Model:
    """The base of the models: ``from_dict``, ``to_dict``, unknown members in ``extra``."""

    @classmethod
    def _spec(cls) -> _Spec:
        spec = cls.__dict__.get("_spec_")
        if spec is None:
            spec = _Spec(cls)
            setattr(cls, "_spec_", spec)
        return spec

    @classmethod
    def from_dict(cls: Type[M], d: Any) -> M:
        """Builds the model from a decoded JSON object (a model passes through as is)."""
        if isinstance(d, cls):
            return d
        if not isinstance(d, dict):
            raise TypeError("%s.from_dict needs a JSON object (dict), not %s" % (cls.__name__, type(d).__name__))
        spec = cls._spec()
        members, convert = spec.members, spec.convert
        kw: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for k, v in d.items():
            name = members.get(k)
            if name is None:
                extra[k] = v
                continue
            conv = convert[name]
            kw[name] = conv(v) if conv is not None and v is not None else v
        if spec.has_extra:
            kw["extra"] = extra
        return cls(**kw)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object of the model: its fields that are not None, then ``extra``."""
        out: Dict[str, Any] = {}
        for name, member in self._spec().names:
            v = getattr(self, name)
            if v is not None:
                out[member] = _plain(v)
        for k, v in (getattr(self, "extra", None) or {}).items():
            out.setdefault(k, v)
        return out


# --- The IACP document --------------------------------------------------------------------


@dataclass
class Sender(Model):
    """Who sent a message: the agent id, its signature and the signing peer."""

    agent_id: Optional[str] = None
    identity_sig: Optional[str] = None
    peer_id: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Recipient(Model):
    """The target agent (``*`` for a broadcast) and the logical channel."""

    agent_id: Optional[str] = None
    channel: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Envelope(Model):
    """Routing, identity and time of a message. On send, leave out what the node fills:
    version, message_id, timestamp, ttl_seconds (1 h), a request's correlation_id, sender."""

    version: Optional[str] = None
    message_id: Optional[str] = None
    correlation_id: Optional[str] = None
    sender: Optional[Sender] = None
    recipient: Optional[Recipient] = None
    timestamp: Optional[str] = None
    ttl_seconds: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Body(Model):
    """The typed part of a message (its JSON member ``message``): type, intent, payload."""

    type: Optional[str] = None
    intent: Optional[str] = None
    payload: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Message(Model):
    """One IACP document, ``{"envelope": {...}, "message": {...}}``.

    Build one to send with :meth:`Message.new`; the properties read the usual fields
    (``msg.sender_id``, ``msg.intent``, ``msg.payload``...).
    """

    envelope: Envelope = field(default_factory=Envelope)
    body: Body = _json("message", default_factory=Body)
    extra: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(
        cls,
        to: str,
        intent: str,
        payload: Optional[Dict[str, Any]] = None,
        *,
        type: str = "request",
        channel: Optional[str] = None,
        ttl_seconds: Optional[int] = None,
        correlation_id: Optional[str] = None,
    ) -> "Message":
        """A message to send to agent ``to`` (``*`` with an event is a broadcast). The node
        fills the rest: version, id, time, sender and signature; a request's correlation id;
        the channel from the intent when None."""
        return cls(
            envelope=Envelope(
                recipient=Recipient(agent_id=to, channel=channel),
                ttl_seconds=ttl_seconds,
                correlation_id=correlation_id,
            ),
            body=Body(type=type, intent=intent, payload=payload if payload is not None else {}),
        )

    @property
    def message_id(self) -> Optional[str]:
        """The message's id."""
        return self.envelope.message_id

    @property
    def correlation_id(self) -> Optional[str]:
        """The id of the conversation: a request's own id, which its answers carry."""
        return self.envelope.correlation_id

    @property
    def sender_id(self) -> Optional[str]:
        """The sending agent's id."""
        return self.envelope.sender.agent_id if self.envelope.sender else None

    @property
    def recipient_id(self) -> Optional[str]:
        """The recipient agent's id (``*`` for a broadcast)."""
        return self.envelope.recipient.agent_id if self.envelope.recipient else None

    @property
    def channel(self) -> Optional[str]:
        """The recipient channel."""
        return self.envelope.recipient.channel if self.envelope.recipient else None

    @property
    def type(self) -> Optional[str]:
        """request, response, event, error or heartbeat."""
        return self.body.type

    @property
    def intent(self) -> Optional[str]:
        """The intent: handoff, query, negotiate, notify, health, or an ``x-`` one."""
        return self.body.intent

    @property
    def payload(self) -> Dict[str, Any]:
        """The payload (an empty dict when the message has none)."""
        return self.body.payload if self.body.payload is not None else {}

    @property
    def error(self) -> Optional["ErrorPayload"]:
        """The error payload of an ``error`` message, else None."""
        if self.body.type != "error":
            return None
        return ErrorPayload.from_dict(self.payload)


@dataclass
class ErrorPayload(Model):
    """The payload of an ``error`` message and of an error document's ``error``."""

    code: str = ""
    message: str = ""
    retryable: bool = False
    retry_after: Optional[float] = None
    detail: Any = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class EventPayload(Model):
    """The payload of an ``event`` message (a broadcast)."""

    event_type: str = ""
    detail: Optional[str] = None
    severity: Optional[str] = None
    data: Any = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Heartbeat(Model):
    """An agent's state as its heartbeats say: alive, busy, draining or offline."""

    status: str = ""
    load: float = 0.0
    active_tasks: int = 0
    version: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


# --- API answers ----------------------------------------------------------------------------


@dataclass
class SendResult(Model):
    """The answer to a send or a broadcast: the message's id and its status, one of
    :data:`SEND_STATUSES`: ``accepted`` (the recipient's node has it; a broadcast was
    published), ``queued`` (the recipient is known but unreachable now: the message waits
    in the outbox, :meth:`iacp.Client.cancel` takes it back) or ``pending`` (held until the
    node's operator approves it)."""

    message_id: str = ""
    status: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


#: The statuses of a :class:`SendResult` (docs/openapi.yaml's SendResult.status).
SEND_STATUSES = ("accepted", "queued", "pending")


@dataclass
class CancelResult(Model):
    """The answer to a cancel: the message taken out of the outbox."""

    cancelled: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class OutboxEntry(Model):
    """One message the node still tries to deliver."""

    message_id: str = ""
    recipient: str = ""
    seq: int = 0
    enqueued_at: str = ""
    expires_at: str = ""
    attempts: int = 0
    next_attempt_at: str = ""
    last_error: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Outbox(Model):
    """The durable outbox (``GET /v1/outbox``); ``note`` says why it is empty when durable
    delivery is off."""

    durable: bool = False
    entries: List[OutboxEntry] = field(default_factory=list)
    note: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class InboxItem(Model):
    """One inbound message waiting in the inbox until it is acknowledged."""

    seq: int = 0
    received: str = ""
    peer: str = ""
    message_id: str = ""
    message: Message = field(default_factory=Message)
    dialect: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class InboxPage(Model):
    """One page of the inbox. When ``more`` is true more messages wait: ask again with
    ``after=next_after`` (also the ``after`` of the next long poll)."""

    messages: List[InboxItem] = field(default_factory=list)
    more: bool = False
    next_after: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class RateLimit(Model):
    """The rate a manifest advertises."""

    requests_per_minute: Optional[int] = None
    tokens_per_minute: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Manifest(Model):
    """An agent's capability manifest."""

    agent_id: str = ""
    name: Optional[str] = None
    tools: List[str] = field(default_factory=list)
    models: List[str] = field(default_factory=list)
    max_context_tokens: Optional[int] = None
    domains: List[str] = field(default_factory=list)
    rate_limit: Optional[RateLimit] = None
    trust_score: Optional[float] = None
    deployment: Optional[str] = None
    version: Optional[str] = None
    uptime_seconds: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentRecord(Model):
    """An agent's record from the DHT: where it runs and what it can do."""

    agent_id: str = ""
    peer_id: str = ""
    addrs: List[str] = field(default_factory=list)
    manifest: Manifest = field(default_factory=Manifest)
    expires: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Match(AgentRecord):
    """An agent that satisfies a capability query, best first."""

    preferred_matches: int = 0
    load: Optional[float] = None
    latency_ms: Optional[float] = None


@dataclass
class DiscoverResult(Model):
    """The answer to a capability query: the query as the node read it, and the matches."""

    query: Dict[str, Any] = field(default_factory=dict)
    matches: List[Match] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentInfo(Model):
    """One agent's liveness, from gossip heartbeats (``GET /v1/agents``)."""

    agent_id: str = ""
    peer_id: str = ""
    state: str = ""
    last_seen: str = ""
    load: float = 0.0
    active_tasks: int = 0
    version: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Peer(Model):
    """One connected libp2p peer."""

    peer_id: str = ""
    addrs: List[str] = field(default_factory=list)
    latency_ms: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeStatus(Model):
    """The node's status (``GET /v1/status``): the agent's manifest, its heartbeat state, the
    inbox and peers. ``discovery`` and ``safety`` are kept as the node writes them (docs/api.md
    lists their members)."""

    agent_id: str = ""
    peer_id: str = ""
    addrs: List[str] = field(default_factory=list)
    manifest: Optional[Manifest] = None
    status: Heartbeat = field(default_factory=Heartbeat)
    uptime_seconds: int = 0
    peers: int = 0
    inbox_depth: int = 0
    inbox: bool = False
    max_message_bytes: int = 0
    gossip: bool = False
    webhook: Optional[str] = None
    discovery: Optional[Dict[str, Any]] = None
    safety: Dict[str, Any] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Health(Model):
    """``GET /healthz``."""

    status: str = ""
    agent_id: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Transition(Model):
    """A liveness transition of an agent."""

    from_: str = _json("from", default="")
    to: str = ""
    reason: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class InboundNotice(Model):
    """A message arrived in the inbox (take it with ``inbox``)."""

    seq: int = 0
    message_id: str = ""
    type: str = ""
    intent: str = ""
    channel: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Event(Model):
    """One item of the event stream. ``kind`` is event, group, heartbeat, transition,
    message or trust.conflict; the member of that kind is set. ``id`` is the stream's event
    id (not part of the JSON)."""

    kind: str = ""
    at: str = ""
    agent_id: Optional[str] = None
    peer_id: Optional[str] = None
    message: Optional[Message] = None
    event: Optional[EventPayload] = None
    group: Optional[str] = None
    heartbeat: Optional[Heartbeat] = None
    transition: Optional[Transition] = None
    inbound: Optional[InboundNotice] = None
    conflict: Optional[Dict[str, Any]] = None
    id: Optional[str] = _json(None, default=None)  # type: ignore[arg-type]
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ConversationEntry(Model):
    """One message of a conversation as the audit log recorded it: ``event`` is sent,
    delivered, received, acked, refused or expired."""

    seq: int = 0
    time: str = ""
    event: str = ""
    message_id: str = ""
    correlation_id: Optional[str] = None
    type: Optional[str] = None
    intent: Optional[str] = None
    from_: Optional[str] = _json("from", default=None)
    to: Optional[str] = None
    code: Optional[str] = None
    reason: Optional[str] = None
    payload: Any = None
    payload_sha256: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class Conversation(Model):
    """A page of a conversation, oldest first; when ``more``, ask again with
    ``after=next_after``."""

    conversation: str = ""
    messages: List[ConversationEntry] = field(default_factory=list)
    more: bool = False
    next_after: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AskAnswer(Model):
    """One agent's answer to a broadcast query: its response payload and how long after
    the query it came."""

    agent_id: str = ""
    peer_id: str = ""
    status: str = ""
    payload: Dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AskError(Model):
    """One agent's error answer to a broadcast query."""

    agent_id: str = ""
    peer_id: str = ""
    code: str = ""
    message: str = ""
    latency_ms: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)


@dataclass
class AskResult(Model):
    """What a broadcast query collected (``POST /v1/ask``): the answers, the errors by
    agent, the expected agents that did not answer (``missing``), and why it ended
    (``count``, ``expected``, ``deadline`` or ``canceled``)."""

    query_id: str = ""
    group: str = ""
    ended: str = ""
    answers: List[AskAnswer] = field(default_factory=list)
    errors: List[AskError] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    refused: int = 0
    extra: Dict[str, Any] = field(default_factory=dict)


_FRACTION = re.compile(r"\.(\d+)")


def parse_time(s: str) -> datetime.datetime:
    """Parses an RFC 3339 time as the node writes it (``Z``, up to nanoseconds) into an
    aware ``datetime`` (microseconds: the rest is cut)."""
    s = s.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    s = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], s, count=1)
    return datetime.datetime.fromisoformat(s)
