"""Wire-format auto-detection: which converter a stream needs, and how its bytes are framed."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from pipeline.errors import ConfigurationError

if TYPE_CHECKING:
    from operators.registry import Framing, WireFormat

__all__ = ["detect_framing", "detect_wire_format", "sniff_framing"]

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
_CONVERSE_EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
        "internalServerException",
        "modelStreamErrorException",
        "validationException",
        "throttlingException",
        "serviceUnavailableException",
    }
)
"""The members of Bedrock's ``ConverseStreamOutput``: an event is one of them, alone (boto3's events, and
the event-stream framer's ``{"<event-type>": <payload>}``)."""


def detect_wire_format(first_event: Mapping[str, Any]) -> WireFormat:
    """The wire format of a stream, from its first event (a decoded provider event dict).

    A Gemini Interactions API stream (``event_type``: ``interaction.created``, ``step.delta``, ...) is
    not ``generateContent`` but is ``gemini`` too: the Gemini converter tells the two apart by itself. A
    Bedrock ConverseStream event is one ``ConverseStreamOutput`` member alone (``{"messageStart": {...}}``).
    An Ollama line is ``ollama`` whether it comes from ``/api/chat`` or ``/api/generate``.

    Raises:
        ConfigurationError: the event fits none of the supported formats (the message names what it saw).
    """
    for detector in _DETECTORS:
        wire_format = detector(first_event)
        if wire_format is not None:
            return wire_format
    keys = ", ".join(sorted(map(str, first_event))[:8])
    kind = first_event.get("type")
    raise ConfigurationError(f"cannot tell the wire format of an event with type {kind!r} and keys: {keys}")


def _by_member(first_event: Mapping[str, Any]) -> WireFormat | None:
    """Bedrock ConverseStream when the event is one ``ConverseStreamOutput`` member alone, else None."""
    if len(first_event) == 1 and next(iter(first_event)) in _CONVERSE_EVENTS:
        return "bedrock-converse"
    return None


def _by_type(first_event: Mapping[str, Any]) -> WireFormat | None:
    """The wire format an event's ``type`` names (Responses, Anthropic, Cohere), or None."""
    kind = first_event.get("type")
    if not isinstance(kind, str):
        return None
    if kind.startswith("response.") or (kind == "error" and "sequence_number" in first_event):
        return "openai-responses"
    if kind in _ANTHROPIC_TYPES or (kind == "error" and isinstance(first_event.get("error"), Mapping)):
        return "anthropic"
    if kind in _COHERE_TYPES:
        return "cohere"
    return None


def _by_chat_chunk(first_event: Mapping[str, Any]) -> WireFormat | None:
    """Chat Completions for a chunk, or for openai-python's ``chat.completions.stream()`` event around one."""
    if first_event.get("object") == "chat.completion.chunk" or "choices" in first_event:
        return "openai"
    if first_event.get("type") == "chunk" and isinstance(first_event.get("chunk"), Mapping):
        return "openai"
    return None


def _by_gemini_keys(first_event: Mapping[str, Any]) -> WireFormat | None:
    """Gemini for a ``generateContent`` response or an Interactions API event, else None."""
    if any(key in first_event for key in _GEMINI_KEYS):
        return "gemini"
    event_type = first_event.get("event_type")
    if isinstance(event_type, str) and event_type.startswith(("interaction.", "step.", "content.")):
        return "gemini"
    return None


def _by_ollama_shape(first_event: Mapping[str, Any]) -> WireFormat | None:
    """Ollama for an ``/api/chat`` or ``/api/generate`` line, else None."""
    return "ollama" if _is_ollama(first_event) else None


def _is_ollama(event: Mapping[str, Any]) -> bool:
    """An Ollama ``/api/chat`` or ``/api/generate`` line: a boolean ``done`` beside a ``message`` object
    (chat) or a ``response`` string (generate). Its ``message`` is not an error's message."""
    if not isinstance(event.get("done"), bool):
        return False
    return isinstance(event.get("message"), Mapping) or isinstance(event.get("response"), str)


