"""The schema of an OpenAI Chat Completions stream chunk, with the fields OpenAI-compatible servers add.

One msgspec Struct per object of the wire, decoded straight from an event's bytes or converted from a dict
(`EventDecoder`). Every field is optional where some server leaves it out,
and fields the converter does not read (``object``, ``role``, ``logprobs``, ``audio``, ``provider``, ...)
are skipped by the decoder without building anything. A field that servers send in several shapes is a
union (``content``: text or a list of parts; ``arguments``: JSON text or the parsed value); ``error`` is
``Any``, as providers word their errors every way. Usage counts are ``int | float``: some servers count in
floats (``3.0``), which the converter accepts when they are whole; `chat_usage` reads them into a
`TokenUsage`.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from operators.convert._base import field_error
from pipeline.models import TokenUsage

__all__ = [
    "Arguments",
    "ChatChoice",
    "ChatChunk",
    "ChatDelta",
    "ChatFunction",
    "ChatToolCall",
    "ChatUsage",
    "CompletionDetails",
    "ContentPart",
    "Count",
    "ExecutedTool",
    "GroqExtras",
    "ImageOutput",
    "ImageURL",
    "PromptDetails",
    "ReasoningDetail",
    "ThinkingPart",
    "chat_usage",
]

Count: TypeAlias = int | float | None
"""A token count: an integer, or a float that the converter accepts when it is whole."""

Arguments: TypeAlias = str | dict[str, Any] | list[Any] | None
"""Arguments as JSON text, or (some servers) already parsed: the converter encodes those as JSON text."""


class ChatFunction(msgspec.Struct, gc=False):
    """A tool call's ``function``, the legacy ``delta.function_call``, or a ``custom`` tool call."""

    name: str | None = None
    arguments: Arguments = None
    input: Arguments = None
    """The text of a ``custom`` tool call (``{"custom": {"name": ..., "input": ...}}``)."""


class ChatToolCall(msgspec.Struct, gc=False):
    """One entry of ``delta.tool_calls``: the next piece of a call."""

    index: int | None = None
    """Missing on Mistral's calls; numbered from 1 by some servers, or 0 for every call by others."""
    id: str | None = None
    function: ChatFunction | None = None
    custom: ChatFunction | None = None


class ExecutedTool(msgspec.Struct, gc=False):
    """One of Groq's ``delta.executed_tools``: a tool Groq ran itself, sent once when called and again, at
    the same ``index``, with its result."""

    index: int
    type: str
    id: str | None = None
    arguments: Arguments = None
    output: Any = None
    search_results: Any = None
    code_results: Any = None
    browser_results: Any = None


class ThinkingPart(msgspec.Struct, gc=False):
    """One part of a Mistral ``thinking`` content part."""

    type: str | None = None
    text: str | None = None


class ContentPart(msgspec.Struct, gc=False):
    """One part of ``content`` sent as a list (Mistral magistral): ``text`` or ``thinking``."""

    type: str | None = None
    text: str | None = None
    thinking: str | list[ThinkingPart] | None = None


class ReasoningDetail(msgspec.Struct, gc=False):
    """One of OpenRouter's ``reasoning_details``: ``reasoning.text``, ``reasoning.summary`` or
    ``reasoning.encrypted`` (its ``data``), any of them with a ``signature``."""

    type: str | None = None
    text: str | None = None
    summary: str | None = None
    data: str | None = None
    signature: str | None = None


class ImageURL(msgspec.Struct, gc=False):
    url: str | None = None


class ImageOutput(msgspec.Struct, gc=False):
    """One of OpenRouter's image outputs: ``{"type": "image_url", "image_url": {"url": ...}}``."""

    image_url: ImageURL | str | None = None


