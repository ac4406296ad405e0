"""Cohere v2 chat stream events -> :class:`~pipeline.models.ChunkResponse`.

- ``message-start`` -> ``metadata["id"]``.
- ``content-start`` / ``content-delta``: ``delta.message.content.text`` -> ``content``; the ``thinking``
  text of reasoning models -> ``reasoning``.
- ``tool-plan-delta`` (``delta.message.tool_plan``) -> ``reasoning``: the plan is the model's reasoning about
  which tools to call.
- ``tool-call-start`` / ``tool-call-delta`` / ``tool-call-end`` -> :class:`ToolCallDelta` at the position of
  the event's ``index`` (first appearance order), with the call's ``id`` and ``function.name`` at the start,
  arguments text on the deltas, and ``finished`` at the end.
- ``message-end`` -> the last chunk: ``finish_reason`` (COMPLETE and STOP_SEQUENCE -> stop, MAX_TOKENS ->
  length, TOOL_CALL -> tool_calls, ERROR -> error, else the word lower-cased; the word itself in
  ``metadata["stop_reason"]``, and an ``error`` message in ``metadata["error"]``) and usage. Usage prefers
  ``usage.tokens`` (what the model processed) over ``usage.billed_units``.

Citation events and event types not listed are skipped. A field of a listed event that has the wrong type
(a call ``id`` or message ``id`` that is not a string, a ``usage.tokens`` that is not an object, ...) raises
:class:`~pipeline.errors.ConverterError` naming it, rather than being dropped or replaced by a default.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final, TypeAlias

from aiostream import pipable_operator

from operators.convert._base import CallIndexer, IdFactory, TypedEventConverter, is_mapping, new_call_id
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
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


class CohereConverter(TypedEventConverter):
    """Sans-IO converter of Cohere v2 chat stream events (dicts) into :class:`ChunkResponse`.

    ``id_factory(index)`` makes the id of a call the server sent without one.
    """

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        super().__init__(
            {
                "message-start": self._on_message_start,
                "content-start": self._on_content,
                "content-delta": self._on_content,
                "tool-plan-delta": self._on_tool_plan_delta,
                "tool-call-start": self._on_tool_call_start,
                "tool-call-delta": self._on_tool_call_delta,
                "tool-call-end": self._on_tool_call_end,
                "message-end": self._on_message_end,
            }
        )
        self._new_call_id: IdFactory = id_factory or new_call_id
        self._calls = CallIndexer()
        self._open_calls: set[int] = set()
        self._last_key: int | None = None
        """The provider index of the call started last, for deltas that carry no ``index``."""

    def finish(self) -> Chunks:
        """Nothing is held back; a stream without ``message-end`` stays without ``is_complete``."""
        return []

    def _on_message_start(self, event: Mapping[str, Any]) -> Chunks:
        # A new message starts a new response: call positions restart at 0.
        self._calls = CallIndexer()
        self._open_calls.clear()
        self._last_key = None
        message_id = self._optional_text(event, event, "id")
        return [ChunkResponse(metadata={"id": message_id})] if message_id else []

    def _on_content(self, event: Mapping[str, Any]) -> Chunks:
        content = self._message(event).get("content")
        if content is None:
            return []
        if not is_mapping(content):
            raise self._field_error(event, "delta.message.content", "an object")
        text = self._optional_text(event, content, "text")
        thinking = self._optional_text(event, content, "thinking")
        if not text and not thinking:
            return []
        return [ChunkResponse(content=text or "", reasoning=thinking or None)]

    def _on_tool_plan_delta(self, event: Mapping[str, Any]) -> Chunks:
        plan = self._optional_text(event, self._message(event), "tool_plan")
        return [ChunkResponse(reasoning=plan)] if plan else []

    def _on_tool_call_start(self, event: Mapping[str, Any]) -> Chunks:
        call = self._tool_call(event)
        function = call.get("function")
        if not is_mapping(function):
            raise self._field_error(event, "delta.message.tool_calls.function", "an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise self._field_error(event, "delta.message.tool_calls.function.name", "a non-empty string")
        key = self._call_key(event, starting=True)
        if key in self._calls:
            raise ConverterError(
                f"event {self._event_number} (tool-call-start): call index {key} was already started",
                event_number=self._event_number,
            )
        index = self._calls.position(key)
        self._open_calls.add(index)
        self._last_key = key
        call_id = self._optional_text(event, call, "id", "delta.message.tool_calls.id")
        if not call_id:
            call_id = self._new_call_id(index)
        arguments = self._optional_text(event, function, "arguments") or None
        return [ChunkResponse(tool_calls=[ToolCallDelta(index, call_id, name, arguments)])]

    def _on_tool_call_delta(self, event: Mapping[str, Any]) -> Chunks:
        function = self._tool_call(event).get("function")
        if not is_mapping(function):
            raise self._field_error(event, "delta.message.tool_calls.function", "an object")
        arguments = self._optional_text(event, function, "arguments")
        index = self._open_call(event)
        return (
            [ChunkResponse(tool_calls=[ToolCallDelta(index, arguments_delta=arguments)])] if arguments else []
        )

    def _on_tool_call_end(self, event: Mapping[str, Any]) -> Chunks:
        index = self._open_call(event)
        self._open_calls.discard(index)
        return [ChunkResponse(tool_calls=[ToolCallDelta(index, finished=True)])]

    def _on_message_end(self, event: Mapping[str, Any]) -> Chunks:
        delta = event.get("delta")
        if delta is None:
            delta = {}
        if not is_mapping(delta):
            raise self._field_error(event, "delta", "an object")
        reason = self._optional_text(event, delta, "finish_reason", "delta.finish_reason")
        metadata: dict[str, Any] = {}
        finish_reason = None
        if reason:
            finish_reason = _FINISH_REASONS.get(reason, reason.lower())
            metadata["stop_reason"] = reason
        error = self._optional_text(event, delta, "error", "delta.error")
        if error:
            metadata["error"] = error
        return [
            ChunkResponse(
                is_complete=True,
                usage=self._usage(event, delta.get("usage")),
                finish_reason=finish_reason,
                metadata=metadata or None,
            )
        ]

    def _usage(self, event: Mapping[str, Any], usage: object) -> TokenUsage | None:
        if usage is None:
            return None
        if not is_mapping(usage):
            raise self._field_error(event, "delta.usage", "an object")
        counts = None
        for field in ("tokens", "billed_units"):
            counts = usage.get(field)
            if counts is None:
                continue
            if not is_mapping(counts):
                raise self._field_error(event, f"delta.usage.{field}", "an object")
            break
        if counts is None:
            return None
        prompt = self._count(event, counts, "input_tokens") or 0
        completion = self._count(event, counts, "output_tokens") or 0
        return TokenUsage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cached_tokens=self._count(event, usage, "cached_tokens"),
        )

    # -- helpers -------------------------------------------------------------------------------------

    def _call_key(self, event: Mapping[str, Any], *, starting: bool) -> int:
        """The provider's index of the call an event is about (the last started one if none is given)."""
        key = event.get("index")
        if key is None and not starting and self._last_key is not None:
            return self._last_key
        if isinstance(key, bool) or not isinstance(key, int):
            raise self._field_error(event, "index", "an integer")
        return key

    def _open_call(self, event: Mapping[str, Any]) -> int:
        key = self._call_key(event, starting=False)
        index = self._calls.get(key)
        if index is None or index not in self._open_calls:
            raise ConverterError(
                f"event {self._event_number} ({event.get('type')}): call index {key} is not open "
                "(no tool-call-start, or it already ended)",
                event_number=self._event_number,
            )
        return index

    def _message(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        delta = event.get("delta")
        message = delta.get("message") if is_mapping(delta) else None
        if not is_mapping(message):
            raise self._field_error(event, "delta.message", "an object")
        return message

    def _tool_call(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        call = self._message(event).get("tool_calls")
        if not is_mapping(call):
            raise self._field_error(event, "delta.message.tool_calls", "an object")
        return call

    def _optional_text(
        self, event: Mapping[str, Any], container: Mapping[str, Any], field: str, where: str | None = None
    ) -> str | None:
        """The string at ``field`` (``None`` when absent); another type raises, naming ``where``."""
        value = container.get(field)
        if value is not None and not isinstance(value, str):
            raise self._field_error(event, where or field, "a string")
        return value

    def _count(self, event: Mapping[str, Any], container: Mapping[str, Any], field: str) -> int | None:
        value = container.get(field)
        if value is None:
            return None
        # Cohere reports counts as JSON numbers that may be floats (1549.0).
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self._field_error(event, f"usage {field}", "a whole number")
        return int(value)


@pipable_operator
def convert_cohere(
    source: AsyncIterable[Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Convert Cohere v2 chat stream events (dicts) into :class:`ChunkResponse` items."""
    return operator_stream(source, CohereConverter(id_factory=id_factory))
