"""A fake OpenAI-compatible model server for the proxy tests, and a way to run ASGI apps on 127.0.0.1.

:class:`FakeUpstream` answers ``POST /v1/chat/completions`` with the :class:`Scenario` registered under the
request's ``model``, chunk by chunk, and records every request it gets (headers and JSON body) and how
each stream ended. Failure knobs: a non-200 status with a body, a delay before the answer, a pause after
some pieces (until :attr:`Scenario.release` is set, or forever), a stream cut off (the connection is
aborted without the end of the chunked body). ``GET /v1/models`` answers :data:`MODELS`.

:func:`chat_sse` writes an OpenAI chat completion stream from text deltas, :func:`split_bytes` cuts bytes at
given sizes, :func:`serving` runs an ASGI app with uvicorn on an ephemeral port.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = [
    "MODELS",
    "FakeUpstream",
    "PromptServer",
    "Received",
    "Scenario",
    "chat_completion",
    "chat_sse",
    "closed_port",
    "serving",
    "split_bytes",
    "sse_events",
]

MODELS: dict[str, Any] = {
    "object": "list",
    "data": [{"id": "kimi-k2", "object": "model", "created": 1700000000, "owned_by": "fake"}],
}

COMPLETION_ID = "chatcmpl-fake-0001"
MODEL = "kimi-k2-fake"
CREATED = 1735689600
FINGERPRINT = "fp_fake42"
USAGE = {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def chat_sse(
    deltas: Iterable[str],
    *,
    field: str = "content",
    finish_reason: str | None = "stop",
    usage: dict[str, int] | None = USAGE,
    done: bool = True,
) -> bytes:
    """An OpenAI chat completion stream (role chunk, one chunk per delta in ``field``, finish chunk,
    usage chunk with empty choices, ``[DONE]``) as a vLLM-style server sends it."""
    events = [_event(_chunk({"role": "assistant", "content": ""}))]
    events.extend(_event(_chunk({field: delta})) for delta in deltas if delta)
    if finish_reason is not None:
        events.append(_event(_chunk({}, finish_reason)))
    if usage is not None:
        usage_chunk = _chunk({})
        usage_chunk["choices"] = []
        usage_chunk["usage"] = usage
        events.append(_event(usage_chunk))
    if done:
        events.append(b"data: [DONE]\n\n")
    return b"".join(events)


def chat_completion(content: str, *, reasoning: str | None = None, finish_reason: str = "stop") -> bytes:
    """A whole (non-streamed) chat completion whose message holds ``content``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return json.dumps(
        {
            "id": COMPLETION_ID,
            "object": "chat.completion",
            "created": CREATED,
            "model": MODEL,
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": USAGE,
        }
    ).encode()


def sse_events(data: bytes) -> list[bytes]:
    """``data`` cut after each SSE event (one piece per event, as a server writes them)."""
    return [event + b"\n\n" for event in data.split(b"\n\n") if event]


def split_bytes(data: bytes, sizes: Sequence[int]) -> list[bytes]:
    """``data`` cut into pieces of ``sizes`` (cycled)."""
    pieces = []
    start = 0
    turn = 0
    while start < len(data):
        size = max(1, sizes[turn % len(sizes)])
        pieces.append(data[start : start + size])
        start += size
        turn += 1
    return pieces


@dataclass
class Scenario:
    """What the upstream answers to one model name.

    ``pieces``: the body, sent one piece per write (a non-200 ``status`` or a ``media_type`` other than
    SSE sends them joined, as one body). ``hold``: wait until ``release`` is set before answering at all.
    ``pause_after``: after that many pieces, wait until ``release`` is set. ``cut_after``: after that many
    pieces, abort the connection. ``headers``: extra response headers.
    """

    pieces: list[bytes]
    status: int = 200
    media_type: str = "text/event-stream"
    hold: bool = False
    pause_after: int | None = None
    cut_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    release: anyio.Event = field(default_factory=anyio.Event)
    arrived: anyio.Event = field(default_factory=anyio.Event)
    """Set when a request for this scenario arrives."""


