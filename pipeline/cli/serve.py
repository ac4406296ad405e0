"""``streamfold serve``: a bundled web page showing a response live, over the serving routes.

::

    streamfold serve --demo [--stream NAME]          # a bundled recorded stream, no network
    streamfold serve FILE [--provider ...]           # a recorded file, replayed afresh per response
    streamfold serve --upstream URL --model NAME     # a live OpenAI-compatible server or streamfold proxy

The app (:func:`create_serve_app`) is the page (``/``, ``/static/...``: plain HTML, CSS and JS in
``pipeline/cli/web``, no build step), ``/config`` (what it serves) and
:func:`~pipeline.fanout.web.serving_routes` over an in-memory log: the page posts to ``/responses`` to
start a response, then reads
``/responses/{id}/events`` with ``EventSource``, which reconnects by itself with ``Last-Event-ID``; the page
shows the reconnect and the stream resumes exactly after the last event it got.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, cast

from pipeline.errors import ConfigurationError, ProviderError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from pipeline.fanout.serving._log import EventLog, Retention

__all__ = [
    "DEFAULT_SERVE_SPEED",
    "STATIC_FILES",
    "SourceMaker",
    "create_serve_app",
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

SourceMaker = Callable[[Mapping[str, Any]], AsyncIterator[Any]]
"""``(request_json) -> pipeline events``: one new response's source, from the page's ``POST`` body."""

_MAX_PROMPT_CHARS: Final = 32_000


def _static(name: str) -> bytes:
    return (resources.files("pipeline.cli") / "web" / name).read_bytes()


def create_serve_app(
    make_source: SourceMaker | None,
    *,
    mode: str,
    label: str,
    retention: Retention | None = None,
    heartbeat: float | None = 15.0,
    log: EventLog | None = None,
) -> Starlette:
    """The page plus the serving routes; each ``POST /responses`` runs ``make_source(body)`` detached.

    ``mode`` (``demo``, ``file``, ``upstream``, or ``viewer``) and ``label`` are what ``/config`` tells
    the page: with ``upstream`` it asks for a prompt before it starts a response; a viewer only shows
    the response named in its URL (``/?response=ID``). ``log``: the event log (default: a new in-memory
    one with ``retention``); with ``make_source=None`` nothing is started here (a web replica reading a
    log another process writes).
    """
    from pipeline._extras import needs_extra

    with needs_extra("server", "streamfold serve"):
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

    from pipeline.fanout.serving.manager import ResponseManager
    from pipeline.fanout.serving.memory import MemoryEventLog
    from pipeline.fanout.web import serving_routes

    if log is None:
        log = MemoryEventLog(retention=retention) if retention is not None else MemoryEventLog()
    manager = ResponseManager(log)

    async def start(body: Any) -> AsyncIterator[Any]:
        if not isinstance(body, dict):
            raise ConfigurationError(f"the request body is a JSON object, got {type(body).__name__}")
        assert make_source is not None
        return make_source(body)

    async def page(request: Request) -> Response:
        return Response(_static("index.html"), media_type=STATIC_FILES["index.html"])

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES or name == "index.html":
            return Response("not found\n", status_code=404, media_type="text/plain")
        return Response(_static(name), media_type=STATIC_FILES[name], headers={"cache-control": "no-cache"})

    async def config(request: Request) -> Response:
        return JSONResponse({"mode": mode, "label": label})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            yield

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/config", config, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        *serving_routes(manager, start=start if make_source is not None else None, heartbeat=heartbeat),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def upstream_source(
    upstream: str,
    *,
    model: str,
    tool_format: str | None = None,
    timeout: float = 300.0,
) -> SourceMaker:
    """A :data:`SourceMaker` asking an OpenAI-compatible server (a model server, or ``streamfold proxy``)
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
    """A :data:`SourceMaker` replaying a recording afresh for each response: ``read()`` gives the paced
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


def run(app: Starlette, *, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn until interrupted, printing the page's address."""
    import uvicorn

    print(f"streamfold serve: open http://{host}:{port}/", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
