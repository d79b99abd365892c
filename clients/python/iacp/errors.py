"""The exceptions of the library.

Every error answer of the node is an IACP error document,
``{"error": {"code", "message", "retryable", "retry_after"}, "message_id"}``, with an HTTP
status (docs/api.md, "Errors"). The client raises it as an :class:`IACPError`, or as the
subclass that names the case: :class:`Unauthorized` (401, a wrong token),
:class:`Timeout` (TIMEOUT). :class:`NodeUnreachable` is raised when no node answers at all.

Each exception carries the IACP code in ``code``. Two codes are the library's own, for
failures where no node answered: ``NODE_UNREACHABLE`` and ``ANSWER_TOO_LARGE``.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "IACPError",
    "NodeUnreachable",
    "Unauthorized",
    "Timeout",
    "AnswerTooLarge",
    "Cancelled",
    "CODES",
    "NODE_UNREACHABLE",
    "ANSWER_TOO_LARGE",
]

#: The IACP error codes, with whether a retry may succeed (protocol/errors.go).
CODES = {
    "VERSION_UNSUPPORTED": False,
    "IDENTITY_INVALID": False,
    "CAPABILITY_MISMATCH": False,
    "RATE_LIMITED": True,
    "TIMEOUT": True,
    "CHANNEL_UNKNOWN": False,
    "PAYLOAD_INVALID": False,
    "INTERNAL_ERROR": True,
    "AGENT_NOT_FOUND": True,
    "PERMISSION_DENIED": False,
    "DUPLICATE": False,
}

#: The library's code for "no node answered" (no IACP code fits: the node never spoke).
NODE_UNREACHABLE = "NODE_UNREACHABLE"
#: The library's code for an answer larger than the client reads.
ANSWER_TOO_LARGE = "ANSWER_TOO_LARGE"


class IACPError(Exception):
    """An IACP error: one the node answered, or one an agent raises to refuse a request.

    Raise it in an :class:`iacp.Agent` handler to answer a request with an ``error``
    message of that code; the client raises it for every error document the node answers.

    Attributes:
        code: the IACP code, e.g. ``"PAYLOAD_INVALID"``, ``"AGENT_NOT_FOUND"``.
        message: what the node (or the agent) said.
        status: the HTTP status of the answer (0 when no node answered).
        retryable: whether trying again later may succeed.
        retry_after: seconds to wait before a retry (RATE_LIMITED), or None.
        message_id: the id of the message the error is about, when there is one.
        detail: the error's ``detail`` member, when it has one.
        hint: what the library adds about what to do, or "".
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        status: int = 0,
        retryable: Optional[bool] = None,
        retry_after: Optional[float] = None,
        message_id: Optional[str] = None,
        detail: Any = None,
        hint: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.status = status
        self.retryable = CODES.get(code, False) if retryable is None else bool(retryable)
        self.retry_after = retry_after
        self.message_id = message_id
        self.detail = detail
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        s = self.code
        if self.message:
            s += ": " + self.message
        if self.status:
            s += " (HTTP %d)" % self.status
        if self.hint:
            s += "; " + self.hint
        return s

    def __repr__(self) -> str:
        return "%s(code=%r, message=%r, status=%r, message_id=%r)" % (
            type(self).__name__, self.code, self.message, self.status, self.message_id)

    def to_payload(self) -> dict:
        """The payload of an ``error`` message that carries this error."""
        p: dict = {"code": self.code, "message": self.message, "retryable": self.retryable}
        if self.retry_after:
            p["retry_after"] = self.retry_after
        if self.detail is not None:
            p["detail"] = self.detail
        return p


class NodeUnreachable(IACPError):
    """No node answers where the client looked: none runs, or it stopped meanwhile.

    Its code is ``NODE_UNREACHABLE`` (the library's own) and its message says what to do.
    """

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(NODE_UNREACHABLE, message, status=0, retryable=True, hint=hint)


class Unauthorized(IACPError):
    """The node refused the client's token (HTTP 401, ``IDENTITY_INVALID``)."""


class Timeout(IACPError):
    """``TIMEOUT``: no reply came in time (HTTP 504), or the node did not answer within the
    client's own timeout (status 0)."""


class AnswerTooLarge(IACPError):
    """The node answered more bytes than the client reads (``answer_limit``); nothing was
    parsed. Its code is ``ANSWER_TOO_LARGE`` (the library's own)."""


class Cancelled(Exception):
    """A call was abandoned because its ``cancel`` event was set (not an IACP error)."""


def error_class(status: int, code: str) -> type:
    """The IACPError subclass for an error answer of this status and code."""
    if status == 401:
        return Unauthorized
    if code == "TIMEOUT":
        return Timeout
    return IACPError
