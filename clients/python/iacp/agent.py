"""Agent loops: handlers by intent, fed from the inbox, whose answers go back correlated.

::

    agent = iacp.Agent(iacp.Client(data_dir=".data/b"))

    @agent.on("handoff")
    def handoff(msg: iacp.Message) -> dict:
        if "task" not in msg.payload:
            raise iacp.IACPError("PAYLOAD_INVALID", "a handoff needs a task")
        return {"status": "accepted", "detail": "on it"}

    agent.run()

The loop long-polls the inbox. For each message whose type and intent have a handler it
calls the handler; for a request it sends the handler's return value as a ``response``
correlated to the request (to the request's sender, on its channel, with its intent and
``correlation_id`` = the request's ``message_id``), or an ``error`` with the code of the
:class:`iacp.IACPError` the handler raised (INTERNAL_ERROR for any other exception). Only
then, once the handler returned and its answer was sent, does it acknowledge the message.

Delivery is thus at least once: a message whose answer could not be sent, or whose ack did
not reach the node, stays in the inbox and is handled again when the loop starts again.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from .client import Client, _answer
from .errors import Cancelled, IACPError, NodeUnreachable
from .models import InboxItem, Message

__all__ = ["Agent", "AsyncAgent", "Handler"]

log = logging.getLogger("iacp.agent")

#: A handler takes the message and returns the response payload (a dict), or None to send
#: no answer (it may answer later with ``client.reply``). An AsyncAgent's may be async.
Handler = Callable[[Message], Any]

_Answer = Optional[Tuple[str, Dict[str, Any]]]


class _Dispatch:
    """The handler table and the rules that turn a handler's outcome into an answer."""

    def __init__(self, poll_wait: float, ack_unhandled: bool) -> None:
        self.poll_wait = float(poll_wait)
        self.ack_unhandled = ack_unhandled
        self._handlers: Dict[Tuple[str, str], Handler] = {}

    def on(self, intent: str, *, type: str = "request") -> Callable[[Handler], Handler]:
        """Registers the decorated function for messages of ``intent`` and ``type``
        (request by default; ``"*"`` for any intent of that type)."""

        def register(fn: Handler) -> Handler:
            self._handlers[(type, intent)] = fn
            return fn

        return register

    def handler_for(self, msg: Message) -> Optional[Handler]:
        """The handler of msg's type and intent, else of its type and ``*``, else None."""
        t = msg.type or ""
        return self._handlers.get((t, msg.intent or "")) or self._handlers.get((t, "*"))

    @staticmethod
    def _unhandled(msg: Message) -> _Answer:
        if msg.type != "request":
            return None
        err = IACPError("CAPABILITY_MISMATCH", "this agent has no handler for intent %r" % msg.intent)
        return "error", err.to_payload()

    @staticmethod
    def _outcome(msg: Message, result: Any = None, exc: Optional[BaseException] = None) -> _Answer:
        """The answer to send for a handler's result or exception (None: send none)."""
        if exc is None and result is not None and not isinstance(result, dict):
            exc = TypeError("the handler returned %s: return the response payload (a dict) or None"
                            % type(result).__name__)
        if exc is not None:
            if isinstance(exc, IACPError):
                err = exc
            else:
                log.error("the handler of %s %r failed on %s", msg.type, msg.intent, msg.message_id,
                          exc_info=(type(exc), exc, exc.__traceback__))
                err = IACPError("INTERNAL_ERROR", "the agent's handler failed: %s: %s" % (type(exc).__name__, exc))
            return ("error", err.to_payload()) if msg.type == "request" else None
        if result is None or msg.type != "request":
            return None
        payload = dict(result)
        payload.setdefault("status", "accepted")
        return "response", payload


