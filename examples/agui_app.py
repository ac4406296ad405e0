"""Serve AG-UI clients (CopilotKit, ``@ag-ui/client``'s ``HttpAgent``) from Python with streamfold.

The client POSTs a ``RunAgentInput`` (``{threadId, runId, messages, tools, context, state,
forwardedProps}``) to ``/agent`` and reads AG-UI events: ``RUN_STARTED``, ``TEXT_MESSAGE_*``,
``REASONING_*``, ``TOOL_CALL_START`` / ``ARGS`` / ``END`` (as soon as each call is folded), ``RUN_FINISHED``
or ``RUN_ERROR``; streamfold's extras as ``CUSTOM`` events. The run is kept in the log under its ``runId``,
so ``GET /responses/{runId}/events?protocol=agui`` with ``Last-Event-ID`` resumes it.

Run (needs ``pip install 'streamfold[server,sdk]'`` and ``OPENAI_API_KEY``)::

    uvicorn examples.agui_app:app --port 8000

Only clients on this machine are served; to serve others pass ``authorize=`` and ``owner=`` to both route
sets (``docs/serving-security.md``). A browser client on another origin also needs ``CORSMiddleware``.

The client side::

    import { HttpAgent } from "@ag-ui/client";

    const agent = new HttpAgent({ url: "http://localhost:8000/agent" });
    agent.messages = [{ id: "1", role: "user", content: "Weather in Paris?" }];
    await agent.runAgent({}, {
      onTextMessageContentEvent: ({ event }) => console.log(event.delta),
      onToolCallEndEvent: ({ toolCallName, toolCallArgs }) => console.log(toolCallName, toolCallArgs),
    });
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette

from pipeline.compose import process
from pipeline.errors import ConfigurationError
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving import MemoryEventLog, ResponseManager
from pipeline.fanout.web import serving_routes

Complete = Callable[[list[dict[str, Any]]], Any]
"""OpenAI-style messages in, a response's source out (an SDK stream, SSE bytes, ...)."""


async def openai_complete(messages: list[dict[str, Any]]) -> Any:
    from openai import AsyncOpenAI

    client = AsyncOpenAI()
    model = os.environ.get("MODEL", "gpt-4o-mini")
    return await client.chat.completions.create(model=model, messages=messages, stream=True)  # type: ignore[arg-type]


def to_openai(agui_messages: Any) -> list[dict[str, Any]]:
    """AG-UI messages (``{id, role, content}``) as chat messages."""
    if not isinstance(agui_messages, list) or not agui_messages:
        raise ConfigurationError("the RunAgentInput needs a non-empty 'messages' list")
    return [
        {"role": m["role"], "content": m["content"]}
        for m in agui_messages
        if isinstance(m, dict) and m.get("role") in ("user", "assistant", "system") and m.get("content")
    ]


async def events(source: Any) -> AsyncIterator[Any]:
    """The pipeline's events of a model stream (closing the pipeline closes the model's stream)."""
    async with process(source).stream() as items:
        async for item in items:
            yield item


def create_app(complete: Complete = openai_complete) -> Starlette:
    manager = ResponseManager(MemoryEventLog())

    async def start(body: Any) -> AsyncIterable[Any]:
        """What a POST runs: the request's JSON in, the response's pipeline events out."""
        source = complete(to_openai(body.get("messages")))
        if hasattr(source, "__await__"):
            source = await source
        return events(source)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager:
            yield

    routes = [*chat_routes(manager, start, path="/agent", protocol="agui"), *serving_routes(manager)]
    return Starlette(routes=routes, lifespan=lifespan)


app = create_app()