class ChatDelta(msgspec.Struct, gc=False):
    """A choice's ``delta``: the fields of every server the converter reads."""

    content: str | list[ContentPart] | None = None
    reasoning_content: str | None = None
    """DeepSeek, Qwen, GLM, Kimi, xAI, llama.cpp, vLLM and SGLang reasoning parsers."""
    reasoning: str | None = None
    """Groq, OpenRouter."""
    reasoning_details: list[ReasoningDetail] | None = None
    refusal: str | None = None
    tool_calls: list[ChatToolCall] | None = None
    function_call: ChatFunction | None = None
    executed_tools: list[ExecutedTool] | None = None
    images: list[ImageOutput] | None = None


class ChatChoice(msgspec.Struct, gc=False):
    index: int | None = 0
    delta: ChatDelta | None = None
    finish_reason: str | None = None
    native_finish_reason: str | None = None
    """OpenRouter: the upstream provider's own word."""


class PromptDetails(msgspec.Struct, gc=False):
    cached_tokens: Count = None
    cache_write_tokens: Count = None


class CompletionDetails(msgspec.Struct, gc=False):
    reasoning_tokens: Count = None


class ChatUsage(msgspec.Struct, gc=False):
    """OpenAI's usage, with the names other servers use (``input_tokens``, DeepSeek's cache hits)."""

    prompt_tokens: Count = None
    completion_tokens: Count = None
    total_tokens: Count = None
    input_tokens: Count = None
    output_tokens: Count = None
    prompt_cache_hit_tokens: Count = None
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None


class GroqExtras(msgspec.Struct, gc=False):
    """Groq's ``x_groq``: the usage, on the last chunk."""

    usage: ChatUsage | None = None


class ChatChunk(msgspec.Struct, gc=False):
    """One ``chat.completion.chunk``, or an in-band ``{"error": {...}}`` (with or without ``choices``).

    The fields are in the order OpenAI sends them: the decoder looks each key up from the field after the
    last one found."""

    id: str | None = None
    created: int | float | None = None
    model: str | None = None
    service_tier: str | None = None
    system_fingerprint: str | None = None
    choices: list[ChatChoice] | None = None
    usage: ChatUsage | None = None
    x_groq: GroqExtras | None = None
    error: Any = None


def _count(value: Count, number: int, field: str) -> int | None:
    """A token count; a float is accepted when it is whole (some servers count in floats)."""
    if value is None or isinstance(value, int):
        return value
    if value.is_integer():
        return int(value)
    raise field_error(number, field, "an integer", value)


def chat_usage(raw: ChatUsage, number: int) -> TokenUsage:
    """OpenAI's usage object (and compatible servers' variants) as `TokenUsage`."""
    prompt = _count(raw.prompt_tokens, number, "usage.prompt_tokens")
    if prompt is None:
        prompt = _count(raw.input_tokens, number, "usage.input_tokens") or 0
    completion = _count(raw.completion_tokens, number, "usage.completion_tokens")
    if completion is None:
        completion = _count(raw.output_tokens, number, "usage.output_tokens") or 0
    total = _count(raw.total_tokens, number, "usage.total_tokens")
    cached, cache_creation = _cache_counts(raw, number)
    details = raw.completion_tokens_details
    reasoning = (
        None
        if details is None
        else _count(details.reasoning_tokens, number, "usage.completion_tokens_details.reasoning_tokens")
    )
    if reasoning and total == prompt + completion + reasoning:
        completion += reasoning  # xAI counts reasoning apart from completion tokens
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        cached_tokens=cached,
        cache_creation_tokens=cache_creation,
        reasoning_tokens=reasoning,
    )


def _cache_counts(raw: ChatUsage, number: int) -> tuple[int | None, int | None]:
    """The prompt tokens read from and written to the provider's cache, where the usage tells them."""
    cached = cache_creation = None
    details = raw.prompt_tokens_details
    if details is not None:
        field = "usage.prompt_tokens_details"
        cached = _count(details.cached_tokens, number, f"{field}.cached_tokens")
        cache_creation = _count(details.cache_write_tokens, number, f"{field}.cache_write_tokens")
    if cached is None:  # DeepSeek
        cached = _count(raw.prompt_cache_hit_tokens, number, "usage.prompt_cache_hit_tokens")
    return cached, cache_creation
