"""The HTTP transport of the client: http.client with kept-alive connections.

Internal: use :class:`iacp.Client`. One Transport serves one node address; it keeps a few
idle connections (the node closes an idle one after 2 minutes; a connection idle for more
than 50 s, or that the node closed, is not used again) and is safe for concurrent use.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .errors import (
    ANSWER_TOO_LARGE,
    AnswerTooLarge,
    Cancelled,
    IACPError,
    NodeUnreachable,
    Timeout,
    error_class,
)

#: How often a call with a cancel event looks at it while it waits for the answer.
CANCEL_CHECK_SECONDS = 0.2
#: A kept-alive connection idle for longer is closed rather than used (the node's is 2 min).
MAX_IDLE_SECONDS = 50.0
#: At most this many idle connections are kept.
MAX_IDLE_CONNECTIONS = 8

_CONNECTION_LOST = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    ConnectionAbortedError, http.client.BadStatusLine)


class Answer:
    """One answer: its status, headers and body (bytes)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


def split_addr(addr: str) -> Tuple[str, str, int]:
    """Splits host:port or an http(s):// URL into (scheme, host, port)."""
    a = addr.strip()
    if "://" not in a:
        a = "http://" + a
    u = urllib.parse.urlsplit(a)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError("API address %r: give host:port (127.0.0.1:9700) or an http:// URL" % addr)
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname, port


class Transport:
    """Sends calls to one node address over kept-alive connections."""

    def __init__(self, addr: str, answer_limit: int) -> None:
        self.addr = addr
        self.scheme, self.host, self.port = split_addr(addr)
        self.answer_limit = answer_limit
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    # --- connections ---

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def _take(self, timeout: float) -> Tuple[http.client.HTTPConnection, bool]:
        """An idle connection that is still open (reused=True), or a new one."""
        now = time.monotonic()
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            sock = conn.sock
            if sock is None or now - since > MAX_IDLE_SECONDS or _readable(sock):
                conn.close()  # the node closed it (or will soon): readable means EOF here
                continue
            sock.settimeout(timeout)
            return conn, True
        return self._new(timeout), False

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections; calls still under way finish."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    # --- calls ---

    def call(
        self,
        method: str,
        path: str,
        body: Optional[bytes],
        headers: Dict[str, str],
        timeout: float,
        cancel: Optional[threading.Event] = None,
    ) -> Answer:
        """Sends one call and reads its whole answer. A connection reused from the pool that
        turns out closed is replaced once, for a GET, or when the call was not sent yet."""
        for attempt in (0, 1):
            conn, reused = self._take(timeout)
            sent = False
            try:
                conn.request(method, path, body=body, headers=headers)
                sent = True
                if cancel is not None:
                    _wait_answer(conn, timeout, cancel)
                resp = conn.getresponse()
                answer = self._read(resp, method, path)
            except (ConnectionRefusedError, socket.gaierror) as e:
                conn.close()
                raise _Refused(e) from e
            except socket.timeout as e:
                conn.close()
                raise Timeout("TIMEOUT", "the node at %s did not answer %s %s within %gs" % (
                    self.addr, method, _route(path), timeout), status=0, retryable=True) from e
            except _CONNECTION_LOST as e:
                conn.close()
                if reused and attempt == 0 and (method == "GET" or not sent):
                    continue
                raise NodeUnreachable(
                    "the node at %s closed the connection before it answered %s %s (%s)" % (
                        self.addr, method, _route(path), type(e).__name__),
                    hint="did it stop? check `iacp-node status`, or its log") from e
            except OSError as e:
                conn.close()
                raise _Refused(e) from e
            except BaseException:
                conn.close()
                raise
            if resp.will_close:
                conn.close()
            else:
                self._give(conn)
            return answer
        raise AssertionError("unreachable")

    def _read(self, resp: http.client.HTTPResponse, method: str, path: str) -> Answer:
        limit = self.answer_limit
        if resp.length is not None and resp.length > limit:
            resp.close()
            raise _too_large(method, path, str(resp.length), limit)
        body = resp.read(limit + 1)
        if len(body) > limit:
            resp.close()
            raise _too_large(method, path, "more than %d" % limit, limit)
        if not resp.isclosed():  # answer_limit + 1 bytes read exactly at the end
            resp.read()
        return Answer(resp.status, resp.headers, body)

    def open_stream(
        self, path: str, headers: Dict[str, str], timeout: float
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Opens a long-lived GET (the event stream) on a connection of its own."""
        conn = self._new(timeout)
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
        except (ConnectionRefusedError, socket.gaierror) as e:
            conn.close()
            raise _Refused(e) from e
        except socket.timeout as e:
            conn.close()
            raise Timeout("TIMEOUT", "the node at %s did not answer GET %s within %gs" % (
                self.addr, _route(path), timeout), status=0, retryable=True) from e
        except OSError as e:
            conn.close()
            raise _Refused(e) from e
        return conn, resp


class _Refused(Exception):
    """Internal: nothing listens at the address (the client turns it into NodeUnreachable)."""

    def __init__(self, err: BaseException) -> None:
        super().__init__(str(err))
        self.err = err


def _readable(sock: socket.socket) -> bool:
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


def _wait_answer(conn: http.client.HTTPConnection, timeout: float, cancel: threading.Event) -> None:
    """Waits until the answer starts to arrive, giving up when cancel is set (checked every
    CANCEL_CHECK_SECONDS) or after timeout. Nothing of the answer is read here, so
    getresponse() then reads it whole."""
    deadline = time.monotonic() + timeout
    sock = conn.sock
    while True:
        if cancel.is_set():
            conn.close()
            raise Cancelled("the call was cancelled")
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        r, _, _ = select.select([sock], [], [], min(CANCEL_CHECK_SECONDS, left))
        if r:
            return


def _route(path: str) -> str:
    return path.split("?", 1)[0]


def _too_large(method: str, path: str, size: str, limit: int) -> AnswerTooLarge:
    hint = "raise the client's answer_limit"
    if _route(path) == "/v1/inbox":
        hint = ("one message in the inbox is this large (the node's max_message_bytes is above "
                "the client's limit): read it with a client whose answer_limit is larger")
    return AnswerTooLarge(ANSWER_TOO_LARGE, "%s %s answered %s bytes, more than the %d this client reads" % (
        method, _route(path), size, limit), hint=hint)


def decode_error(answer: Answer, hint: str = "") -> IACPError:
    """The exception of an error answer: its IACP error document, or INTERNAL_ERROR with the
    body when it is none."""
    doc: Any = None
    try:
        doc = json.loads(answer.body)
    except ValueError:
        pass
    err = doc.get("error") if isinstance(doc, dict) else None
    retry_after = None
    ra = answer.headers.get("Retry-After") if answer.headers is not None else None
    if ra:
        try:
            retry_after = float(ra)
        except ValueError:
            pass
    if not isinstance(err, dict) or not err.get("code"):
        text = answer.body.decode("utf-8", "replace").strip()[:500]
        return IACPError("INTERNAL_ERROR", "HTTP %d: %s" % (answer.status, text), status=answer.status,
                         retry_after=retry_after, hint=hint)
    code = str(err.get("code"))
    if err.get("retry_after"):
        retry_after = float(err["retry_after"])
    cls = error_class(answer.status, code)
    return cls(code, str(err.get("message", "")), status=answer.status, retryable=err.get("retryable"),
               retry_after=retry_after, message_id=doc.get("message_id"), detail=err.get("detail"),
               hint=hint)
