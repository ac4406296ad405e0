"""The schema of a line of Ollama's native streams (``/api/chat`` and ``/api/generate``): one msgspec
Struct for both endpoints, written from ollama's ``api/types.go`` (``ChatResponse``, ``GenerateResponse``,
``Metrics``).

A chat line carries its text in ``message``; a generate line in ``response`` and ``thinking`` at the top.
Both end with ``done: true`` and the metrics. An error is a line of its own, ``{"error": "..."}``. Fields
the converter does not read (``created_at``, ``context``, ``logprobs``, ``images``) are skipped by the
decoder.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["OllamaFunction", "OllamaLine", "OllamaMessage", "OllamaToolCall"]


class OllamaFunction(msgspec.Struct, gc=False):
    """``function`` of a tool call: its arguments are a JSON object, not text."""

    name: str | None = None
    arguments: dict[str, Any] | None = None
    index: int | None = None
    """The call's number in the response (newer servers); positions follow the order of arrival."""


class OllamaToolCall(msgspec.Struct, gc=False):
    """One whole tool call: Ollama parses the model's call before it sends it."""

    id: str | None = None
    function: OllamaFunction | None = None


class OllamaMessage(msgspec.Struct, gc=False):
    """``message`` of a chat line."""

    content: str | None = None
    thinking: str | None = None
    tool_calls: list[OllamaToolCall] | None = None


class OllamaLine(msgspec.Struct, gc=False):
    """Any line of a chat or generate stream; the durations are nanoseconds."""

    model: str | None = None
    message: OllamaMessage | None = None
    response: str | None = None
    """Generate's text."""
    thinking: str | None = None
    """Generate's reasoning."""
    tool_calls: list[OllamaToolCall] | None = None
    """Generate's calls."""
    done: bool = False
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_duration: int | None = None
    eval_duration: int | None = None
    error: Any = None
    """An in-band error: a message (Ollama), or an object (some proxies)."""
