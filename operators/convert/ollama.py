"""Ollama's native streams (``/api/chat`` and ``/api/generate``, one JSON object a line) ->
`ChunkResponse`.

- chat ``message.content`` and generate ``response`` -> ``content``; ``message.thinking`` and generate
  ``thinking`` -> ``reasoning``.
- ``tool_calls`` (in ``message`` for chat, at the top for generate): each call arrives whole, its
  ``function.arguments`` an object; it becomes one `ToolCallDelta` with the call's id (generated
  when the server sent none), name, the arguments as JSON text and ``finished``. Positions follow the order
  of arrival.
- the line with ``done: true`` -> the last chunk: ``finish_reason`` (``stop`` -> stop, or tool_calls when
  the response made a call; ``length`` -> length; ``load`` and ``unload``, the answers to a request that
  only loads or unloads the model, -> stop; any other word as it is; no ``done_reason`` -> stop), the word
  itself in ``metadata["stop_reason"]``, ``prompt_eval_count`` / ``eval_count`` as usage and the durations
  (nanoseconds) as metadata.
- the first line's ``model`` -> ``metadata["model"]``.

One converter reads both endpoints: their lines share ``done``, ``done_reason`` and the metrics, and say
which they are by their fields (``message`` or ``response``), so one provider name serves both.

Each line, the bytes of a framed `Payload` or a dict, is decoded once into
`OllamaLine`. An ``{"error": ...}`` line, first or mid-stream,
raises `ProviderError` naming the line's event number (from 0), after everything
before it; a field of the wrong type raises `ConverterError` naming it.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.convert._base import EventDecoder, IdFactory, field_error, new_call_id
from operators.convert._ollama_schema import OllamaLine, OllamaToolCall
from operators.convert._typed_feed import event_mapping, in_band_error
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta
from pipeline.stage import operator_stream

__all__ = ["OllamaConverter", "convert_ollama"]

_FINISH_REASONS: Final[Mapping[str, str]] = {
    "stop": "stop",
    "length": "length",
    "load": "stop",
    "unload": "stop",
}
_DURATIONS: Final = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
_decode_line = EventDecoder(OllamaLine).decode
_encode = msgspec.json.Encoder().encode


class OllamaConverter:
    """Sans-IO converter of Ollama ``/api/chat`` and ``/api/generate`` lines (payloads or dicts) into
    `ChunkResponse`.

    ``id_factory(index)`` makes the id of a call the server sent without one.
    """

    __slots__ = ("_calls", "_event_number", "_model_sent", "_new_call_id")

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._event_number = -1
        """The number of the line being converted (0 for the first), for error messages."""
        self._new_call_id: IdFactory = id_factory or new_call_id
        self._calls = 0
        """Calls seen so far: the next call's position."""
        self._model_sent = False

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one line.

        Raises `ProviderError` for an error line, `ConverterError` for a line that does not
        fit (naming the field) and `StreamDecodeError` for bytes that are not JSON.
        """
        self._event_number += 1
        line = _decode_line(item, self._event_number)
        if line.error is not None:
            raise in_band_error(event_mapping(item), f"event {self._event_number}")
        chunks = self._content(line)
        if line.done:
            chunks.append(self._last(line))
        return chunks

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a stream without ``done: true`` stays without ``is_complete``."""
        return []

    def _content(self, line: OllamaLine) -> list[ChunkResponse]:
        """The line's text, reasoning and calls (chat nests them in ``message``), and the model once."""
        message = line.message
        if message is None:
            text, reasoning, calls, where = line.response, line.thinking, line.tool_calls, "tool_calls"
        else:
            text, reasoning, calls = message.content, message.thinking, message.tool_calls
            where = "message.tool_calls"
        metadata = None
        if not self._model_sent and line.model:
            self._model_sent = True
            metadata = {"model": line.model}
        if not (text or reasoning or calls or metadata):
            return []
        deltas = self._calls_of(calls, where) if calls else None
        return [
            ChunkResponse(
                content=text or "", reasoning=reasoning or None, tool_calls=deltas, metadata=metadata
            )
        ]

    def _calls_of(self, calls: list[OllamaToolCall], where: str) -> list[ToolCallDelta]:
        deltas = []
        for number, call in enumerate(calls):
            function = call.function
            if function is None or not function.name:
                name = None if function is None else function.name
                field = f"{where}[{number}].function.name"
                raise field_error(self._event_number, field, "a non-empty string", name)
            name = function.name
            index = self._calls
            self._calls += 1
            arguments = function.arguments
            text = "{}" if arguments is None else _encode(arguments).decode()
            call_id = call.id or self._new_call_id(index)
            deltas.append(ToolCallDelta(index, call_id, name, text, finished=True))
        return deltas

    def _last(self, line: OllamaLine) -> ChunkResponse:
        """The ``done`` line's finish reason, timings and token counts."""
        reason = line.done_reason
        finish_reason = "stop" if reason is None else _FINISH_REASONS.get(reason, reason)
        if finish_reason == "stop" and self._calls:
            finish_reason = "tool_calls"
        metadata: dict[str, Any] = {} if reason is None else {"stop_reason": reason}
        metadata.update((name, value) for name in _DURATIONS if (value := getattr(line, name)) is not None)
        return ChunkResponse(
            is_complete=True, finish_reason=finish_reason, usage=_usage(line), metadata=metadata or None
        )


def _usage(line: OllamaLine) -> TokenUsage | None:
    """The token counts of the ``done`` line, or ``None`` if it has neither count."""
    prompt, completion = line.prompt_eval_count, line.eval_count
    if prompt is None and completion is None:
        return None
    prompt, completion = prompt or 0, completion or 0
    return TokenUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


@pipable_operator
def convert_ollama(
    source: AsyncIterable[Payload | Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Convert Ollama ``/api/chat`` or ``/api/generate`` lines (payloads or dicts) into
    `ChunkResponse` items.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, OllamaConverter(id_factory=id_factory))
