"""``streamfold serve``: a bundled web page showing a response live, over the serving routes.

::

    streamfold serve --demo [--stream NAME]          # a bundled recorded stream, no network
    streamfold serve FILE [--provider ...]           # a recorded file, replayed afresh per response
    streamfold serve --upstream URL --model NAME     # a live OpenAI-compatible server or streamfold proxy

The app (`create_serve_app`) is the page (``/``, ``/static/...``: plain HTML, CSS and JS in
``pipeline/cli/web``, no build step), ``/config`` (what it serves) and
`serving_routes` over an in-memory log: the page posts to ``/responses`` to
start a response, then reads
``/responses/{id}/events`` with ``EventSource``, which reconnects by itself with ``Last-Event-ID``; the page
shows the reconnect and the stream resumes exactly after the last event it got.

With ``tools`` (`create_serve_app`), each response's calls run on a
`run_tools` runner: a call of a ``start="approval"`` tool shows approve and deny
buttons on the page, which post the decision to ``POST /approvals/{call_id}`` (``{"approved": bool,
"reason"?: str}``); undecided after ``approval_timeout`` seconds, it is denied.

Who is served: without a token, clients on this machine only (the routes' loopback default), and only
requests addressed to it by a local name (``Host: localhost``, ``127.x.x.x``, ``[::1]``), so a page of
another site whose name resolves to 127.0.0.1 (DNS rebinding) is refused. With ``--token`` (or
``STREAMFOLD_SERVE_TOKEN``), every client presenting the token: ``Authorization: Bearer <token>``, or
the cookie the page sets when it is opened as ``/?token=<token>`` (the address the command prints).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import urlencode, urlsplit

from pipeline.errors import ConfigurationError, ProviderError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from pipeline.agent import ToolRegistry
    from pipeline.fanout.serving._log import EventLog, Retention

__all__ = [
    "DEFAULT_SERVE_SPEED",
    "STATIC_FILES",
    "TOKEN_COOKIE",
    "TOKEN_ENV",
    "SourceMaker",
    "create_serve_app",
    "is_loopback_host",
    "recorded_source",
    "run",
    "upstream_source",
]

DEFAULT_SERVE_SPEED: Final = 60.0
"""Provider events per second when replaying a recorded stream to the page (0: as fast as possible)."""

STATIC_FILES: Final = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
"""The page's files in ``pipeline/cli/web`` and their media types (nothing else is served from there)."""

TOKEN_ENV: Final = "STREAMFOLD_SERVE_TOKEN"
"""The environment variable ``streamfold serve`` takes its token from when ``--token`` is not given."""

TOKEN_COOKIE: Final = "streamfold_token"
"""The cookie (HttpOnly, SameSite=Strict) that carries the token for the page's own requests."""

SourceMaker = Callable[[Mapping[str, Any]], AsyncIterator[Any]]
"""``(request_json) -> pipeline events``: one new response's source, from the page's ``POST`` body."""

_MAX_PROMPT_CHARS: Final = 32_000