class Agent(_Dispatch):
    """A synchronous agent loop over a :class:`iacp.Client` (see the module's doc).

    Args:
        client: the client of the agent's node.
        poll_wait: seconds one long poll of the inbox waits for a message.
        ack_unhandled: acknowledge messages no handler takes (a request gets an error
            CAPABILITY_MISMATCH first); False leaves them in the inbox for another consumer.
    """

    def __init__(self, client: Client, *, poll_wait: float = 25.0, ack_unhandled: bool = True) -> None:
        super().__init__(poll_wait, ack_unhandled)
        self.client = client

    def handle(self, item: InboxItem) -> bool:
        """Handles one inbox item: the handler, the answer, then the ack. Returns whether
        the message was taken (acknowledged)."""
        msg = item.message
        h = self.handler_for(msg)
        if h is None:
            if not self.ack_unhandled:
                return False
            answer = self._unhandled(msg)
        else:
            try:
                answer = self._outcome(msg, h(msg))
            except Exception as e:  # the handler's failure is answered, not raised
                answer = self._outcome(msg, exc=e)
        return self._finish(item, answer)

    def _finish(self, item: InboxItem, answer: _Answer) -> bool:
        msg = item.message
        if answer is not None:
            try:
                self.client.send_message(_answer(msg, answer[0], answer[1]))
            except NodeUnreachable:
                raise
            except IACPError as e:
                log.warning("could not answer %s from %s (%s); it stays in the inbox", msg.message_id,
                            msg.sender_id, e)
                return False
        try:
            self.client.ack(item.message_id)
        except NodeUnreachable:
            raise
        except IACPError as e:
            if e.status != 404:
                raise
            log.debug("%s was taken already", item.message_id)
        return True

    def run(self, stop_event: Optional[threading.Event] = None, max_messages: Optional[int] = None) -> int:
        """Takes and handles messages until ``stop_event`` is set (the loop then returns
        within 0.2 s, even in a long poll) or ``max_messages`` were taken. Returns how many
        were taken.

        A node that cannot be reached at the first poll raises :class:`iacp.NodeUnreachable`;
        once the loop has run, it rides out the node's restarts (retrying with a backoff of
        up to 10 s). An :class:`iacp.Unauthorized` or another non-retryable error raises.
        """
        stop = stop_event if stop_event is not None else threading.Event()
        taken = 0
        after, more, connected, backoff = 0, False, False, 0.5
        while not stop.is_set() and (max_messages is None or taken < max_messages):
            try:
                page = self.client.inbox(after, wait=None if more else self.poll_wait, cancel=stop)
            except Cancelled:
                break
            except IACPError as e:
                if not connected or not e.retryable:
                    raise
                log.warning("the inbox of %s: %s; trying again in %gs", self.client.addr, e, backoff)
                if stop.wait(backoff):
                    break
                backoff = min(backoff * 2, 10.0)
                after, more = 0, False  # a restarted node may number its inbox anew
                continue
            connected, backoff = True, 0.5
            for item in page.messages:
                if stop.is_set() or (max_messages is not None and taken >= max_messages):
                    break
                if self.handle(item):
                    taken += 1
            after, more = page.next_after, page.more
        return taken


class AsyncAgent(_Dispatch):
    """The agent loop over an :class:`iacp.AsyncClient`. Handlers may be coroutine
    functions (awaited) or plain functions (called in the event loop: run blocking work
    with ``asyncio.to_thread``). Messages are handled one at a time, in order."""

    def __init__(self, client: Any, *, poll_wait: float = 25.0, ack_unhandled: bool = True) -> None:
        super().__init__(poll_wait, ack_unhandled)
        self.client = client

    async def handle(self, item: InboxItem) -> bool:
        """Handles one inbox item (see :meth:`Agent.handle`)."""
        msg = item.message
        h = self.handler_for(msg)
        if h is None:
            if not self.ack_unhandled:
                return False
            answer = self._unhandled(msg)
        else:
            try:
                result = h(msg)
                if inspect.isawaitable(result):
                    result = await result
                answer = self._outcome(msg, result)
            except Exception as e:
                answer = self._outcome(msg, exc=e)
        if answer is not None:
            try:
                await self.client.send_message(_answer(msg, answer[0], answer[1]))
            except NodeUnreachable:
                raise
            except IACPError as e:
                log.warning("could not answer %s from %s (%s); it stays in the inbox", msg.message_id,
                            msg.sender_id, e)
                return False
        try:
            await self.client.ack(item.message_id)
        except NodeUnreachable:
            raise
        except IACPError as e:
            if e.status != 404:
                raise
        return True

    async def run(self, stop_event: Optional[asyncio.Event] = None, max_messages: Optional[int] = None) -> int:
        """Takes and handles messages until ``stop_event`` (an ``asyncio.Event``) is set or
        ``max_messages`` were taken; returns how many were taken. Cancelling the task stops
        it too. Errors as in :meth:`Agent.run`."""
        taken = 0
        after, more, connected, backoff = 0, False, False, 0.5
        while not (stop_event is not None and stop_event.is_set()) and (max_messages is None or taken < max_messages):
            try:
                page = await self._poll(after, None if more else self.poll_wait, stop_event)
            except IACPError as e:
                if not connected or not e.retryable:
                    raise
                log.warning("the inbox of %s: %s; trying again in %gs", self.client.addr, e, backoff)
                if await _wait(stop_event, backoff):
                    break
                backoff = min(backoff * 2, 10.0)
                after, more = 0, False
                continue
            if page is None:  # stopped
                break
            connected, backoff = True, 0.5
            for item in page.messages:
                if (stop_event is not None and stop_event.is_set()) or (
                        max_messages is not None and taken >= max_messages):
                    break
                if await self.handle(item):
                    taken += 1
            after, more = page.next_after, page.more
        return taken

    async def _poll(self, after: int, wait: Optional[float], stop: Optional[asyncio.Event]) -> Any:
        poll = asyncio.ensure_future(self.client.inbox(after, wait=wait))
        if stop is None:
            return await poll
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({poll, stopper}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            poll.cancel()
            raise
        finally:
            stopper.cancel()
        if poll.done():
            return poll.result()
        poll.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poll
        return None


async def _wait(stop: Optional[asyncio.Event], seconds: float) -> bool:
    """Sleeps seconds, or less when stop is set; returns whether it is set."""
    if stop is None:
        await asyncio.sleep(seconds)
        return False
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()
