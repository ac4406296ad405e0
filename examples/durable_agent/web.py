"""A web worker of the durable coding agent: serves any run of the shared Redis log, and queues new runs.

    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.durable_agent.web:app --port 8001
    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.durable_agent.web:app --port 8002

``POST /api/runs`` with ``{"prompt": "..."}`` queues a run (any producer picks it up) and answers
``{"run_id"}``; ``GET /responses/{run_id}/events`` follows it (Server-Sent Events with ids: a client that
loses its web worker reconnects to the other with ``Last-Event-ID`` and misses nothing). Web workers start
no model call: a run lives in the producers (``producer.py``), so a deploy of the web tier never cuts it.
"""

from __future__ import annotations

import os
import uuid

from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.web import serving_routes

REDIS_URL = os.environ.get("STREAMFOLD_REDIS_URL", "redis://127.0.0.1:6379/0")
RUNS = "durable-agent:runs"
"""A hash: run id -> the prompt, for every run not finished yet (the producers' work list)."""

log = RedisEventLog(REDIS_URL)
redis = Redis.from_url(REDIS_URL)


async def start_run(request: Request) -> JSONResponse:
    body = await request.json()
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if not isinstance(prompt, str) or not prompt:
        return JSONResponse({"error": "a run needs a prompt"}, status_code=400)
    run_id = f"run-{uuid.uuid4().hex[:16]}"
    await redis.hset(RUNS, run_id, prompt)
    return JSONResponse({"run_id": run_id}, status_code=202)


app = Starlette(routes=[Route("/api/runs", start_run, methods=["POST"]), *serving_routes(log)])
