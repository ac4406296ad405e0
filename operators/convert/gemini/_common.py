"""What both Gemini APIs' converters share: plain words from SDK enums, token usage, and their two errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.convert._base import is_mapping
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import TokenUsage

__all__ = ["converter_error", "plain", "provider_error", "token_usage"]


def plain(text: str) -> str:
    """``text`` as a plain ``str``: google-genai objects carry their enums (``FinishReason.STOP``), which
    are ``str`` subclasses; the wire has the bare word."""
    if type(text) is str:
        return text
    value = getattr(text, "value", text)
    return str.__str__(value if isinstance(value, str) else text)


def provider_error(event: Mapping[str, Any], event_number: int) -> ProviderError:
    """The error for an event whose ``error`` is set (an error the provider sent in the stream)."""
    error = event["error"]
    details: Mapping[str, Any] = error if is_mapping(error) else {"message": str(error)}
    return ProviderError.from_payload(details, event, f"event {event_number}")


def converter_error(event_number: int, where: str, problem: str) -> ConverterError:
    """The error for a field ``where`` of event ``event_number`` that is not what the API promises."""
    return ConverterError(f"Gemini chunk {event_number}: {where} {problem}", event_number=event_number)


def token_usage(
    raw: Any, event_number: int, where: str, fields: tuple[str, str, str, str, str]
) -> TokenUsage | None:
    """The usage in ``raw`` (at ``where``), in OpenAI's terms; ``None`` when it has no count.

    ``fields`` names the API's counts of prompt, output, thought, cached and total tokens; the completion
    tokens include the thoughts, and the total is the sum when the API does not give it."""
    if raw is None:
        return None
    if not is_mapping(raw):
        raise converter_error(event_number, where, "is not a mapping")
    counts: dict[str, int] = {}
    for field in fields:
        value = raw.get(field)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise converter_error(event_number, f"{where}.{field}", "is not an integer")
        counts[field] = value
    if not counts:
        return None  # e.g. only trafficType, on every streamed chunk of Vertex
    prompt_field, output_field, thoughts_field, cached_field, total_field = fields
    prompt = counts.get(prompt_field, 0)
    thoughts = counts.get(thoughts_field)
    completion = counts.get(output_field, 0) + (thoughts or 0)
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=counts.get(total_field, prompt + completion),
        cached_tokens=counts.get(cached_field),
        reasoning_tokens=thoughts,
    )