_DETECTORS: Final[tuple[Callable[[Mapping[str, Any]], WireFormat | None], ...]] = (
    _by_member,
    _by_type,
    _by_chat_chunk,
    _by_gemini_keys,
    _by_ollama_shape,
)
"""The wire-format tests in the order they are tried: the first that names a format wins."""


def detect_framing(first_bytes: bytes) -> Framing:
    """The framing of a stream, from its first bytes (a few dozen after any leading blank lines are plenty).

    See `sniff_framing` for the rules.

    Raises:
        ConfigurationError: the bytes fit none of them (plain text, an HTML page) or hold nothing but
            whitespace.
    """
    probe = first_bytes.removeprefix(_BOM).lstrip(_WHITESPACE)
    framing = sniff_framing(first_bytes[:_START], probe, complete=True)
    if framing is None or framing == "unknown":
        raise ConfigurationError(
            "the stream is neither SSE, JSON Lines, a JSON array nor an AWS event-stream; "
            f"it starts with {first_bytes[:40]!r}"
        )
    return framing


_BOM = b"\xef\xbb\xbf"
_WHITESPACE = b" \t\r\n"
_START = 12
_FIELDS = (b"data", b"event", b"id", b"retry")
_PRELUDE = struct.Struct(">III")


def sniff_framing(
    start: bytes, probe: bytes, *, complete: bool = False
) -> Framing | Literal["unknown"] | None:
    """The framing of a stream, from its first bytes.

    Args:
        start: the first 12 bytes of the stream, or all of them if fewer.
        probe: the bytes from the first one that is neither a UTF-8 BOM at the start nor whitespace.
        complete: there are no more bytes: decide with these.

    Returns:
        The framing; ``None`` when more bytes are needed to tell, ``"unknown"`` when they fit no framing.

    - ``eventstream`` (AWS event-stream, Bedrock): the stream starts with a NUL byte (a frame's length) and
      its first 12 bytes are a frame prelude whose CRC matches;
    - ``sse``: the first line is a comment (``:``) or a ``data``, ``event``, ``id`` or ``retry`` field;
    - ``jsonl``: it starts with ``{`` and the line goes on after it;
    - ``json`` (a JSON array, or pretty-printed objects): it starts with ``[``, or with ``{`` that ends its
      line (pretty-printed JSON, such as an HTTP error body).

    At most 12 bytes of ``start`` and a few of ``probe`` decide, so a caller holds a bounded head.
    """
    if start[:1] == b"\x00":
        return _sniff_eventstream(start, complete)
    if not probe:
        return _at_end(complete, "unknown")
    first = probe[:1]
    if first == b"{":
        rest = probe[1:].lstrip(b" \t")
        if not rest:
            return _at_end(complete, "jsonl")
        return "json" if rest[:1] in (b"\r", b"\n") else "jsonl"
    return _BY_FIRST_BYTE.get(first) or _sniff_field(probe, complete)


_BY_FIRST_BYTE: Final[dict[bytes, Framing]] = {b"[": "json", b":": "sse"}


_Decided = TypeVar("_Decided", bound=str)


def _at_end(complete: bool, decided: _Decided) -> _Decided | None:
    """What too few bytes decide: ``decided`` when the stream has no more, else None (wait for more)."""
    return decided if complete else None


def _sniff_eventstream(start: bytes, complete: bool) -> Literal["eventstream", "unknown"] | None:
    """A stream that starts with a NUL byte: an AWS event-stream if its first 12 bytes are a frame
    prelude whose CRC matches."""
    if len(start) < _START:
        return _at_end(complete, "unknown")
    total, headers, crc = _PRELUDE.unpack_from(start)
    if zlib.crc32(start[:8]) == crc and total >= 16 and headers <= total - 16:
        return "eventstream"
    return "unknown"


def _sniff_field(probe: bytes, complete: bool) -> Literal["sse", "unknown"] | None:
    """SSE if ``probe`` starts with a ``data``, ``event``, ``id`` or ``retry`` field."""
    for field in _FIELDS:
        if probe.startswith(field):
            after = probe[len(field) : len(field) + 1]
            if not after:
                return _at_end(complete, "sse")
            return "sse" if after in (b":", b"\r", b"\n") else "unknown"
        if field.startswith(probe):
            return _at_end(complete, "unknown")
    return "unknown"
