"""Served responses in the browsers' protocols: the Vercel AI SDK UI message stream and AG-UI.

Two ways in, both over an event log (`pipeline.fanout.serving`), so every response is detached from
its clients, resumable, and readable from any replica:

- ``GET /responses/{id}/events?protocol=vercel|agui|streamfold``
  (`serving_routes`): the same response in any protocol.
  ``streamfold`` (the default) is the log's own JSON.
- `chat_routes`: what the frameworks' clients call. ``POST {path}`` with the body ``useChat``'s
  ``DefaultChatTransport`` sends (``{id, messages, trigger, messageId, ...}``) or AG-UI's ``HttpAgent``
  sends (``RunAgentInput``: ``{threadId, runId, messages, tools, ...}``) runs the user's function, starts
  a response and answers with its stream in the protocol; for Vercel, ``GET {path}/{chatId}/stream`` is
  the AI SDK's resume (``useChat({resume: true})``): the chat's running response from its start, or 204
  when there is none.

Ids and resume: each SSE event carries ``id: N`` on the last frame an entry of the log gives, so an
``EventSource`` (or any client sending ``Last-Event-ID`` / ``?after=N``) resumes exactly after entry
``N``. The protocols' encoders are stateful (a UI message is one stream), so a reader that resumes
after ``N`` has entries ``1..N`` fed to a fresh encoder silently first: resuming costs a read of the
response so far, and needs the log to still hold it from entry 1, else 410 Gone with ``first_id``. An
error that ends one connection but not the response (the producer lost, a client too slow) is the
protocol's error event without an ``id:``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec

from pipeline.errors import (
    ConfigurationError,
    ResponseExists,
    ResponseGone,
    ServingError,
    StreamfoldError,
)
from pipeline.fanout._answers import (
    check_readable,
    error_response,
    read_cursor,
    send_problem,
    unexpected_response,
)
from pipeline.fanout._asgi import serve_connection
from pipeline.fanout.access import (
    DEFAULT_MAX_BODY_BYTES,
    Access,
    AccessDenied,
    Authorize,
    BodyRefused,
    Principal,
    read_json_body,
)
from pipeline.fanout.serving._edge import Edge
from pipeline.fanout.serving._log import Entry, EventLog
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.runs import DurableRuns

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from operators.encode.protocols import UICore, WireEncoding
    from pipeline.fanout.hub import Policy
    from pipeline.models import ToolApproval

__all__ = [
    "CHAT_PROTOCOLS",
    "MAX_CHAT_ID_CHARS",
    "ChatStarter",
    "ProtocolStream",
    "chat_routes",
    "query_protocol",
]

CHAT_PROTOCOLS: Final = ("vercel", "agui")
MAX_CHAT_ID_CHARS: Final = 256
"""The longest chat id (``id``, AG-UI ``threadId``) or continued message id a chat request may carry:
each is kept in its response's meta, beside every response the log holds; a longer one is refused (400)."""

ChatStarter = Callable[[Any], Awaitable[Any]]
"""``async (request_json) -> source``: the user's function a chat ``POST`` calls (an SDK stream,
``process(...)``, any async iterable of pipeline items); for `DurableRuns`, ``async
(request_json) -> messages``: the conversation the durable run starts from."""

_Scope = Any
_Receive = Callable[[], Awaitable[Any]]
_Send = Callable[[Any], Awaitable[None]]


def query_protocol(scope: _Scope) -> str | None:
    """The ``protocol`` query parameter, or None."""
    from urllib.parse import parse_qs

    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("protocol")
    return values[-1] if values else None


