"""Serve the Vercel AI SDK's ``useChat`` from Python: a complete Starlette app with streamfold.

``useChat``'s default transport POSTs ``{id, messages, trigger, messageId}`` to ``/api/chat`` and reads a
UI message stream; :func:`pipeline.fanout.protocols.chat_routes` answers it from a response that runs
detached in a :class:`ResponseManager`, so a reloaded tab resumes it (``useChat({resume: true})`` calls
``GET /api/chat/{id}/stream``). Text, reasoning, tool calls with their inputs as soon as each is folded,
and streamfold's extras as transient ``data-*`` parts (a file being written, decoded arguments).

Run (needs ``pip install 'streamfold[server,sdk]'`` and ``OPENAI_API_KEY``)::

    uvicorn examples.use_chat_app:app --port 8000

Only clients on this machine are served (a dev server proxying ``/api`` is one); in production pass
``authorize=`` and ``owner=`` to both ``chat_routes`` and ``serving_routes``, e.g.
``owner_only(user)`` and ``user`` with ``user(request)`` reading your session (``docs/serving-security.md``).

The React side (``npm i ai @ai-sdk/react``; proxy ``/api`` to this server)::

    import { useChat } from "@ai-sdk/react";
    import { useState } from "react";

    export function Chat() {
      const { messages, sendMessage, status } = useChat({
        resume: true,                                   // GET /api/chat/{id}/stream after a reload
        onData: (part) => console.log(part.type, part.data),  // data-file-delta, data-tool-argument
      });
      const [input, setInput] = useState("");
      return (
        <div>
          {messages.map((m) => (
            <div key={m.id}>
              <b>{m.role}:</b>
              {m.parts.map((p, i) =>
                p.type === "text" ? <span key={i}>{p.text}</span>
                : p.type === "reasoning" ? <i key={i}>{p.text}</i>
                : p.type.startsWith("tool-") ? <pre key={i}>{JSON.stringify(p.input)}</pre>
                : null)}
            </div>
          ))}
          <form onSubmit={(e) => { e.preventDefault(); sendMessage({ text: input }); setInput(""); }}>
            <input value={input} onChange={(e) => setInput(e.target.value)} disabled={status !== "ready"} />
          </form>
        </div>
      );
    }
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

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        },
    }
]


def to_openai(ui_messages: Any) -> list[dict[str, Any]]:
    """``useChat``'s UI messages (``{role, parts: [{type: "text", text}, ...]}``) as chat messages."""
    if not isinstance(ui_messages, list) or not ui_messages:
        raise ConfigurationError("the body needs a non-empty 'messages' list")
    messages = []
    for message in ui_messages:
        parts = message.get("parts", []) if isinstance(message, dict) else []
        text = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")
        role = message.get("role") if isinstance(message, dict) else None
        if role in ("user", "assistant", "system") and text:
            messages.append({"role": role, "content": text})
    return messages


async def openai_complete(messages: list[dict[str, Any]]) -> Any:
    from openai import AsyncOpenAI

    client = AsyncOpenAI()
    model = os.environ.get("MODEL", "gpt-4o-mini")
    request: dict[str, Any] = {"model": model, "messages": messages, "tools": TOOLS, "stream": True}
    return await client.chat.completions.create(**request)


async def events(source: Any) -> AsyncIterator[Any]:
    """The pipeline's events of a model stream (closing the pipeline closes the model's stream)."""
    async with process(source).stream() as items:
        async for item in items:
            yield item


def create_app(complete: Complete = openai_complete) -> Starlette:
    """The app; ``complete`` asks the model (the tests pass a recorded stream)."""
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

    routes = [*chat_routes(manager, start, path="/api/chat"), *serving_routes(manager)]
    return Starlette(routes=routes, lifespan=lifespan)


app = create_app()
