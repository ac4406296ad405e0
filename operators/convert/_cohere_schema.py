"""The schema of a Cohere v2 chat stream event: one msgspec Struct for every event type.

The event's ``type`` is a plain string, not a tag of a union: a tagged union refuses a tag it does not
know, and an event type added by Cohere later must decode (and be skipped) like the others. Fields the
converter does not read (``citations``, ``role``, ...) are skipped by the decoder.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

__all__ = [
    "CohereContent",
    "CohereDelta",
    "CohereEvent",
    "CohereFunction",
    "CohereMessage",
    "CohereTokens",
    "CohereToolCall",
    "CohereUsage",
    "Count",
]

Count: TypeAlias = int | float | None
"""A token count: Cohere sends whole numbers, sometimes as floats (``1549.0``)."""


class CohereFunction(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | None = None


class CohereToolCall(msgspec.Struct, gc=False):
    """``delta.message.tool_calls`` of ``tool-call-start`` / ``tool-call-delta``: one call, an object."""

    id: str | None = None
    function: CohereFunction | None = None


class CohereContent(msgspec.Struct, gc=False):
    """``delta.message.content`` of ``content-start`` / ``content-delta``."""

    text: str | None = None
    thinking: str | None = None


class CohereMessage(msgspec.Struct, gc=False):
    """``delta.message``. ``message-start`` sends ``content`` and ``tool_calls`` as (empty) lists, the
    content and call events as one object: both shapes decode, and the handlers say which they need."""

    content: CohereContent | list[Any] | None = None
    tool_plan: str | None = None
    tool_calls: CohereToolCall | list[Any] | None = None


class CohereTokens(msgspec.Struct, gc=False):
    input_tokens: Count = None
    output_tokens: Count = None


class CohereUsage(msgspec.Struct, gc=False):
    tokens: CohereTokens | None = None
    """What the model processed (preferred)."""
    billed_units: CohereTokens | None = None
    cached_tokens: Count = None


class CohereDelta(msgspec.Struct, gc=False):
    message: CohereMessage | None = None
    finish_reason: str | None = None
    error: str | None = None
    usage: CohereUsage | None = None


class CohereEvent(msgspec.Struct, gc=False):
    """Any event of a Cohere v2 chat stream: the fields of every type the converter reads."""

    type: str | None = None
    id: str | None = None
    index: int | None = None
    delta: CohereDelta | None = None
    error: Any = None
    """An in-band error's details (``{"type": "error", "error": {...}}``)."""
