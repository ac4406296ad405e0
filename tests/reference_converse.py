"""The oracle's reader of Amazon Bedrock ``ConverseStream`` recordings (see ``tests/reference.py``).

Written from the recordings and botocore's ``ConverseStreamOutput`` shape, sharing no code with
``operators``: AWS event-stream bodies (``.bin``) are split into frames here with plain ``struct`` reads,
without CRC checks (the recordings are whole), and each event is ``(event type, body)``; a ``.jsonl``
recording holds one ``{"<event type>": body}`` a line.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from tests.reference import Expected, Payload, _Call, _get, _usage

__all__ = ["converse", "read_frames"]

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}


def read_frames(data: bytes) -> list[Payload]:
    """The events of an event-stream body: ``(:event-type, JSON payload)`` of every event frame, and
    ``(:exception-type, payload)`` of an exception frame."""
    events: list[Payload] = []
    at = 0
    while at < len(data):
        total, headers_length = struct.unpack_from(">II", data, at)
        headers = _headers(data[at + 12 : at + 12 + headers_length])
        body = data[at + 12 + headers_length : at + total - 4]
        name = headers.get(":event-type") or headers.get(":exception-type")
        events.append((name, json.loads(body) if body else {}))
        at += total
    return events


def _headers(raw: bytes) -> dict[str, str]:
    """String headers (type 7) by name; the ConverseStream frames carry no other type."""
    headers: dict[str, str] = {}
    at = 0
    while at < len(raw):
        name_length = raw[at]
        name = raw[at + 1 : at + 1 + name_length].decode()
        at += 1 + name_length
        assert raw[at] == 7, f"header {name!r} is not a string"
        (length,) = struct.unpack_from(">H", raw, at + 1)
        headers[name] = raw[at + 3 : at + 3 + length].decode()
        at += 3 + length
    return headers


def _events(payloads: list[Payload]) -> list[tuple[str, dict[str, Any]]]:
    """Every event as ``(name, body)``, from frames or from one-key JSON lines."""
    events = []
    for name, body in payloads:
        if name is None:
            ((name, body),) = body.items()
        events.append((name, body))
    return events


def converse(payloads: list[Payload]) -> Expected:
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[_Call] = []
    by_block: dict[int, _Call] = {}
    finish: str | None = None
    usage: dict[str, int] | None = None
    error: str | None = None
    for name, body in _events(payloads):
        if name == "contentBlockStart":
            tool_use = _get(body, "start", "toolUse")
            if tool_use is not None:
                server = tool_use.get("type") == "server_tool_use"
                call = _Call(len(calls), tool_use["toolUseId"], tool_use["name"], provider_executed=server)
                calls.append(call)
                by_block[body["contentBlockIndex"]] = call
        elif name == "contentBlockDelta":
            delta = body["delta"]
            text.append(delta.get("text") or "")
            reasoning.append(_get(delta, "reasoningContent", "text") or "")
            if "toolUse" in delta:
                by_block[body["contentBlockIndex"]].add(delta["toolUse"]["input"])
        elif name == "messageStop":
            reason = body["stopReason"]
            finish = _STOP.get(reason, reason)
        elif name == "metadata":
            counts = body["usage"]
            read = counts.get("cacheReadInputTokens")
            write = counts.get("cacheWriteInputTokens")
            prompt = counts["inputTokens"] + (read or 0) + (write or 0)
            usage = _usage(
                prompt, counts["outputTokens"], counts["totalTokens"], cached=read, cache_creation=write
            )
        elif name.endswith("Exception"):
            error = body.get("message") or name
            break
    return Expected(
        "".join(text), "".join(reasoning), [call.result() for call in calls], finish, usage, error
    )
