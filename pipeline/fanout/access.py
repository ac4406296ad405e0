"""Who may start, list, read and stop served responses, and what a POST body may be.

`serving_routes`, `chat_routes` and
``streamfold serve`` ask one hook, ``authorize(connection, action, response_id, meta)``, before they do
anything for a client:

- ``"start"``: a POST that starts a response (``response_id`` None; ``meta``: what the response will
  carry, ``{"owner": ...}`` when an ``owner`` hook names one);
- ``"list"``: ``GET /responses`` (``response_id`` None, ``meta`` empty); the list then holds only the
  responses ``"read"`` allows;
- ``"read"``: a response's status, events (SSE in any protocol, WebSocket, a chat resume);
- ``"stop"``: ``POST /responses/{id}/stop``.

``meta`` is the response's meta as the log keeps it, so the same check works in every process sharing a
Redis or NATS log; ``{}`` for an unknown id (the hook is asked before the 404: a refused client cannot tell
an unknown id from somebody else's). The hook returns a bool, or an awaitable of one; a refusal answers
403 in the route's error shape (a WebSocket: an ``ERROR`` message, then close 4403).

An ``owner(connection) -> str | None`` hook names who starts a response; the name is kept in the
response's meta under `OWNER_KEY` (``"owner"``). `owner_only` is the policy that lets each
principal see and stop only its own responses.

Without ``authorize``, `loopback_only` applies: only clients on this machine (127.0.0.0/8, ::1) are
served, and every one of them may start, list, read and stop every response. A route exposed to a
network needs a hook: `bearer_token` (one shared token), `owner_only` (per-user, from a
session or a token), or your own.

Bodies: every POST must be ``application/json`` (415 otherwise: a cross-site form or a no-cors ``fetch``
cannot send that type without a CORS preflight, so another site cannot make a browser start a model call
or stop a response), at most ``max_body_bytes`` (`DEFAULT_MAX_BODY_BYTES`; 413 over it), valid
UTF-8 JSON nested no deeper than the decoder allows (400). Routes of your own can apply the same rules
with `Access` and `read_json_body`.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias
from urllib.parse import urlsplit

import msgspec

from pipeline._jsonenc import json_problem
from pipeline.errors import ConfigurationError, StreamfoldError
from pipeline.fanout.serving._log import is_response_id

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from pipeline.fanout.serving._log import EventLog, ResponseStatus

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "OWNER_KEY",
    "Access",
    "AccessDenied",
    "Action",
    "Authorize",
    "BodyRefused",
    "Principal",
    "bearer_token",
    "declares_over",
    "decode_json_body",
    "is_loopback",
    "json_content_type",
    "loopback_only",
    "owner_only",
    "read_body",
    "read_json_body",
]

Action: TypeAlias = Literal["start", "list", "read", "stop"]
"""What a client asks to do; see the module docstring."""

Authorize: TypeAlias = Callable[
    ["HTTPConnection", Action, "str | None", Mapping[str, Any]], "bool | Awaitable[bool]"
]
"""``(connection, action, response_id, meta) -> allowed``: the routes' access hook."""

Principal: TypeAlias = Callable[["HTTPConnection"], "str | Awaitable[str | None] | None"]
"""``(connection) -> who``: a user name from a session cookie or a token; None for nobody."""

OWNER_KEY: Final = "owner"
"""The key of a response's meta that names its owner (set by the routes' ``owner`` hook)."""

DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""The largest POST body the serving and chat routes read (a chat POST carries the whole history)."""

_LOOPBACK_HELP: Final = (
    "without authorize=, the serving routes serve only clients on this machine (127.0.0.0/8, ::1);"
    " pass authorize= (a session or token check, see pipeline.fanout.access) to serve others"
)


class AccessDenied(StreamfoldError):
    """The routes' ``authorize`` hook refused an action: HTTP 403, WebSocket close 4403.

    Args:
        message: what was refused, and why.
        action: the action refused.
        response_id: the response it was about; None for ``start`` and ``list``.
    """

    def __init__(self, message: str, *, action: Action, response_id: str | None) -> None:
        super().__init__(message)
        self.action = action
        self.response_id = response_id


def is_loopback(connection: HTTPConnection) -> bool:
    """Whether the client's address is on this machine (127.0.0.0/8 or ::1, IPv4-mapped too)."""
    client = connection.client
    if client is None:
        return False
    try:
        address = ipaddress.ip_address(client.host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _cross_site_websocket(connection: HTTPConnection) -> bool:
    """A WebSocket handshake whose ``Origin`` is another site than its ``Host``: browsers apply no CORS
    to WebSockets, so a page of any site could otherwise read responses from a local server."""
    if connection.scope.get("type") != "websocket":
        return False
    origin = connection.headers.get("origin")
    if origin is None:
        return False  # not a browser
    return urlsplit(origin).netloc.lower() != connection.headers.get("host", "").lower()


def loopback_only(
    connection: HTTPConnection, action: Action, response_id: str | None, meta: Mapping[str, Any]
) -> bool:
    """The default policy: allow every action to clients on this machine, refuse everyone else.

    Also refused: a WebSocket opened by a page of another site (its ``Origin`` is not its ``Host``).
    Behind a reverse proxy on the same machine every client looks local unless the server rewrites the
    client address from ``X-Forwarded-For`` (uvicorn does, for proxies in ``forwarded_allow_ips``).

    Args:
        connection: the client's request or WebSocket.
        action: what it asks to do.
        response_id: the response it is about; None for ``start`` and ``list``.
        meta: the response's meta as the log keeps it (for ``start``: what the response will carry).

    Returns:
        Whether the client may.
    """
    return is_loopback(connection) and not _cross_site_websocket(connection)


def bearer_token(token: str, *, cookie: str | None = None) -> Authorize:
    """A policy allowing every action to a client that presents ``token``: ``Authorization: Bearer
    <token>``, or the cookie named ``cookie`` (browsers cannot set headers on ``EventSource`` or
    WebSocket). Compared in constant time.

    Args:
        token: the secret a client presents.
        cookie: the name of a cookie that may carry it too; None: the header only.

    Raises:
        ConfigurationError: an empty token.
    """
    if not token:
        raise ConfigurationError("bearer_token needs a non-empty token")
    expected = token.encode()

    def presented(connection: HTTPConnection) -> bytes | None:
        scheme, _, value = connection.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip().encode()
        if cookie is not None and cookie in connection.cookies:
            return connection.cookies[cookie].encode()
        return None

    def authorize(
        connection: HTTPConnection, action: Action, response_id: str | None, meta: Mapping[str, Any]
    ) -> bool:
        given = presented(connection)
        return given is not None and hmac.compare_digest(given, expected)

    return authorize


def owner_only(principal: Principal) -> Authorize:
    """A policy where each principal starts and lists, and reads and stops only what it owns.

    Give the same function as the routes' ``owner`` hook, so responses carry their owner:

        serving_routes(manager, start=start, authorize=owner_only(user), owner=user)

    Args:
        principal: names the caller of a connection (a session's user, a token's holder), or None:
            refused everything.
    """

    async def authorize(
        connection: HTTPConnection, action: Action, response_id: str | None, meta: Mapping[str, Any]
    ) -> bool:
        who = await _maybe_await(principal(connection))
        if who is None:
            return False
        if action in ("start", "list"):
            return True
        return bool(meta.get(OWNER_KEY) == who)

    return authorize


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Access:
    """The routes' hooks in one place: the ``authorize`` check, the ``owner`` hook, the body cap.

    Args:
        authorize: the access hook (`Authorize`); None: `loopback_only`.
        owner: names who starts a response, kept in its meta under `OWNER_KEY`; None: nobody.
        max_body_bytes: cap, in bytes, of a request body the routes read.

    Raises:
        ConfigurationError: ``max_body_bytes`` below 1.
    """

    __slots__ = ("authorize", "max_body_bytes", "owner")

    def __init__(self, authorize: Authorize | None, owner: Principal | None, max_body_bytes: int) -> None:
        if max_body_bytes < 1:
            raise ConfigurationError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
        self.authorize = authorize
        self.owner = owner
        self.max_body_bytes = max_body_bytes

    async def allows(
        self, connection: HTTPConnection, action: Action, response_id: str | None, meta: Mapping[str, Any]
    ) -> bool:
        """Whether a client may do an action: `authorize` decides, or only loopback clients may.

        Args:
            connection: the client's request or WebSocket.
            action: what it asks to do.
            response_id: the response it is about; None for ``start`` and ``list``.
            meta: the response's meta as the log keeps it (for ``start``: what the response will carry).
        """
        if self.authorize is None:
            return loopback_only(connection, action, response_id, meta)
        return bool(await _maybe_await(self.authorize(connection, action, response_id, meta)))

    async def check(
        self, connection: HTTPConnection, action: Action, response_id: str | None, meta: Mapping[str, Any]
    ) -> None:
        """Refuse an action unless ``authorize`` allows it.

        Args:
            connection: the client's request or WebSocket.
            action: what it asks to do.
            response_id: the response it is about; None for ``start`` and ``list``.
            meta: the response's meta as the log keeps it (for ``start``: what the response will carry).

        Raises:
            AccessDenied: the action is refused (the message names it and why).
        """
        if await self.allows(connection, action, response_id, meta):
            return
        what = {"start": "start a response", "list": "list responses"}.get(
            action, f"{action} response {response_id!r}"
        )
        if self.authorize is not None:
            raise AccessDenied(f"not allowed to {what}", action=action, response_id=response_id)
        if is_loopback(connection):
            why = (
                f"a WebSocket opened by a page of {connection.headers.get('origin')} is refused: browsers"
                " apply no CORS to WebSockets; pass authorize= to allow other sites"
            )
        else:
            client = connection.client.host if connection.client is not None else "unknown"
            why = f"client {client} is not on this machine: {_LOOPBACK_HELP}"
        raise AccessDenied(f"not allowed to {what}: {why}", action=action, response_id=response_id)

    async def check_response(
        self, connection: HTTPConnection, action: Action, log: EventLog, response_id: str
    ) -> ResponseStatus | None:
        """`check` with the response's meta as the log keeps it.

        The meta is empty for an unknown response: asked before anything else, so a refused client learns
        nothing, not even whether the id exists.

        Args:
            connection: the client's request or WebSocket.
            action: what it asks to do.
            log: the event log that holds the response.
            response_id: the response.

        Returns:
            The response's status; None when it is unknown (or the id one no backend can hold).

        Raises:
            AccessDenied: the action is refused.
        """
        status = await log.status(response_id) if is_response_id(response_id) else None
        await self.check(connection, action, response_id, status.meta if status is not None else {})
        return status

    async def start_meta(self, connection: HTTPConnection) -> dict[str, Any]:
        """The meta a response started by ``connection`` carries: its owner, when the hook names one."""
        if self.owner is None:
            return {}
        who = await _maybe_await(self.owner(connection))
        return {OWNER_KEY: who} if who is not None else {}


class BodyRefused(msgspec.Struct, frozen=True):
    """Why a POST body is not read: the HTTP status and the route's error body."""

    status: int
    error: dict[str, Any]


def _refusal(status: int, name: str, message: str) -> BodyRefused:
    return BodyRefused(status, {"type": "ERROR", "error": name, "message": message})


def json_content_type(connection: HTTPConnection) -> BodyRefused | None:
    """None for an ``application/json`` request, else the 415 to answer."""
    given = connection.headers.get("content-type")
    media_type = (given or "").split(";", 1)[0].strip().lower()
    if media_type == "application/json":
        return None
    return _refusal(
        415,
        "UnsupportedMediaType",
        f"a POST here takes content-type application/json, got {given or 'none'}",
    )


def declares_over(content_length: str | None, max_bytes: int) -> bool:
    """Whether a ``Content-Length`` header says the body is over a cap: only ASCII digits count
    (``str.isdigit`` takes ``²``), and 19 digits or more is over any cap (``int()`` refuses 4,301).

    Args:
        content_length: the header's value; None when absent.
        max_bytes: the cap, in bytes.
    """
    if content_length is None or not (content_length.isascii() and content_length.isdigit()):
        return False
    return len(content_length) > 18 or int(content_length) > max_bytes


async def read_body(
    connection: HTTPConnection, receive: Callable[[], Awaitable[Any]], max_bytes: int
) -> bytes | BodyRefused:
    """The request's body, or a 413 `BodyRefused` when it is over the cap (declared by
    ``Content-Length`` or as it arrives: nothing past the cap is read).

    Args:
        connection: the request.
        receive: the ASGI receive callable.
        max_bytes: the cap, in bytes.
    """
    too_large = _refusal(
        413, "PayloadTooLarge", f"the body is over the {max_bytes}-byte cap (max_body_bytes)"
    )
    if declares_over(connection.headers.get("content-length"), max_bytes):
        return too_large
    pieces: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: what came is all there is
        piece = message.get("body", b"")
        size += len(piece)
        if size > max_bytes:
            return too_large
        pieces.append(piece)
        if not message.get("more_body", False):
            break
    return b"".join(pieces)


async def read_json_body(
    connection: HTTPConnection, receive: Callable[[], Awaitable[Any]], max_bytes: int
) -> Any:
    """The request's JSON body, or a `BodyRefused`: 415 (not ``application/json``), 413 (over
    ``max_bytes``), 400 (not JSON, not UTF-8, nested too deep).

    Args:
        connection: the request.
        receive: the ASGI receive callable.
        max_bytes: the cap, in bytes.
    """
    refused = json_content_type(connection)
    if refused is not None:
        return refused
    body = await read_body(connection, receive, max_bytes)
    return body if isinstance(body, BodyRefused) else decode_json_body(body)


def decode_json_body(body: bytes) -> Any:
    """``body`` as JSON, or a 400 `BodyRefused` naming what is wrong with it."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as exc:  # (a lone surrogate escape: said so, not msgspec's "truncated")
        return _refusal(400, "StreamDecodeError", f"the body is {json_problem(exc, body, None)}")
    except UnicodeDecodeError:
        reason = _not_utf8(body)
    except RecursionError:
        reason = "it is nested deeper than the decoder allows"
    return _refusal(400, "StreamDecodeError", f"the body is not JSON: {reason}")


def _not_utf8(body: bytes) -> str:
    """Where ``body`` stops being UTF-8 (msgspec's own error counts within one string, not the body)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"it is not UTF-8: byte {body[exc.start]:#04x} at offset {exc.start} ({exc.reason})"
    return "it is not UTF-8"