def _static(name: str) -> bytes:
    return (resources.files("pipeline.cli") / "web" / name).read_bytes()


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine only."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _LocalNamesOnly:
    """ASGI middleware: answer only requests whose ``Host`` names this machine (403 otherwise; a
    WebSocket is refused at its handshake). A page of another site served from a name that resolves to
    127.0.0.1 (DNS rebinding) is same-origin for the browser; its ``Host`` gives it away."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        host = dict(scope.get("headers", ())).get(b"host")
        hostname = urlsplit("//" + host.decode("latin-1")).hostname if host else None
        if scope["type"] == "lifespan" or hostname is None or is_loopback_host(hostname):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4403, "reason": "not a local host name"})
            return
        body = (
            f"streamfold serve without --token answers only requests to localhost, 127.0.0.1 or [::1],"
            f" not to {hostname}\n"
        ).encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def create_serve_app(
    make_source: SourceMaker | None,
    *,
    mode: str,
    label: str,
    retention: Retention | None = None,
    heartbeat: float | None = 15.0,
    log: EventLog | None = None,
    token: str | None = None,
    tools: ToolRegistry | None = None,
    approval_timeout: float | None = 600.0,
) -> Starlette:
    """The page plus the serving routes; each ``POST /responses`` runs ``make_source(body)`` detached.

    ``mode`` (``demo``, ``file``, ``upstream``, or ``viewer``) and ``label`` are what ``/config`` tells
    the page: with ``upstream`` it asks for a prompt before it starts a response; a viewer only shows
    the response named in its URL (``/?response=ID``). ``log``: the event log (default: a new in-memory
    one with ``retention``); with ``make_source=None`` nothing is started here (a web replica reading a
    log another process writes). ``token``: serve every client presenting it (a bearer header, or the
    cookie set by opening ``/?token=<token>``) instead of this machine's clients only (see the module
    docstring). ``tools``: run each response's calls (see the module docstring); ``approval_timeout``:
    seconds a call waits for the page's decision before it is denied (None: as long as it runs).
    """
    from pipeline._extras import needs_extra

    with needs_extra("server", "streamfold serve"):
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.requests import Request
        from starlette.responses import JSONResponse, RedirectResponse, Response
        from starlette.routing import Route

    from pipeline.fanout.access import DEFAULT_MAX_BODY_BYTES, Access, AccessDenied, bearer_token
    from pipeline.fanout.serving.manager import ResponseManager
    from pipeline.fanout.serving.memory import MemoryEventLog
    from pipeline.fanout.web import serving_routes

    if log is None:
        log = MemoryEventLog(retention=retention) if retention is not None else MemoryEventLog()
    manager = ResponseManager(log)
    authorize = bearer_token(token, cookie=TOKEN_COOKIE) if token is not None else None
    access = Access(authorize, None, DEFAULT_MAX_BODY_BYTES)
    from pipeline.agent import Approvals, run_tools

    approvals = Approvals(timeout=approval_timeout)

    async def with_tools(source: AsyncIterator[Any], tools: ToolRegistry) -> AsyncIterator[Any]:
        async with run_tools(source, tools, approvals=approvals) as run:
            async for item in run:
                yield item

    async def start(body: Any) -> AsyncIterator[Any]:
        if not isinstance(body, dict):
            raise ConfigurationError(f"the request body is a JSON object, got {type(body).__name__}")
        assert make_source is not None
        source = make_source(body)
        return source if tools is None else with_tools(source, tools)

    async def decide(request: Request) -> Response:
        """``POST /approvals/{call_id}``: the page's decision on a pending call (404 when none waits)."""
        try:
            await access.check(request, "start", None, {})  # who may start responses decides their calls
        except AccessDenied as exc:
            return JSONResponse({"type": "ERROR", "error": "AccessDenied", "message": str(exc)}, 403)
        try:
            body = await request.json()
        except ValueError:
            body = None
        approved = body.get("approved") if isinstance(body, dict) else None
        reason = body.get("reason") if isinstance(body, dict) else None
        if not isinstance(approved, bool) or not isinstance(reason, str | None):
            message = 'the body is {"approved": true | false, "reason"?: string}'
            return JSONResponse({"type": "ERROR", "error": "ConfigurationError", "message": message}, 400)
        call_id = request.path_params["call_id"]
        if not approvals.decide(call_id, approved, reason):
            message = f"no call {call_id!r} waits for a decision"
            return JSONResponse({"type": "ERROR", "error": "NotPending", "message": message}, 404)
        return JSONResponse({"call_id": call_id, "approved": approved})

    async def page(request: Request) -> Response:
        given = request.query_params.get("token")
        if token is None or given is None:
            return Response(_static("index.html"), media_type=STATIC_FILES["index.html"])
        if not hmac.compare_digest(given.encode(), token.encode()):
            return Response("not the token streamfold serve was given\n", 403, media_type="text/plain")
        kept = [(key, value) for key, value in request.query_params.multi_items() if key != "token"]
        rest = urlencode(kept)
        entered = RedirectResponse("./" + (f"?{rest}" if rest else ""), status_code=303)
        secure = request.url.scheme == "https"
        entered.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=secure)
        return entered

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES or name == "index.html":
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(_static(name), media_type=STATIC_FILES[name], headers={"cache-control": "no-cache"})

    async def config(request: Request) -> Response:
        try:
            await access.check(request, "list", None, {})  # what is served is for those who may list it
        except AccessDenied as exc:
            return JSONResponse({"type": "ERROR", "error": "AccessDenied", "message": str(exc)}, 403)
        return JSONResponse({"mode": mode, "label": label})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            yield

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/config", config, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/approvals/{call_id}", decide, methods=["POST"]),
        *serving_routes(
            manager,
            start=start if make_source is not None else None,
            heartbeat=heartbeat,
            authorize=authorize,
        ),
    ]
    local_only = [Middleware(_LocalNamesOnly)] if token is None else []
    return Starlette(routes=routes, lifespan=lifespan, middleware=local_only)


def upstream_source(
    upstream: str,
    *,
    model: str,
    tool_format: str | None = None,
    timeout: float = 300.0,
) -> SourceMaker:
    """A `SourceMaker` asking an OpenAI-compatible server (a model server, or ``streamfold proxy``)
    for a streamed chat completion of the body's ``prompt``; delimiter tool calls in the text are
    rewritten as the proxy does when ``tool_format`` is given."""

    url = upstream.rstrip("/") + "/v1/chat/completions"

    async def events(request: Mapping[str, Any]) -> AsyncIterator[Any]:
        import httpx

        from pipeline.compose import process

        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", url, json=request) as response,
        ):
            if response.status_code != 200:
                text = (await response.aread())[:2000].decode("utf-8", "replace")
                raise ProviderError(
                    f"HTTP {response.status_code} from {url}: {text}", status=response.status_code
                )
            pipeline = process(response.aiter_bytes(), provider="openai", tool_format=cast(Any, tool_format))
            async with pipeline.stream() as items:
                async for item in items:
                    yield item

    def make(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        """Checks the prompt at once (a bad one is a 400, not a failed response), then streams."""
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigurationError("the request body needs a non-empty string 'prompt'")
        if len(prompt) > _MAX_PROMPT_CHARS:
            raise ConfigurationError(f"a prompt is at most {_MAX_PROMPT_CHARS} characters")
        request = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return events(request)

    return make


def recorded_source(
    read: Callable[[], tuple[AsyncIterator[Any], str]], *, tool_format: str | None = None
) -> SourceMaker:
    """A `SourceMaker` replaying a recording afresh for each response: ``read()`` gives the paced
    pieces and their provider."""

    async def events(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        from pipeline.compose import process

        pieces, provider = read()
        pipeline = process(pieces, provider=cast(Any, provider), tool_format=cast(Any, tool_format))
        async with pipeline.stream() as items:
            async for item in items:
                yield item

    def make(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        return events(body)

    return make


def run(app: Starlette, *, host: str, port: int, token: str | None = None) -> None:
    """Serve ``app`` with uvicorn until interrupted, printing the page's address (with the token)."""
    import uvicorn

    where = f"[{host}]" if ":" in host else host
    entry = f"?{urlencode({'token': token})}" if token is not None else ""
    print(f"streamfold serve: open http://{where}:{port}/{entry}", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