class ProtocolStream:
    """Streams one response of a log in one protocol to one connection (see the module doc).

    Args:
        log: the event log the responses are in.
        policy: each connection's buffer policy when the client reads slower than the response.
        max_buffer: each connection's buffer, in items.
        max_buffer_bytes: each connection's buffer, in bytes.
        send_timeout: seconds one send to the client may take before the client is dropped; None: no
            bound.
        heartbeat: seconds between keep-alive comments on an idle stream; None: none.
        access: the access hooks; None: `loopback_only`.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        policy: Policy,
        max_buffer: int,
        max_buffer_bytes: int,
        send_timeout: float | None,
        heartbeat: float | None,
        access: Access | None = None,
    ) -> None:
        self.log = log
        self.access = access if access is not None else Access(None, None, DEFAULT_MAX_BODY_BYTES)
        self.policy = policy
        self.max_buffer = max_buffer
        self.max_buffer_bytes = max_buffer_bytes
        self.send_timeout = send_timeout
        self.heartbeat = heartbeat

    async def prepare(
        self, response_id: str, protocol: str, after: int, core_options: Mapping[str, Any]
    ) -> tuple[WireEncoding, UICore]:
        """The encoding and a core fed with entries ``1..after``, or the error to answer with at once.

        Args:
            response_id: the response.
            protocol: ``vercel`` or ``agui``.
            after: the reader's cursor.
            core_options: options of the protocol's encoder core.

        Raises:
            ConfigurationError: an unknown protocol, a bad cursor.
            ResponseNotFound: the log does not know the response.
            ResponseGone: it expired, or ``after`` is older than what is retained.
        """
        from operators.encode.protocols import encoder_for

        encoding = encoder_for(protocol)
        await check_readable(self.log, response_id, after)
        status = await self.log.status(response_id)
        if status is not None and status.first_id > 1:
            raise ResponseGone(
                f"the {protocol} protocol replays response {response_id!r} from its start, but entries"
                f" 1 to {status.first_id - 1} are no longer retained",
                response_id=response_id,
                first_id=status.first_id,
            )
        # the response's own facts (the AG-UI thread a chat POST started it in) unless given
        options = {**_core_options(protocol, status.meta if status is not None else {}), **core_options}
        core = encoding.core(response_id=response_id, **options)
        if after > 0:
            entries = self.log.read(response_id, after=0)
            try:
                async for entry in entries:
                    _frames(core, entry)
                    if entry.id >= after:
                        break
            finally:
                aclose = getattr(entries, "aclose", None)
                if aclose is not None:
                    await aclose()
        return encoding, core

    async def serve(
        self,
        scope: _Scope,
        receive: _Receive,
        send: _Send,
        *,
        response_id: str,
        protocol: str,
        after: int | None = None,
        core_options: Mapping[str, Any] = {},
        status: int = 200,
        check_read: bool = True,
    ) -> None:
        """Answer the request: 4xx JSON at once, or the stream from ``after`` on.

        Args:
            scope: the ASGI scope.
            receive: the ASGI receive callable.
            send: the ASGI send callable.
            response_id: the response.
            protocol: ``vercel`` or ``agui``.
            after: the reader's cursor; None: the request's (``Last-Event-ID`` or ``?after=``), read once
                the client may read the response.
            core_options: options of the protocol's encoder core.
            status: the HTTP status of the stream's answer.
            check_read: ask the access hook whether this client may read the response (False for the
                POST that started it). It is asked first: a client that may not read learns nothing of
                its request's other faults.
        """
        from starlette.requests import HTTPConnection

        try:
            if check_read:
                await self.access.check_response(HTTPConnection(scope), "read", self.log, response_id)
            if after is None:
                after = read_cursor(scope)
            encoding, core = await self.prepare(response_id, protocol, after, core_options)
        except (ConfigurationError, ServingError, AccessDenied) as exc:
            await send_problem(send, exc)
            return
        headers = [(name.encode(), value.encode()) for name, value in encoding.headers]
        edge = Edge(policy=self.policy, max_buffer=self.max_buffer, max_bytes=self.max_buffer_bytes)
        # a client that took nothing for send_timeout is dropped, as the JSON routes do
        await serve_connection(
            scope,
            receive,
            send,
            edge.take_or_raise,
            _ProtocolFramer(core),
            heartbeat=self.heartbeat,
            send_timeout=self.send_timeout,
            start={"type": "http.response.start", "status": status, "headers": headers},
            fill=partial(edge.fill, self.log.read(response_id, after=after)),
        )


class _ProtocolFramer:
    """A log's entries through a browser protocol's encoder core, over SSE.

    ``id: N`` goes on the last frame an entry gives; a connection cut off by an error (not the
    response's own) ends with the protocol's error event, without an id.
    """

    __slots__ = ("close_code", "close_reason", "core", "finished")

    def __init__(self, core: UICore) -> None:
        self.core = core
        self.finished = False
        self.close_code = 1000
        self.close_reason = ""

    def frame(self, entry: Entry) -> bytes:
        produced = _frames(self.core, entry)
        if entry.end:
            self.finished = True
        if not produced:
            return b""
        produced[-1] = b"id: %d\n" % entry.id + produced[-1]
        return b"".join(produced)

    def end(self) -> bytes:
        return b""

    def error(self, error: BaseException) -> bytes:
        return b"".join(self.core.error(_message(error)))


def _message(error: BaseException) -> str:
    return str(error) if isinstance(error, StreamfoldError) else f"the stream failed ({type(error).__name__})"


def _frames(core: UICore, entry: Entry) -> list[bytes]:
    """What ``core`` gives for one log entry; the terminal entry finishes (or fails) the stream."""
    if entry.end:
        if entry.error is None:
            return core.finish()
        return core.error(str(entry.error.get("message") or entry.error.get("type") or "failed"))
    try:
        item = msgspec.json.decode(entry.data or b"null")
    except msgspec.DecodeError as exc:
        return core.error(f"entry {entry.id} of the log is not JSON: {exc}")
    return core.feed(item)


def chat_routes(
    manager: ResponseManager | DurableRuns,
    start: ChatStarter,
    *,
    path: str = "/api/chat",
    protocol: str = "vercel",
    policy: Policy = "coalesce_or_disconnect",
    max_buffer: int = 64,
    max_buffer_bytes: int = 1024 * 1024,
    send_timeout: float | None = 10.0,
    heartbeat: float | None = None,
    authorize: Authorize | None = None,
    owner: Principal | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> list[BaseRoute]:
    """Starlette routes a framework's client calls; see the module doc.

    Args:
        manager: runs each response detached, in its event log.
        start: given the request's body, the response's source.
        path: where the routes are.
        protocol: ``vercel`` (the AI SDK's ``useChat``) or ``agui``.
        policy: each connection's buffer policy when the client reads slower than the response.
        max_buffer: each connection's buffer, in items.
        max_buffer_bytes: each connection's buffer, in bytes.
        send_timeout: seconds one send to the client may take before the client is dropped; None: no
            bound.
        heartbeat: seconds between keep-alive comments on an idle stream; None: none.
        authorize: decides who may start and resume responses; None: only clients on this machine.
        owner: names who starts a response.
        max_body_bytes: the largest request body accepted.

    Returns:
        The routes, for a Starlette app.

    The routes:

    - ``POST {path}``: ``await start(body)`` gives the source; the response runs detached in ``manager``
      (a client that goes away does not stop it: stop it with ``POST /responses/{id}/stop`` of
      `serving_routes`); the answer is its stream in ``protocol``, with the
      header ``x-streamfold-response-id``. A body that is not a JSON object, or a ``ConfigurationError``
      from ``start``: 400; another streamfold error from ``start`` (the provider refused): 502; a log
      with no room for another running response (``MemoryEventLog``'s ``max_responses``): 503 with
      ``Retry-After``, before ``start`` is called; a log whose server stays unreachable: 503. Errors are
      ``{"type": "ERROR", "error", "message"}``.
    - With `DurableRuns` in place of the manager, the POST runs
      no model: ``await start(body)`` gives the conversation, and the run is queued on the log with
      it and the tool approval decisions the body brings (the AI SDK's ``approval-responded`` tool
      parts, AG-UI's ``resume``), for a worker process to take
      (`serve_runs`); the answer is the run read back from the log,
      resumable like any response. The error shapes are the same (``start``'s ``ConfigurationError``
      or a decision that does not parse: 400).
    - A repeated AG-UI ``runId`` (a client retrying) does not call ``start`` again: the answer is that
      run's stream from its start, as for a first request, while the run is retained and was started
      by this route in the same ``threadId``; else 409 (a runId names one run).
    - ``GET {path}/{chat_id}/stream`` (``vercel`` only): the chat's newest running response from its
      start, 204 when none runs (the AI SDK's ``reconnectToStream``).

    ``vercel``: the chat id is the body's ``id``, the UI message's id the response id (or, when the
    request's last message is the assistant's, which the AI SDK continues after a tool approval, that
    message's id). ``agui``: the
    thread id is ``threadId``; the response id is ``runId`` (new when the body has none): a ``runId``
    that is not a valid response id (see `RESPONSE_ID_PATTERN`)
    answers 400 before ``start`` is called.

    Access, as in ``serving_routes`` (`pipeline.fanout.access`): ``authorize`` decides the POST
    (``start``) and the resume (``read``: only responses the caller may read are resumed), 403 when
    refused; without it only clients on this machine are served. ``owner`` names who starts a response.
    The POST must be ``application/json`` (else 415) and at most ``max_body_bytes`` (else 413).
    """
    from pipeline._extras import needs_extra

    with needs_extra("server", "pipeline.fanout.protocols.chat_routes"):
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

    if protocol not in CHAT_PROTOCOLS:
        raise ConfigurationError(f"chat_routes serves {' or '.join(CHAT_PROTOCOLS)}, not {protocol!r}")
    log = manager.log
    access = Access(authorize, owner, max_body_bytes)
    streams = ProtocolStream(
        log,
        policy=policy,
        max_buffer=max_buffer,
        max_buffer_bytes=max_buffer_bytes,
        send_timeout=send_timeout,
        heartbeat=heartbeat,
        access=access,
    )

    async def refuse(
        scope: _Scope,
        receive: _Receive,
        send: _Send,
        error: StreamfoldError | BodyRefused,
        status: int | None = None,
    ) -> None:
        """Answer ``error`` in the routes' error shape, with ``status`` or the error's own."""
        await error_response(error, status)(scope, receive, send)

    async def answer(
        scope: _Scope,
        receive: _Receive,
        send: _Send,
        response_id: str,
        *,
        after: int = 0,
        check_read: bool = True,
    ) -> None:
        """The response's stream in ``protocol``, with ``x-streamfold-response-id`` (the AG-UI thread
        comes from the response's meta: see `ProtocolStream.prepare`)."""
        await streams.serve(
            scope,
            receive,
            _with_header(send, response_id),
            response_id=response_id,
            protocol=protocol,
            after=after,
            check_read=check_read,
        )

    class PostChat:
        async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
            request = Request(scope, receive)
            owned = await access.start_meta(request)
            try:
                await access.check(request, "start", None, owned)
            except AccessDenied as exc:
                await refuse(scope, receive, send, exc)
                return
            body = await read_json_body(request, receive, access.max_body_bytes)
            if isinstance(body, BodyRefused):
                await refuse(scope, receive, send, body)
                return
            if not isinstance(body, dict):
                error = ConfigurationError(f"the body is a JSON object, got {type(body).__name__}")
                await refuse(scope, receive, send, error)
                return
            run_id = body.get("runId") if protocol == "agui" else None
            response_id = uuid.uuid4().hex if run_id is None else run_id  # start() checks it: else 400
            try:
                meta = _chat_meta(body, protocol, owned)
                if isinstance(manager, DurableRuns):  # a worker process runs it: see serve_runs
                    decided = _decisions(body, protocol)
                    await manager.queue(
                        lambda: start(body), response_id=response_id, meta=meta, approvals=decided
                    )
                else:
                    await manager.start(lambda: start(body), response_id=response_id, meta=meta)
            except ResponseExists as exc:  # a repeated AG-UI runId: that run again, not a second one
                await self.repeated(scope, receive, send, exc.response_id, meta)
                return
            except (ConfigurationError, ServingError) as exc:  # 400; full (before the model call), down: 503
                await refuse(scope, receive, send, exc)
                return
            except StreamfoldError as exc:  # the upstream refused
                await refuse(scope, receive, send, exc, 502)
                return
            except Exception as exc:  # (``start`` raising, a log's server refusing a command): 500
                await unexpected_response(exc, f"starting a {protocol} chat")(scope, receive, send)
                return
            await answer(scope, receive, send, response_id, check_read=False)  # its starter reads it

        async def repeated(
            self, scope: _Scope, receive: _Receive, send: _Send, run_id: str, meta: dict[str, Any]
        ) -> None:
            """A ``runId`` already used: the run from its start when this thread's AG-UI run made it (a
            client retrying a request), else 409."""
            try:
                status = await log.status(run_id)
            except ServingError as exc:  # the log's server unreachable: 503
                await refuse(scope, receive, send, exc)
                return
            if status is None or (status.meta.get("protocol"), status.meta.get("chat_id")) != (
                meta["protocol"],
                meta["chat_id"],
            ):
                why = "has ended and is no longer retained" if status is None else "exists in another thread"
                conflict = ResponseExists(f"run {run_id!r} {why}; a runId names one run", response_id=run_id)
                await refuse(scope, receive, send, conflict)
                return
            await answer(scope, receive, send, run_id)  # read as the run's owner allows

    class ResumeChat:
        async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
            request = Request(scope, receive)
            chat_id = scope["path_params"]["chat_id"]
            try:  # a caller who may list learns only of the responses it may read: none is a 204
                await access.check(request, "list", None, {})
                after = read_cursor(scope)
                active = await log.active()
            except (ConfigurationError, AccessDenied, ServingError) as exc:  # 403, 400, log down: 503
                await refuse(scope, receive, send, exc)
                return
            readable = [
                status
                for status in active
                if status.state == "running"
                and status.meta.get("chat_id") == chat_id
                and await access.allows(request, "read", status.response_id, status.meta)
            ]
            if not readable:
                await Response(status_code=204)(scope, receive, send)
                return
            newest = readable[-1]
            await answer(scope, receive, send, newest.response_id, after=after)

    routes: list[BaseRoute] = [Route(path, PostChat(), methods=["POST"])]
    if protocol == "vercel":
        routes.append(Route(f"{path}/{{chat_id}}/stream", ResumeChat(), methods=["GET"]))
    return routes


def _core_options(protocol: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    if protocol == "agui" and isinstance(meta.get("chat_id"), str):
        return {"thread_id": meta["chat_id"]}
    if protocol == "vercel" and isinstance(meta.get("message_id"), str):
        return {"message_id": meta["message_id"]}
    return {}


def _decisions(body: Mapping[str, Any], protocol: str) -> list[ToolApproval]:
    """The tool approval decisions a chat request brings (``ConfigurationError`` when they do not
    parse)."""
    if protocol == "vercel":
        from operators.encode.vercel import vercel_approvals

        return vercel_approvals(body.get("messages"))
    from operators.encode.agui import agui_approvals

    return agui_approvals(body)


def _chat_meta(body: Mapping[str, Any], protocol: str, owned: Mapping[str, Any]) -> dict[str, Any]:
    """The meta of a chat request's response: its protocol, the chat's id (``id``, AG-UI ``threadId``),
    the id of the message it continues (`_continued_message`), and ``owned`` (who started it).

    Raises:
        ConfigurationError: an id that is not a string, or longer than `MAX_CHAT_ID_CHARS` (meta is kept
            beside each response).
    """
    key = "id" if protocol == "vercel" else "threadId"
    chat_id = body.get(key)
    if chat_id is not None and not isinstance(chat_id, str):
        raise ConfigurationError(f"{key} is a string, got {type(chat_id).__name__}")
    meta = {"protocol": protocol, "chat_id": chat_id, **owned}
    continued = _continued_message(body) if protocol == "vercel" else None
    if continued is not None:  # the AI SDK continues its last assistant message (an approval)
        meta["message_id"] = continued
    for key, name in (("chat_id", "the chat's id"), ("message_id", "the continued message's id")):
        value = meta.get(key)
        if isinstance(value, str) and len(value) > MAX_CHAT_ID_CHARS:
            raise ConfigurationError(f"{name} is at most {MAX_CHAT_ID_CHARS} characters, got {len(value)}")
    return meta


def _continued_message(body: Mapping[str, Any]) -> str | None:
    """The id of the assistant message a ``useChat`` request continues (its last message, sent back
    with tool approval responses or client tool outputs), or None."""
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    if isinstance(last, Mapping) and last.get("role") == "assistant" and isinstance(last.get("id"), str):
        return str(last["id"])
    return None


def _with_header(send: _Send, response_id: str) -> _Send:
    """``send`` adding ``x-streamfold-response-id`` to a 200 response's headers."""

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 200:
            message = {
                **message,
                "headers": [*message["headers"], (b"x-streamfold-response-id", response_id.encode())],
            }
        await send(message)

    return sending
