"""The wire protocols a response can be served in, and `encoder_for`, which a route uses to pick one.

=============  =================================================  ==========================================
protocol       core                                               for
=============  =================================================  ==========================================
``streamfold`` `StreamfoldSSEEncoder` (each item's JSON)   streamfold's own clients, the web page
``vercel``     `VercelUIEncoder`  the AI SDK's ``useChat`` (UI message stream)
``agui``       `AGUIEncoder`        AG-UI clients (CopilotKit, ...)
=============  =================================================  ==========================================

Every core takes pipeline items or their ``to_dict()`` JSON (what a served response's log holds) and gives
whole SSE events as bytes: ``feed(item)``, ``finish()`` at the end, ``abort(exc)`` or ``error(message)``
on a failure. A route builds one core per connection with ``encoding.core(response_id=...)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Final, Literal, Protocol, TypeAlias, get_args

import msgspec
from aiostream import pipable_operator

from operators.encode._ui import error_text
from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError, StreamfoldError
from pipeline.stage import operator_stream

__all__ = [
    "PROTOCOLS",
    "STREAMFOLD_HEADERS",
    "StreamfoldSSEEncoder",
    "UICore",
    "WireEncoding",
    "WireProtocol",
    "encode_streamfold",
    "encoder_for",
]

WireProtocol: TypeAlias = Literal["streamfold", "vercel", "agui"]
PROTOCOLS: Final[tuple[str, ...]] = get_args(WireProtocol)

STREAMFOLD_HEADERS: Final = (
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)
_END: Final = b'event: end\ndata: {"type":"END"}\n\n'


class UICore(Protocol):
    """What every protocol's core offers (a `Core` from items to SSE bytes)."""

    def feed(self, item: Any, /) -> list[bytes]: ...

    def finish(self) -> list[bytes]: ...

    def abort(self, exc: BaseException) -> list[bytes]: ...

    def error(self, message: str) -> list[bytes]: ...


class StreamfoldSSEEncoder:
    """Sans-IO core: each item as ``data: <its to_dict() JSON>``; ``event: end`` at the end, ``event:
    error`` with ``{"type": "ERROR", "error", "message"}`` on a failure (the web routes' format)."""

    __slots__ = ("_done",)

    def __init__(self) -> None:
        self._done = False

    def feed(self, item: Any) -> list[bytes]:
        """One frame per item (an item that is already a dict is written as it is)."""
        if self._done:
            return []
        to_dict = getattr(item, "to_dict", None)
        value = (
            to_dict()
            if to_dict is not None
            else item
            if isinstance(item, dict)
            else msgspec.to_builtins(item)
        )
        return [b"data: " + encode_json(value) + b"\n\n"]

    def finish(self) -> list[bytes]:
        """``event: end``."""
        if self._done:
            return []
        self._done = True
        return [_END]

    def abort(self, exc: BaseException) -> list[bytes]:
        """``event: error`` naming the exception's class (its message only for streamfold's errors)."""
        message = str(exc) if isinstance(exc, StreamfoldError) else error_text(exc)
        return self.error(message, code=type(exc).__name__)

    def error(self, message: str, *, code: str = "StreamfoldError") -> list[bytes]:
        """``event: error`` with ``message``.

        Args:
            message: what went wrong.
            code: the event's ``error`` field, an exception's name.

        Returns:
            The frame to send; nothing once the stream ended.
        """
        if self._done:
            return []
        self._done = True
        body = encode_json({"type": "ERROR", "error": code, "message": message})
        return [b"event: error\ndata: " + body + b"\n\n"]


class WireEncoding(msgspec.Struct, frozen=True):
    """A protocol as a route serves it: how to make a core, and the response's media type and headers."""

    protocol: str
    core: Callable[..., UICore]
    """``core(response_id=None, **options)``: a fresh core for one connection."""
    media_type: str
    headers: tuple[tuple[str, str], ...]
    """All response headers, ``content-type`` included."""


def _streamfold(response_id: str | None = None) -> UICore:
    del response_id
    return StreamfoldSSEEncoder()


def _vercel(response_id: str | None = None, **options: Any) -> UICore:
    from operators.encode.vercel import VercelUIEncoder

    options.setdefault("message_id", response_id)  # a continued message keeps its own id
    return VercelUIEncoder(**options)


def _agui(response_id: str | None = None, **options: Any) -> UICore:
    from operators.encode.agui import AGUIEncoder

    return AGUIEncoder(run_id=response_id, **options)


def encoder_for(protocol: str) -> WireEncoding:
    """The `WireEncoding` of ``protocol`` (``streamfold``, ``vercel`` or ``agui``).

    ``vercel``'s core takes ``provider=`` and ``extras=``, ``agui``'s ``thread_id=`` and ``extras=``;
    ``response_id`` becomes the Vercel ``messageId`` (unless ``message_id=`` is given) / the AG-UI ``runId``.

    Raises:
        ConfigurationError: an unknown protocol.
    """
    if protocol == "streamfold":
        return WireEncoding("streamfold", _streamfold, "text/event-stream", STREAMFOLD_HEADERS)
    if protocol == "vercel":
        from operators.encode.vercel import VERCEL_HEADERS

        return WireEncoding("vercel", _vercel, "text/event-stream", VERCEL_HEADERS)
    if protocol == "agui":
        from operators.encode.agui import AGUI_HEADERS

        return WireEncoding("agui", _agui, "text/event-stream", AGUI_HEADERS)
    raise ConfigurationError(f"unknown wire protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")


@pipable_operator
def encode_streamfold(source: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    """Pipeline items -> streamfold's own SSE frames (see `StreamfoldSSEEncoder`)."""
    return operator_stream(source, StreamfoldSSEEncoder())
