"""What a served route answers before its stream starts: the cursor it reads, the checks, the error shape.

Shared by `pipeline.fanout.web` and `pipeline.fanout.protocols`: every refusal is
``{"type": "ERROR", "error", "message"}`` with the status `status_code` gives it.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Final

import anyio

from pipeline._jsonenc import encode_json
from pipeline.errors import (
    ConfigurationError,
    EventLogFull,
    ResponseExists,
    ResponseGone,
    ResponseNotFound,
    ServingError,
    StreamfoldError,
)
from pipeline.fanout._asgi import Scope, Send, send_json_response
from pipeline.fanout.access import AccessDenied, BodyRefused
from pipeline.fanout.serving._log import EventLog, check_lookup_id

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

__all__ = [
    "answering",
    "check_readable",
    "error_response",
    "problem",
    "read_cursor",
    "send_problem",
    "status_code",
    "unexpected_response",
]

_CURSOR: Final = re.compile(r"[0-9]{1,18}")
_SHOWN_CHARS: Final = 40
"""How much of a refused cursor its error quotes (a header or query of any length is not echoed whole)."""
_logger = logging.getLogger("streamfold")
_STATUSES: Final = ((ResponseNotFound, 404), (ResponseGone, 410), (ResponseExists, 409), (AccessDenied, 403))


def problem(error: StreamfoldError) -> dict[str, Any]:
    """``error`` as the routes' JSON body (``first_id`` for a response no longer retained)."""
    body: dict[str, Any] = {"type": "ERROR", "error": type(error).__name__, "message": str(error)}
    if isinstance(error, ResponseGone):
        body["first_id"] = error.first_id
    return body


def status_code(error: StreamfoldError) -> int:
    """The HTTP status for an error answered at once: a log that cannot serve now (its server
    unreachable past its retries, the log closed, full) is the server's trouble, 503, not the client's."""
    for kind, status in _STATUSES:
        if isinstance(error, kind):
            return status
    return 503 if isinstance(error, ServingError) else 400


async def send_problem(send: Send, error: StreamfoldError) -> None:
    """Answer ``error`` at once, as a whole JSON response with its status."""
    await send_json_response(send, status_code(error), encode_json(problem(error)))


def error_response(error: StreamfoldError | BodyRefused, status: int | None = None) -> JSONResponse:
    """``error`` as the routes' JSON answer, by default with `status_code`'s status; a full log
    (503) says when to retry (``Retry-After``)."""
    from starlette.responses import JSONResponse

    if isinstance(error, BodyRefused):
        return JSONResponse(error.error, status_code=error.status)
    retry = {"Retry-After": str(error.retry_after)} if isinstance(error, EventLogFull) else None
    return JSONResponse(problem(error), status_code=status or status_code(error), headers=retry)


def unexpected_response(exc: Exception, doing: str) -> JSONResponse:
    """The answer to an exception no route expects while ``doing`` (a ``start`` that raised, a log's server
    refusing a command, a bug): logged with its traceback on the ``streamfold`` logger, answered 500 in
    the error shape, without its details."""
    _logger.error("serving: %s failed", doing, exc_info=exc)
    return error_response(StreamfoldError(f"{doing} failed on the server (its log says why)"), 500)


def answering(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` answering a refusal (403), a log that cannot serve (503) or any other failure (500)
    in the error shape."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except (AccessDenied, ServingError) as exc:
            return error_response(exc)
        except Exception as exc:  # (``start`` raising, a log's server refusing a command)
            return unexpected_response(exc, f"{request.method} {request.url.path}")

    return handle


def read_cursor(scope: Scope) -> int:
    """The id a reader has seen up to: the ``Last-Event-ID`` header (an ``EventSource`` reconnecting),
    else the ``after`` query parameter, else 0.

    Raises:
        ConfigurationError: the cursor is not 1 to 18 ASCII digits (``str.isdigit`` and ``int`` take
            superscripts and other scripts' digits: not here).
    """
    raw: str | None = None
    for name, value in scope.get("headers", ()):
        if name == b"last-event-id":
            raw = value.decode("latin-1").strip() or None  # (empty: as if absent, the query decides)
    if raw is None:
        from urllib.parse import parse_qs

        values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("after")
        raw = values[-1] if values else None
    if raw is None or raw == "":
        return 0
    if _CURSOR.fullmatch(raw) is None:
        shown = (
            repr(raw) if len(raw) <= _SHOWN_CHARS else f"{raw[:_SHOWN_CHARS]!r}... ({len(raw)} characters)"
        )
        raise ConfigurationError(f"a cursor (Last-Event-ID or ?after=) is an entry id >= 0, got {shown}")
    return int(raw)


async def check_readable(log: EventLog, response_id: str, after: int) -> None:
    """Raise what a reader of a response would get at once, so the endpoints answer 404 / 410 / 400
    before the stream starts.

    Args:
        log: the event log.
        response_id: the response.
        after: the reader's cursor.

    Raises:
        ResponseNotFound: the log does not know the response.
        ResponseGone: it expired, or ``after`` is older than what is retained.
        ConfigurationError: ``after`` is past the last id.
    """
    check_lookup_id(response_id)
    status = await log.status(response_id)
    if status is None:
        await _wait_for_creation(log, response_id)
        status = await log.status(response_id)
        if status is None:
            raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
    if after > status.last_id:
        raise ConfigurationError(
            f"cursor {after} is past the last entry ({status.last_id}) of response {response_id!r}"
        )
    if after < status.first_id - 1:
        raise ResponseGone(
            f"entries {after + 1} to {status.first_id - 1} of response {response_id!r} are no longer"
            f" retained; the oldest retained is {status.first_id}",
            response_id=response_id,
            first_id=status.first_id,
        )


async def _wait_for_creation(log: EventLog, response_id: str) -> None:
    """Give a response being created right now (another replica's POST) a moment to appear."""
    entries = log.read(response_id)
    try:
        with anyio.move_on_after(1.0):  # raises at once unless the response was created meanwhile
            await entries.__anext__()
    except StopAsyncIteration:
        pass
    finally:
        aclose = getattr(entries, "aclose", None)
        if aclose is not None:
            await aclose()
