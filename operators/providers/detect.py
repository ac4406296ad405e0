"""Wire-format auto-detection: which converter a stream needs, and how its bytes are framed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from operators.sources import Framing
from pipeline.errors import ConfigurationError

__all__ = ["WireFormat", "detect_framing", "detect_wire_format"]

WireFormat = Literal["openai", "openai-responses", "anthropic", "gemini", "cohere"]
"""``openai``: Chat Completions (OpenAI and compatible servers); ``openai-responses``: the Responses API;
``anthropic``: Messages; ``gemini``: ``generateContent`` (Gemini API and Vertex AI) and the Gemini
Interactions API (a different API, which the Gemini converter reads too); ``cohere``: Chat v2."""

_ANTHROPIC_TYPES = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)
_COHERE_TYPES = frozenset(
    {
        "message-start",
        "message-end",
        "content-start",
        "content-delta",
        "content-end",
        "tool-plan-delta",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-end",
        "citation-start",
        "citation-end",
        "debug",
    }
)
_GEMINI_KEYS = ("candidates", "usageMetadata", "promptFeedback", "modelVersion")


def detect_wire_format(first_event: Mapping[str, Any]) -> WireFormat:
    """The wire format of a stream, from its first event (a decoded provider event dict).

    Raises :class:`ConfigurationError` when the event fits none of the supported formats, naming what it
    saw. A Gemini Interactions API stream (``event_type``: ``interaction.created``, ``step.delta``, ...) is
    not ``generateContent`` but is ``gemini`` too: the Gemini converter tells the two apart by itself.
    """
    kind = first_event.get("type")
    if isinstance(kind, str):
        if kind.startswith("response.") or (kind == "error" and "sequence_number" in first_event):
            return "openai-responses"
        if kind in _ANTHROPIC_TYPES or (kind == "error" and isinstance(first_event.get("error"), Mapping)):
            return "anthropic"
        if kind in _COHERE_TYPES:
            return "cohere"
    if first_event.get("object") == "chat.completion.chunk" or "choices" in first_event:
        return "openai"
    if kind == "chunk" and isinstance(first_event.get("chunk"), Mapping):
        return "openai"  # openai-python's chat.completions.stream() helper: its events wrap the chunks
    if any(key in first_event for key in _GEMINI_KEYS):
        return "gemini"
    event_type = first_event.get("event_type")
    if isinstance(event_type, str) and event_type.startswith(("interaction.", "step.", "content.")):
        return "gemini"
    keys = ", ".join(sorted(map(str, first_event))[:8])
    raise ConfigurationError(f"cannot tell the wire format of an event with type {kind!r} and keys: {keys}")


def detect_framing(first_bytes: bytes) -> Framing:
    """``sse`` or ``jsonl``, from the first bytes of a stream (a few hundred are plenty).

    SSE: the first non-blank line is a comment (``:``) or an ``event``, ``data``, ``id`` or ``retry`` field.
    JSON Lines: it starts with ``{``. Anything else (binary AWS event-stream frames, plain text) raises
    :class:`ConfigurationError`.
    """
    text = first_bytes.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    if text.startswith(b"{"):
        return "jsonl"
    line = text.split(b"\n", 1)[0].split(b"\r", 1)[0]
    if line.startswith(b":"):
        return "sse"
    field = line.split(b":", 1)[0]
    if field in (b"data", b"event", b"id", b"retry") and (b":" in line or line == field):
        return "sse"
    raise ConfigurationError(f"the stream is neither SSE nor JSON Lines; it starts with {first_bytes[:40]!r}")
