"""Cohere v2 chat stream events -> `ChunkResponse`.

- ``message-start`` -> ``metadata["id"]``.
- ``content-start`` / ``content-delta``: ``delta.message.content.text`` -> ``content``; the ``thinking``
  text of reasoning models -> ``reasoning``.
- ``tool-plan-delta`` (``delta.message.tool_plan``) -> ``reasoning``: the plan is the model's reasoning about
  which tools to call.
- ``tool-call-start`` / ``tool-call-delta`` / ``tool-call-end`` -> `ToolCallDelta` at the position of
  the event's ``index`` (first appearance order), with the call's ``id`` and ``function.name`` at the start,
  arguments text on the deltas, and ``finished`` at the end.
- ``message-end`` -> the last chunk: ``finish_reason`` (COMPLETE and STOP_SEQUENCE -> stop, MAX_TOKENS ->
  length, TOOL_CALL -> tool_calls, ERROR -> error, else the word lower-cased; the word itself in
  ``metadata["stop_reason"]``, and an ``error`` message in ``metadata["error"]``) and usage. Usage prefers
  ``usage.tokens`` (what the model processed) over ``usage.billed_units``.

Each event, the bytes of a framed `Payload` or a dict, is decoded once into
`CohereEvent`: one Struct for every event type, its ``type`` a
plain string, not a tag, so that an event type this module does not know decodes like the others and is
skipped (forward compatibility).
Citation events and event types not listed are skipped. A field that has the wrong type (a call ``id`` or
message ``id`` that is not a string, a ``usage.tokens`` that is not an object, ...) raises
`ConverterError` naming it, rather than being dropped or replaced by a default. An
in-band error (``{"type": "error", ...}``, or an ``error`` object without a ``type``) raises
`ProviderError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any, Final, TypeAlias

import msgspec
from aiostream import pipable_operator

from operators.convert._base import MISSING, CallIndexer, EventDecoder, IdFactory, field_error, new_call_id
from operators.convert._cohere_schema import (
    CohereContent,
    CohereDelta,
    CohereEvent,
    CohereFunction,
    CohereMessage,
    CohereToolCall,
    CohereUsage,
    Count,
)
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta
from pipeline.stage import operator_stream

__all__ = ["CohereConverter", "convert_cohere"]

_FINISH_REASONS: Final[Mapping[str, str]] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
    "ERROR": "error",
}

Chunks: TypeAlias = list[ChunkResponse]
_decode_event = EventDecoder(CohereEvent).decode


class CohereConverter:
    """Sans-IO converter of Cohere v2 chat stream events (payloads or dicts) into `ChunkResponse`.

    ``id_factory(index)`` makes the id of a call the server sent without one.
    """

    __slots__ = ("_calls", "_event_number", "_handlers", "_last_key", "_new_call_id", "_open_calls")

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._handlers: Mapping[str, Callable[[CohereEvent], Chunks]] = {
            "message-start": self._on_message_start,
            "content-start": self._on_content,
            "content-delta": self._on_content,
            "tool-plan-delta": self._on_tool_plan_delta,
            "tool-call-start": self._on_tool_call_start,
            "tool-call-delta": self._on_tool_call_delta,
            "tool-call-end": self._on_tool_call_end,
            "message-end": self._on_message_end,
        }
        self._event_number = -1
        """The number of the event being converted (0 for the first), for error messages."""
        self._new_call_id: IdFactory = id_factory or new_call_id
        self._calls = CallIndexer()
        self._open_calls: set[int] = set()
        self._last_key: int | None = None
        """The provider index of the call started last, for deltas that carry no ``index``."""

    def feed(self, item: Payload | Mapping[str, Any], /) -> Chunks:
        """Convert one event; event types without a handler give nothing.

        Raises `ProviderError` for an in-band error, `ConverterError` for an event that does
        not fit (naming the event and the field) and `StreamDecodeError` for
        bytes that are not JSON."""
        self._event_number += 1
        event = _decode_event(item, self._event_number)
        kind = event.type
        if kind is None or kind == "error":
            if kind is None and event.error is None:
                raise field_error(self._event_number, "type", "a string")
            raise self._provider_error(event, item)
        handler = self._handlers.get(kind)
        return [] if handler is None else handler(event)

    def finish(self) -> Chunks:
        """Nothing is held back; a stream without ``message-end`` stays without ``is_complete``."""
        return []

    def _on_message_start(self, event: CohereEvent) -> Chunks:
        # A new message starts a new response: call positions restart at 0.
        self._calls = CallIndexer()
        self._open_calls.clear()
        self._last_key = None
        return [ChunkResponse(metadata={"id": event.id})] if event.id else []

    def _on_content(self, event: CohereEvent) -> Chunks:
        content = self._message(event).content
        if content is None:
            return []
        if not isinstance(content, CohereContent):
            raise self._field_error(event, "delta.message.content", "an object", content)
        text, thinking = content.text, content.thinking
        if not text and not thinking:
            return []
        return [ChunkResponse(content=text or "", reasoning=thinking or None)]

    def _on_tool_plan_delta(self, event: CohereEvent) -> Chunks:
        plan = self._message(event).tool_plan
        return [ChunkResponse(reasoning=plan)] if plan else []

    def _on_tool_call_start(self, event: CohereEvent) -> Chunks:
        call = self._tool_call(event)
        function = self._function(event, call)
        name = function.name
        if not name:
            raise self._field_error(
                event, "delta.message.tool_calls.function.name", "a non-empty string", name
            )
        key = self._call_key(event, starting=True)
        if key in self._calls:
            raise ConverterError(
                f"event {self._event_number} (tool-call-start): call index {key} was already started",
                event_number=self._event_number,
            )
        index = self._calls.position(key)
        self._open_calls.add(index)
        self._last_key = key
        call_id = call.id or self._new_call_id(index)
        return [ChunkResponse(tool_calls=[ToolCallDelta(index, call_id, name, function.arguments or None)])]

    def _on_tool_call_delta(self, event: CohereEvent) -> Chunks:
        arguments = self._function(event, self._tool_call(event)).arguments
        index = self._open_call(event)
        return (
            [ChunkResponse(tool_calls=[ToolCallDelta(index, arguments_delta=arguments)])] if arguments else []
        )

    def _on_tool_call_end(self, event: CohereEvent) -> Chunks:
        index = self._open_call(event)
        self._open_calls.discard(index)
        return [ChunkResponse(tool_calls=[ToolCallDelta(index, finished=True)])]

    def _on_message_end(self, event: CohereEvent) -> Chunks:
        delta = event.delta or CohereDelta()
        reason = delta.finish_reason
        metadata: dict[str, Any] = {}
        finish_reason = None
        if reason:
            finish_reason = _FINISH_REASONS.get(reason, reason.lower())
            metadata["stop_reason"] = reason
        if delta.error:
            metadata["error"] = delta.error
        return [
            ChunkResponse(
                is_complete=True,
                usage=self._usage(delta.usage),
                finish_reason=finish_reason,
                metadata=metadata or None,
            )
        ]

    def _usage(self, usage: CohereUsage | None) -> TokenUsage | None:
        counts = None if usage is None else usage.tokens or usage.billed_units
        if usage is None or counts is None:
            return None
        prompt = self._count(counts.input_tokens, "input_tokens") or 0
        completion = self._count(counts.output_tokens, "output_tokens") or 0
        return TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cached_tokens=self._count(usage.cached_tokens, "cached_tokens"),
        )

    # -- helpers -------------------------------------------------------------------------------------

    def _call_key(self, event: CohereEvent, *, starting: bool) -> int:
        """The provider's index of the call an event is about (the last started one if none is given)."""
        key = event.index
        if key is None:
            if starting or self._last_key is None:
                raise self._field_error(event, "index", "an integer", MISSING)
            return self._last_key
        return key

    def _open_call(self, event: CohereEvent) -> int:
        key = self._call_key(event, starting=False)
        index = self._calls.get(key)
        if index is None or index not in self._open_calls:
            raise ConverterError(
                f"event {self._event_number} ({event.type}): call index {key} is not open "
                "(no tool-call-start, or it already ended)",
                event_number=self._event_number,
            )
        return index

    def _message(self, event: CohereEvent) -> CohereMessage:
        message = None if event.delta is None else event.delta.message
        if message is None:
            raise self._field_error(event, "delta.message", "an object", MISSING)
        return message

    def _tool_call(self, event: CohereEvent) -> CohereToolCall:
        call = self._message(event).tool_calls
        if not isinstance(call, CohereToolCall):
            raise self._field_error(event, "delta.message.tool_calls", "an object", call)
        return call

    def _function(self, event: CohereEvent, call: CohereToolCall) -> CohereFunction:
        if call.function is None:
            raise self._field_error(event, "delta.message.tool_calls.function", "an object", MISSING)
        return call.function

    def _field_error(self, event: CohereEvent, field: str, expected: str, value: object) -> ConverterError:
        return field_error(self._event_number, field, expected, value, event_type=event.type)

    def _count(self, value: Count, field: str) -> int | None:
        if value is None or isinstance(value, int):
            return value
        if not value.is_integer():
            raise field_error(self._event_number, f"usage {field}", "a whole number", value)
        return int(value)

    def _provider_error(self, event: CohereEvent, item: Payload | Mapping[str, Any]) -> ProviderError:
        """The `ProviderError` of an in-band error event, carrying the event."""
        payload: Any = msgspec.json.decode(item.data) if isinstance(item, Payload) else item
        error = event.error
        details = error if isinstance(error, Mapping) else payload
        if event.type is None and not isinstance(error, Mapping):
            details = {"message": str(error)}
        return ProviderError.from_payload(details, payload, f"event {self._event_number}")


@pipable_operator
def convert_cohere(
    source: AsyncIterable[Payload | Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Convert Cohere v2 chat stream events (payloads or dicts) into `ChunkResponse` items.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, CohereConverter(id_factory=id_factory))