@dataclass
class Received:
    """One request the upstream got, and how its answer ended."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    sent: int = 0
    """Pieces of the answer sent."""
    outcome: str = "pending"
    """``complete``, ``cancelled`` (the client went away), ``cut`` or ``pending``."""
    ended: anyio.Event = field(default_factory=anyio.Event)


class _CutConnection(Exception):
    """Raised inside a streaming body so that the server aborts the connection mid-body."""


class FakeUpstream:
    """The fake model server (see the module doc); :attr:`app` is its Starlette app."""

    def __init__(self) -> None:
        self.scenarios: dict[str, Scenario] = {}
        self.received: list[Received] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    def add(self, model: str, scenario: Scenario) -> Scenario:
        self.scenarios[model] = scenario
        return scenario

    def requests_for(self, model: str) -> list[Received]:
        return [r for r in self.received if isinstance(r.body, dict) and r.body.get("model") == model]

    async def _models(self, request: Request) -> Response:
        self.received.append(Received(request.method, request.url.path, dict(request.headers), None))
        return JSONResponse(MODELS, headers={"x-upstream": "fake"})

    async def _chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        record = Received(request.method, request.url.path, dict(request.headers), body)
        self.received.append(record)
        scenario = self.scenarios[body["model"]]
        scenario.arrived.set()
        if scenario.hold and not await _released(scenario.release, request):
            record.outcome = "cancelled"
            record.ended.set()
            return Response(status_code=499)
        if scenario.status != 200 or scenario.media_type != "text/event-stream":
            record.sent = len(scenario.pieces)
            record.outcome = "complete"
            record.ended.set()
            return Response(
                b"".join(scenario.pieces),
                scenario.status,
                headers=scenario.headers,
                media_type=scenario.media_type,
            )
        return StreamingResponse(
            self._pieces(scenario, record), headers=scenario.headers, media_type="text/event-stream"
        )

    async def _pieces(self, scenario: Scenario, record: Received) -> AsyncIterator[bytes]:
        try:
            for number, piece in enumerate(scenario.pieces):
                if number == scenario.cut_after:
                    record.outcome = "cut"
                    raise _CutConnection
                if number == scenario.pause_after:
                    await scenario.release.wait()
                yield piece
                record.sent += 1
            record.outcome = "complete"
        except BaseException:
            if record.outcome == "pending":
                record.outcome = "cancelled"
            raise
        finally:
            record.ended.set()


async def _released(event: anyio.Event, request: Request) -> bool:
    """Wait for ``event``; False if the client disconnected first."""
    released = False
    async with anyio.create_task_group() as tasks:

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        tasks.start_soon(watch)
        await event.wait()
        released = True
        tasks.cancel_scope.cancel()
    return released


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class PromptServer(uvicorn.Server):
    """uvicorn's server, leaving its main loop as soon as ``should_exit`` is set. uvicorn looks at the flag
    on a timer, which each of the hundreds of servers the tests start would otherwise wait out once."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()
        else:
            self._exit.clear()

    async def main_loop(self) -> None:
        await self.on_tick(0)  # (the Date header)
        await self._exit.wait()


@asynccontextmanager
async def serving(
    app: Any, *, timeout_keep_alive: int = 5, send_buffer: int | None = None, **options: Any
) -> AsyncIterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 (an ephemeral port); yields its base URL.

    The listening socket is bound as TCP before the server starts, so requests can be sent at once (they
    wait in the backlog until uvicorn accepts them), and asyncio turns Nagle's algorithm off on each
    connection. ``timeout_keep_alive``: uvicorn's idle connection timeout. ``send_buffer``: the kernel send
    buffer of the connections (accepted sockets inherit it), so that a client that stops reading blocks the
    server's sends soon. ``options``: more of `uvicorn.Config`'s, over these defaults.
    """
    settings: dict[str, Any] = {
        "log_level": "critical",
        "lifespan": "on",
        "timeout_graceful_shutdown": 1,
        "timeout_keep_alive": timeout_keep_alive,
    }
    server = PromptServer(uvicorn.Config(app, **(settings | options)))
    failure: Exception | None = None
    # Closed however the body ends: a skip (a BaseException) from a fixture entered with it included.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as sock:
        if send_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{port}"
            except Exception as exc:
                failure = exc  # raised below, not wrapped in the task group's ExceptionGroup
            finally:
                server.should_exit = True
    if failure is not None:
        raise failure


def post_scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The ASGI scope of a ``POST path`` from 127.0.0.1, for driving an app without a server."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
