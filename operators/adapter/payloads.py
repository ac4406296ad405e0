"""The one generic decode of framed payloads: `Payload` -> the JSON value it holds.

The framers (`sse`, `jsonl`,
`json_array`, `eventstream`) yield each event's bytes and
nothing else; the decoders that give provider event dicts (``sse_events``, ``decode_jsonl``, ...) are a
framer chained with a `PayloadParser`.

In-band errors (Anthropic's ``{"type": "error"}``, OpenAI-compatible servers' and Gemini's
``{"error": {...}}``, OpenAI Responses' ``{"type": "error", "code": ...}``) raise
`ProviderError` after every event before them was returned.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from operators.adapter._lines import decode_text
from pipeline._jsonenc import JSON_ERRORS, json_problem
from pipeline.errors import ConfigurationError, ProviderError, StreamDecodeError
from pipeline.models import Payload
from pipeline.stage import Core, chain

__all__ = ["Framed", "PayloadParser", "excerpt", "raise_for_provider_error"]

_EXCERPT_LENGTH: Final = 80

_WORDING: Final[Mapping[str, tuple[str, str]]] = {
    # unit: (bytes that are not JSON, JSON that is not an object); {n} number, {o} offset, {p} problem,
    # {t} the value's type, {x} an excerpt.
    "event": (
        "event {n} (byte {o}) has data that is {p}: {x}",
        "event {n} (byte {o}) has data that is not a JSON object ({t}): {x}",
    ),
    "line": ("line {n} (byte {o}) is {p}: {x}", "line {n} (byte {o}) holds a JSON {t}, not an object: {x}"),
    "JSON object": (
        "JSON object {n} (byte {o}) is {p}: {x}",
        "JSON object {n} (byte {o}) is a JSON {t}: {x}",
    ),
    "event-stream frame": (
        "event-stream frame {n} at byte {o} has a payload that is {p}",
        "event-stream frame {n} at byte {o} carries an event that is not a JSON object",
    ),
}
"""How each framing names what it frames in an error (a payload's number counts from 0)."""


class PayloadParser:
    """Sans-IO core: `Payload` -> the JSON value it holds (a dict, as providers send).

    Bytes that are not JSON (invalid UTF-8 included) raise `StreamDecodeError` naming the payload's number
    and byte offset.

    Args:
        unit: what errors call a payload: ``event``, ``line``, ``JSON object`` or ``event-stream frame``.
        check_errors: an in-band provider error object raises `ProviderError`.
        objects_only: a value that is not a JSON object raises `StreamDecodeError`.

    Raises:
        ConfigurationError: ``unit`` is none of those.
    """

    __slots__ = ("_check_errors", "_decode", "_number", "_objects_only", "_unit")

    def __init__(self, unit: str = "event", *, check_errors: bool = True, objects_only: bool = True) -> None:
        if unit not in _WORDING:
            raise ConfigurationError(f"unknown unit {unit!r}; expected one of {', '.join(_WORDING)}")
        self._unit = unit
        self._check_errors = check_errors
        self._objects_only = objects_only
        self._decode = msgspec.json.Decoder().decode
        self._number = 0

    def feed(self, payload: Payload) -> list[Any]:
        """The provider events (dicts) of the payloads this read completes.

        Raises:
            StreamDecodeError: the payload is not JSON, or (``objects_only``) not a JSON object.
            ProviderError: the payload is an in-band provider error (``check_errors``).
        """
        number = self._number
        self._number = number + 1
        try:
            value = self._decode(payload.data)
        except JSON_ERRORS as error:
            raise self._not_json(payload, number, error) from None
        if type(value) is dict:
            if self._check_errors and (value.get("error") is not None or value.get("type") == "error"):
                raise_for_provider_error(value, where=f"{self._unit} {number}")
        elif self._objects_only:
            _, template = _WORDING[self._unit]
            message = template.format(
                n=number, o=payload.offset, t=type(value).__name__, x=excerpt(payload.data)
            )
            raise StreamDecodeError(message, offset=payload.offset)
        return [value]

    def finish(self) -> list[Any]:
        """The body has ended: the events of what the framer still held."""
        return []

    def _not_json(self, payload: Payload, number: int, error: Exception) -> StreamDecodeError:
        data, offset = payload.data, payload.offset
        binary = self._unit == "event-stream frame"  # its payloads are base64-decoded: no stream offsets
        if not binary:
            decode_text(data, offset)  # invalid UTF-8 raises, naming its byte of the stream
        template, _ = _WORDING[self._unit]
        problem = json_problem(error, data, None if binary else offset)
        message = template.format(n=number, o=offset, p=problem, x=excerpt(data))
        return StreamDecodeError(message, offset=offset)


def raise_for_provider_error(payload: Mapping[str, Any], *, where: str = "event") -> None:
    """Raise `ProviderError` if ``payload`` is an in-band error object of any known wire format.

    Recognised: ``{"type": "error", "error": {...}}`` (Anthropic), ``{"type": "error", "code": ...,
    "message": ...}`` (OpenAI Responses), ``{"error": {...}}`` without ``choices`` (OpenAI-compatible
    servers, Gemini). A payload with ``"error": null`` is not an error.
    """
    kind = payload.get("type")
    error = payload.get("error")
    if kind == "error":
        details = error if isinstance(error, Mapping) else payload
    elif error is not None and "choices" not in payload and "type" not in payload:
        details = error if isinstance(error, Mapping) else {"message": str(error)}
    else:
        return
    raise ProviderError.from_payload(details, payload, where)


def excerpt(text: str | bytes) -> str:
    """The start of ``text`` (at most 80 characters), quoted, for an error message."""
    if isinstance(text, bytes | bytearray):
        text = text[: _EXCERPT_LENGTH * 4].decode("utf-8", "replace")
    return repr(text if len(text) <= _EXCERPT_LENGTH else text[:_EXCERPT_LENGTH] + "...")


class Framed:
    """A framer chained with a `PayloadParser`: bytes in, the provider's event dicts out."""

    __slots__ = ("_core", "abort", "feed", "finish")

    def __init__(self, framer: Core[bytes, Payload], parser: PayloadParser) -> None:
        self._core = chain(framer, parser)
        self.feed = self._core.feed
        self.finish = self._core.finish
        self.abort = getattr(self._core, "abort")  # noqa: B009  # a chain has one
