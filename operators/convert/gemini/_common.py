"""What both Gemini APIs' converters share: plain words from SDK enums, and their two errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.convert._base import is_mapping
from pipeline.errors import ConverterError, ProviderError

__all__ = ["converter_error", "plain", "provider_error"]


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
