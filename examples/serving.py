"""Serve live responses to browsers: start one by POST, watch it from many tabs, reconnect without a gap.

One process, the in-memory log. ``POST /responses`` starts a response (here the bundled demo recording,
replayed at a model's pace, through :func:`pipeline.compose.process`); it runs detached, so closing every
tab does not stop it. ``GET /responses/{id}/events`` streams it as SSE with an ``id:`` on every frame: a
browser's ``EventSource`` that reconnects sends ``Last-Event-ID`` and gets exactly what it missed.
``POST /responses/{id}/stop`` stops it; it stays readable for ten minutes after it ends, then 410 Gone.

Run: ``uvicorn examples.serving:app``, then::

    curl -X POST -H 'content-type: application/json' localhost:8000/responses -d '{}'   # {"response_id": ...}
    curl -N localhost:8000/responses/ID/events
    curl -N -H 'Last-Event-ID: 40' localhost:8000/responses/ID/events     # resume after id 40
    curl -X POST -H 'content-type: application/json' localhost:8000/responses/ID/stop

Only clients on this machine are served (the routes' default; a POST must be JSON): to serve others, pass
``authorize=`` and ``owner=`` to ``serving_routes`` (``docs/serving-security.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import anyio
from starlette.applications import Starlette

from pipeline import PipelineEvent
from pipeline.compose import process
from pipeline.fanout.serving import MemoryEventLog, ResponseManager, Retention
from pipeline.fanout.web import serving_routes

PACE = 0.002  # seconds between the recording's events, as a model would send them


async def paced_recording() -> AsyncIterator[bytes]:
    data = (resources.files("pipeline.cli") / "demo" / "coding_agent.sse").read_bytes()
    for event in data.split(b"\n\n"):
        await anyio.sleep(PACE)
        yield event + b"\n\n"


async def start(request: Any) -> AsyncIterable[PipelineEvent]:
    """What ``POST /responses`` runs: the request's JSON in, the response's source out."""
    return process(paced_recording())


log = MemoryEventLog(retention=Retention(max_items=100_000, max_bytes=64 << 20, ttl_after_end=600))
manager = ResponseManager(log)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with manager:  # responses run in the manager's tasks; leaving stops those still running
        yield


app = Starlette(routes=serving_routes(manager, start=start, heartbeat=15.0), lifespan=lifespan)
