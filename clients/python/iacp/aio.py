"""The asyncio client: the surface of :class:`iacp.Client`, awaitable."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, TypeVar, Union

from .client import DEFAULT_ANSWER_LIMIT, Client, EventStream, Seconds
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

__all__ = ["AsyncClient", "AsyncEventStream"]

T = TypeVar("T")


class AsyncClient:
    """The asyncio client of a node's local API, with the surface of :class:`iacp.Client`.

    It is honest about how: each call runs the synchronous client's call in a worker thread
    (``asyncio.to_thread``), so the event loop never blocks on the network, and the
    standard library is all it needs. A cancelled long poll (``inbox(wait=...)``,
    ``request``) lets its thread go within 0.2 s; a cancelled event stream closes its
    connection. Calls at once use as many threads (the default executor bounds them).

    The arguments are those of :class:`iacp.Client`; ``client`` wraps an existing one.
    """

    def __init__(
        self,
        addr: Optional[str] = None,
        token: Optional[str] = None,
        data_dir: Optional[str] = None,
        *,
        timeout: float = 30.0,
        answer_limit: int = DEFAULT_ANSWER_LIMIT,
        client: Optional[Client] = None,
    ) -> None:
        self.sync: Client = client if client is not None else Client(
            addr, token, data_dir, timeout=timeout, answer_limit=answer_limit)

    @property
    def addr(self) -> Optional[str]:
        """The API address in use."""
        return self.sync.addr

    async def close(self) -> None:
        """Closes the kept-alive connections."""
        self.sync.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kw)

    async def _cancellable(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        cancel = threading.Event()
        try:
            return await asyncio.to_thread(fn, *args, cancel=cancel, **kw)
        finally:
            cancel.set()  # a cancelled await lets the thread's long poll go

    async def send(self, to: str, intent: str, payload: Optional[Dict[str, Any]] = None, **kw: Any) -> SendResult:
        """See :meth:`iacp.Client.send`."""
        return await self._run(self.sync.send, to, intent, payload, **kw)

    async def send_message(self, message: Union[Message, Dict[str, Any]], *, queue_unknown: bool = False) -> SendResult:
        """See :meth:`iacp.Client.send_message`."""
        return await self._run(self.sync.send_message, message, queue_unknown=queue_unknown)

    async def cancel(self, message: Union[str, SendResult, Message]) -> CancelResult:
        """See :meth:`iacp.Client.cancel`."""
        return await self._run(self.sync.cancel, message)

    async def outbox(self) -> Outbox:
        """See :meth:`iacp.Client.outbox`."""
        return await self._run(self.sync.outbox)

    async def request(self, to: str, intent: str, payload: Optional[Dict[str, Any]] = None, *,
                      wait: Seconds = 30.0, **kw: Any) -> Message:
        """See :meth:`iacp.Client.request`; cancelling the task abandons the wait."""
        return await self._cancellable(self.sync.request, to, intent, payload, wait=wait, **kw)

    async def request_message(self, message: Union[Message, Dict[str, Any]], *, wait: Seconds = 30.0) -> Message:
        """See :meth:`iacp.Client.request_message`."""
        return await self._cancellable(self.sync.request_message, message, wait=wait)

    async def reply(self, request: Message, payload: Optional[Dict[str, Any]] = None, *,
                    type: str = "response") -> SendResult:
        """See :meth:`iacp.Client.reply`."""
        return await self._run(self.sync.reply, request, payload, type=type)

    async def reply_error(self, request: Message, code: str, message: str = "", **kw: Any) -> SendResult:
        """See :meth:`iacp.Client.reply_error`."""
        return await self._run(self.sync.reply_error, request, code, message, **kw)

    async def broadcast(self, event_type: str, detail: Optional[str] = None, **kw: Any) -> SendResult:
        """See :meth:`iacp.Client.broadcast`."""
        return await self._run(self.sync.broadcast, event_type, detail, **kw)

    async def ask(self, group: Optional[str] = None, intent: str = "query",
                  payload: Optional[Dict[str, Any]] = None, **kw: Any) -> AskResult:
        """See :meth:`iacp.Client.ask`."""
        return await self._run(self.sync.ask, group, intent, payload, **kw)

    async def inbox(self, after: int = 0, *, wait: Optional[Seconds] = None, limit: Optional[int] = None,
                    max_bytes: Optional[int] = None) -> InboxPage:
        """See :meth:`iacp.Client.inbox`; cancelling the task abandons the long poll."""
        return await self._cancellable(self.sync.inbox, after, wait=wait, limit=limit, max_bytes=max_bytes)

    async def iter_inbox(self, after: int = 0, *, wait: Seconds = 30.0, follow: bool = True,
                         limit: Optional[int] = None) -> AsyncIterator[InboxItem]:
        """See :meth:`iacp.Client.iter_inbox`: an async generator (break out, or cancel the
        task, to end it)."""
        more = True
        while True:
            page = await self.inbox(after, wait=wait if (follow and not more) else None, limit=limit)
            for item in page.messages:
                yield item
            after, more = page.next_after, page.more
            if not more and not follow:
                return

    async def ack(self, message: Union[str, InboxItem, Message]) -> str:
        """See :meth:`iacp.Client.ack`."""
        return await self._run(self.sync.ack, message)

    async def discover(self, **kw: Any) -> DiscoverResult:
        """See :meth:`iacp.Client.discover`."""
        return await self._run(self.sync.discover, **kw)

    async def resolve(self, agent_id: str) -> AgentRecord:
        """See :meth:`iacp.Client.resolve`."""
        return await self._run(self.sync.resolve, agent_id)

    async def agents(self) -> List[AgentInfo]:
        """See :meth:`iacp.Client.agents`."""
        return await self._run(self.sync.agents)

    async def peers(self) -> List[Peer]:
        """See :meth:`iacp.Client.peers`."""
        return await self._run(self.sync.peers)

    async def status(self) -> NodeStatus:
        """See :meth:`iacp.Client.status`."""
        return await self._run(self.sync.status)

    async def health(self) -> Health:
        """See :meth:`iacp.Client.health`."""
        return await self._run(self.sync.health)

    async def conversation(self, conversation_id: str, *, after: int = 0,
                           limit: Optional[int] = None) -> Conversation:
        """See :meth:`iacp.Client.conversation`."""
        return await self._run(self.sync.conversation, conversation_id, after=after, limit=limit)

    def events(self, kinds: Union[None, str, Sequence[str]] = None, *, agent: Optional[str] = None,
               group: Optional[str] = None, idle_timeout: float = 45.0) -> "AsyncEventStream":
        """The event stream as an async iterator (see :meth:`iacp.Client.events`)::

            async with client.events(kinds=["event"]) as stream:
                async for ev in stream:
                    ...

        It opens at the first ``async for`` step (or ``async with``).
        """
        return AsyncEventStream(lambda: self.sync.events(kinds, agent=agent, group=group,
                                                         idle_timeout=idle_timeout))


_END = object()


def _next(stream: EventStream) -> Any:
    return next(stream, _END)


class AsyncEventStream:
    """An event stream read in a worker thread, one event per step; ``aclose()`` (or
    leaving ``async with``, or cancelling the reading task) closes its connection."""

    def __init__(self, opener: Callable[[], EventStream]) -> None:
        self._opener = opener
        self._stream: Optional[EventStream] = None

    async def _open(self) -> EventStream:
        if self._stream is None:
            self._stream = await asyncio.to_thread(self._opener)
        return self._stream

    async def __aenter__(self) -> "AsyncEventStream":
        await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        s = await self._open()
        try:
            ev = await asyncio.to_thread(_next, s)
        except asyncio.CancelledError:
            s.close()  # the thread's read returns
            raise
        if ev is _END:
            raise StopAsyncIteration
        return ev  # type: ignore[return-value]

    async def aclose(self) -> None:
        """Closes the stream."""
        if self._stream is not None:
            self._stream.close()
