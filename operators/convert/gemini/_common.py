"""What both Gemini APIs' converters share: plain words from SDK enums, token usage, and their two errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from operators.convert._base import is_mapping
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import Payload, TokenUsage

__all__ = ["converter_error", "enum_name", "plain", "provider_error", "token_usage"]


def plain(text: str) -> str:
    """``text`` as a plain ``str``: google-genai objects carry their enums (``FinishReason.STOP``), which
    are ``str`` subclasses; the wire has the bare word."""
    if type(text) is str:
        return text
    value = getattr(text, "value", text)
    return str.__str__(value if isinstance(value, str) else text)


def enum_name(value: str | int, names: Mapping[int, str]) -> str:
    """The name of an enum value sent as its name or as its number (``enum-encoding=int``); a number that
    ``names`` does not know (newer than this table) is kept as its digits."""
    if type(value) is int:
        return names.get(value, str(value))
    return plain(value)  # type: ignore[arg-type]


def provider_error(item: Payload | Mapping[str, Any], error: Any, event_number: int) -> ProviderError:
    """The error for an event whose ``error`` is set (an error the provider sent in the stream).

    ``item`` is the event as fed (its bytes are decoded again for the error's ``payload``: only an error
    pays for that); ``error`` is its ``error`` field (``None``: the event itself describes the error)."""
    payload: Mapping[str, Any] = msgspec.json.decode(item.data) if isinstance(item, Payload) else item
    details: Mapping[str, Any] = error if is_mapping(error) else {"message": str(error)}
    if error is None:
        details = payload
    return ProviderError.from_payload(details, payload, f"event {event_number}")


def converter_error(event_number: int, where: str, problem: str) -> ConverterError:
    """The error for a field ``where`` of event ``event_number`` that is not what the API promises."""
    return ConverterError(f"Gemini chunk {event_number}: {where} {problem}", event_number=event_number)


def token_usage(
    prompt: int | None, output: int | None, thoughts: int | None, cached: int | None, total: int | None
) -> TokenUsage | None:
    """The usage of the API's counts of prompt, output, thought, cached and total tokens, in OpenAI's
    terms; ``None`` when it has no count (Vertex sends only ``trafficType`` on most streamed chunks).

    The completion tokens include the thoughts, and the total is the sum when the API does not give it."""
    if prompt is None and output is None and thoughts is None and cached is None and total is None:
        return None
    prompt = prompt or 0
    completion = (output or 0) + (thoughts or 0)
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion if total is None else total,
        cached_tokens=cached,
        reasoning_tokens=thoughts,
    )
