"""A web worker of the durable coding agent: ``useChat`` and AG-UI clients start runs here, and read them
back, but the runs run in the producers (``producer.py``).

    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.durable_agent.web:app --port 8001
    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.durable_agent.web:app --port 8002

``POST /api/chat`` is what ``useChat``'s ``DefaultChatTransport`` sends, ``POST /agent`` what AG-UI's
``HttpAgent`` sends. Each queues a durable run on the shared Redis log (``chat_routes`` over
``DurableRuns``: the conversation, and the tool approvals the request answers) and answers with the run's
stream in the client's protocol, read from the log. A producer on any machine runs it; when that producer
dies another takes the run over, and the stream goes on. ``GET /api/chat/{chat_id}/stream``
(``useChat({resume: true})``, with ``Last-Event-ID``) resumes a run's stream on any web worker. The web
workers start no model call, so a deploy of the web tier never cuts a run.
"""

from __future__ import annotations

import json
import os
from typing import Any

from starlette.applications import Starlette

from pipeline.errors import ConfigurationError
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving.redis import RedisEventLog
from pipeline.fanout.serving.runs import DurableRuns
from pipeline.fanout.web import serving_routes

REDIS_URL = os.environ.get("STREAMFOLD_REDIS_URL", "redis://127.0.0.1:6379/0")


def from_ui_messages(messages: Any) -> list[dict[str, Any]]:
    """``useChat``'s UI messages as chat messages: text, tool calls, and the outputs they already have
    (a call whose approval the request answers has none yet: the run adds it)."""
    if not isinstance(messages, list) or not messages:
        raise ConfigurationError("the body needs a non-empty 'messages' list")
    chat: list[dict[str, Any]] = []
    for message in messages:
        parts = [part for part in message.get("parts", []) if isinstance(part, dict)]
        text = "".join(part.get("text", "") for part in parts if part.get("type") == "text")
        tools = [part for part in parts if str(part.get("type", "")).startswith("tool-")]
        entry: dict[str, Any] = {"role": message.get("role"), "content": text}
        if tools:
            entry["tool_calls"] = [call(p["toolCallId"], p["type"][5:], p.get("input")) for p in tools]
        chat.append(entry)
        for part in tools:
            if part.get("state") == "output-available":
                chat.append(result(part["toolCallId"], part.get("output")))
            elif part.get("state") == "output-denied":
                chat.append(result(part["toolCallId"], "denied: a person refused this call"))
    return chat


def from_agui_messages(messages: Any) -> list[dict[str, Any]]:
    """AG-UI's messages (``{role, content, toolCalls?, toolCallId?}``) as chat messages."""
    if not isinstance(messages, list) or not messages:
        raise ConfigurationError("the RunAgentInput needs a non-empty 'messages' list")
    chat: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "tool":
            chat.append(result(message.get("toolCallId"), message.get("content")))
            continue
        entry: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or ""}
        if message.get("toolCalls"):
            entry["tool_calls"] = message["toolCalls"]
        chat.append(entry)
    return chat


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def result(call_id: Any, output: Any) -> dict[str, Any]:
    text = output if isinstance(output, str) else json.dumps(output)
    return {"role": "tool", "tool_call_id": call_id, "content": text}


async def use_chat(body: Any) -> list[dict[str, Any]]:
    return from_ui_messages(body.get("messages"))


async def ag_ui(body: Any) -> list[dict[str, Any]]:
    return from_agui_messages(body.get("messages"))


runs = DurableRuns(RedisEventLog(REDIS_URL))
app = Starlette(
    routes=[
        *chat_routes(runs, use_chat, path="/api/chat", protocol="vercel"),
        *chat_routes(runs, ag_ui, path="/agent", protocol="agui"),
        *serving_routes(runs.log),
    ]
)
