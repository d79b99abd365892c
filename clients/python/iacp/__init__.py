"""iacp: a client of an iacp-node's local API, in the Python standard library alone.

::

    import iacp

    client = iacp.Client(data_dir=".data/a")          # or iacp.Client("127.0.0.1:9700", token=...)
    answer = client.request("acme:b:bot", "handoff", {"task": "review"}, wait=10)
    print(answer.payload)

    agent = iacp.Agent(iacp.Client(data_dir=".data/b"))

    @agent.on("handoff")
    def handoff(msg):
        return {"status": "accepted", "detail": "done"}

    agent.run()

:class:`Client` and :class:`AsyncClient` cover the API of docs/api.md (send, request,
cancel, broadcast, discover, resolve, agents, status, the inbox, acks, the outbox, the event
stream, conversations); :class:`Agent` and :class:`AsyncAgent` are handler loops over the inbox;
:mod:`iacp.models` holds the documents as dataclasses; every error answer raises
:class:`IACPError` with the node's IACP code. docs/clients/python.md walks through it.
"""

__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ANSWER_TOO_LARGE,
    CODES,
    NODE_UNREACHABLE,
    AnswerTooLarge,
    Cancelled,
    IACPError,
    NodeUnreachable,
    Timeout,
    Unauthorized,
)
from .models import (  # noqa: E402
    AgentInfo,
    AskAnswer,
    AskError,
    AskResult,
    AgentRecord,
    Body,
    CancelResult,
    Conversation,
    ConversationEntry,
    DiscoverResult,
    Envelope,
    ErrorPayload,
    Event,
    EventPayload,
    Health,
    Heartbeat,
    InboundNotice,
    InboxItem,
    InboxPage,
    Manifest,
    Match,
    Message,
    Model,
    NodeStatus,
    Outbox,
    OutboxEntry,
    Peer,
    RateLimit,
    Recipient,
    Sender,
    SEND_STATUSES,
    SendResult,
    Transition,
    parse_time,
)
from .client import DEFAULT_ANSWER_LIMIT, DEFAULT_DATA_DIR, Client, EventStream  # noqa: E402
from .aio import AsyncClient, AsyncEventStream  # noqa: E402
from .agent import Agent, AsyncAgent  # noqa: E402

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "Agent",
    "AsyncAgent",
    "EventStream",
    "AsyncEventStream",
    "IACPError",
    "NodeUnreachable",
    "Unauthorized",
    "Timeout",
    "AnswerTooLarge",
    "Cancelled",
    "CODES",
    "NODE_UNREACHABLE",
    "ANSWER_TOO_LARGE",
    "DEFAULT_ANSWER_LIMIT",
    "DEFAULT_DATA_DIR",
    "Model",
    "Message",
    "Envelope",
    "Sender",
    "Recipient",
    "Body",
    "ErrorPayload",
    "EventPayload",
    "Heartbeat",
    "SendResult",
    "SEND_STATUSES",
    "CancelResult",
    "Outbox",
    "OutboxEntry",
    "InboxItem",
    "InboxPage",
    "Manifest",
    "RateLimit",
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
    "Conversation",
    "ConversationEntry",
    "AskResult",
    "AskAnswer",
    "AskError",
    "parse_time",
]
