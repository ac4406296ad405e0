"""The Gemini Interactions API converter: ``event_type`` events (framed bytes or dicts) -> chunks.

A Gemini stream whose events carry an ``event_type`` is an Interactions API stream::

    interaction.created {interaction: {id, model}}
    step.start {index, step: {type: thought | text | function_call {id, name, arguments}}}
    step.delta {index, delta: {type: text | thought_summary | thought_signature | arguments_delta}}
    step.stop {index}                                     a function_call step is complete
    interaction.completed {interaction: {status, usage}}  requires_action / completed -> the finish

(``content.start`` / ``content.delta`` / ``content.stop`` are taken as the older names of the step events.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from operators.convert._base import EventDecoder, IdFactory, is_mapping, new_call_id
from operators.convert.gemini._common import converter_error, provider_error, token_usage
from operators.convert.gemini._partial_args import json_text
from operators.convert.gemini._schema import Interaction, InteractionEvent, InteractionStep, StepDelta
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, Payload, ToolCallDelta

__all__ = ["InteractionsConverter"]

_DECODE: Final = EventDecoder(InteractionEvent).decode

_INTERACTION: Final[dict[str | None, bool]] = {
    "interaction.created": False,
    "interaction.start": False,
    "interaction.completed": True,
    "interaction.complete": True,
}
"""The events that carry the interaction, and whether they complete it."""


class _StepCall:
    """An Interactions API ``function_call`` step whose ``step.stop`` has not arrived."""

    __slots__ = ("arguments", "position", "streamed")

    def __init__(self, position: int, arguments: Mapping[str, Any] | None) -> None:
        self.position = position
        self.arguments = arguments
        """The step's ``arguments`` object: the arguments if no ``arguments_delta`` follows."""
        self.streamed = False


class InteractionsConverter:
    """Sans-IO core: one Interactions API event (framed bytes or a dict) in, the chunks it carries out.

    ``id_factory`` names the function calls sent without an ``id``."""

    __slots__ = (
        "_call_count",
        "_event_number",
        "_id_factory",
        "_known_metadata",
        "_made_function_call",
        "_step_calls",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._id_factory: IdFactory = id_factory or new_call_id
        self._event_number = -1
        self._call_count = 0
        self._made_function_call = False
        self._known_metadata: dict[str, Any] = {}
        self._step_calls: dict[int, _StepCall] = {}

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one event; event types this version does not know give nothing."""
        number = self._event_number = self._event_number + 1
        event = _DECODE(item, number)
        event_type = event.event_type
        if event.error is not None or event_type == "error":
            raise provider_error(item, event.error, number)
        step = _STEP_EVENTS.get(event_type)
        if step is not None:
            return step(self, event)
        completes = _INTERACTION.get(event_type)
        if completes is None:
            return []  # interaction.status_update and event types this version does not know
        if event.interaction is None:
            raise self._error("interaction", "is missing or not a mapping")
        return self._interaction(event.interaction, completed=completes)

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a step never stopped stays unfinished on purpose."""
        return []

    def _interaction(self, interaction: Interaction, *, completed: bool) -> list[ChunkResponse]:
        metadata: dict[str, Any] = {}
        for key, value in (
            ("id", interaction.id),
            ("model", interaction.model),
            ("service_tier", interaction.service_tier),
        ):
            if isinstance(value, str) and self._known_metadata.get(key) != value:
                metadata[key] = self._known_metadata[key] = value
        raw = interaction.usage
        usage = None
        if raw is not None:
            usage = token_usage(
                raw.total_input_tokens,
                raw.total_output_tokens,
                raw.total_thought_tokens,
                raw.total_cached_tokens,
                raw.total_tokens,
            )
        finish_reason = self._finish_reason(interaction, metadata) if completed else None
        if not metadata and usage is None and not completed:
            return []
        return [
            ChunkResponse(
                usage=usage, finish_reason=finish_reason, metadata=metadata or None, is_complete=completed
            )
        ]

    def _finish_reason(self, interaction: Interaction, metadata: dict[str, Any]) -> str:
        """The finish reason of a completed interaction, in OpenAI's words; its status goes to metadata."""
        status = interaction.status
        if not isinstance(status, str):
            raise self._error("interaction.status", "is missing or not a string")
        metadata["stop_reason"] = status
        if status in ("completed", "requires_action"):
            return "tool_calls" if self._made_function_call else "stop"
        return status.lower()

    def _step_start(self, event: InteractionEvent) -> list[ChunkResponse]:
        step_index = self._index(event)
        step = event.step if event.step is not None else event.content
        if step is None:
            raise self._error("step", "is missing or not a mapping")
        if step.type == "text":
            text = _nonempty(step.text)
            return [ChunkResponse(content=text)] if text else []
        if step.type != "function_call":
            return []  # thought steps stream their text and signature as deltas
        return [ChunkResponse(tool_calls=[self._start_call(step, step_index)])]

    def _start_call(self, step: InteractionStep, step_index: int) -> ToolCallDelta:
        """The first delta of a ``function_call`` step; its arguments come with the deltas or the stop."""
        name = _nonempty(step.name)
        if name is None:
            raise self._error("step.name", "is missing or not a string")
        arguments = step.arguments
        if arguments is not None and not is_mapping(arguments):
            raise self._error("step.arguments", "is not a mapping")
        if step_index in self._step_calls:
            raise self._error("step.start", f"starts step {step_index} again before its stop")
        position = self._call_count
        self._call_count += 1
        self._made_function_call = True
        call_id = _nonempty(step.id) or self._id_factory(position)
        self._step_calls[step_index] = _StepCall(position, arguments or None)
        return ToolCallDelta(position, call_id, name, signature=_nonempty(step.signature))

    def _step_delta(self, event: InteractionEvent) -> list[ChunkResponse]:
        step_index = self._index(event)
        delta = event.delta
        if delta is None:
            raise self._error("delta", "is missing or not a mapping")
        delta_type = delta.type
        if delta_type == "text":
            text = self._delta_string(delta.text, "text")
            return [ChunkResponse(content=text)] if text else []
        if delta_type in ("thought_summary", "thought"):
            content = delta.content
            text = self._delta_string(content.get("text") if is_mapping(content) else delta.text, "text")
            return [ChunkResponse(reasoning=text)] if text else []
        if delta_type == "thought_signature":
            signature = self._delta_string(delta.signature, "signature")
            return [ChunkResponse(reasoning_signature=signature)] if signature else []
        if delta_type == "arguments_delta":
            return self._arguments_delta(delta, step_index)
        return []  # delta types this version does not know

    def _arguments_delta(self, delta: StepDelta, step_index: int) -> list[ChunkResponse]:
        call = self._step_calls.get(step_index)
        if call is None:
            raise self._error("step.delta", f"has arguments for step {step_index}, not an open function call")
        arguments = self._delta_string(delta.arguments, "arguments")
        if not arguments:
            return []
        call.streamed = True
        return [ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments)])]

    def _step_stop(self, event: InteractionEvent) -> list[ChunkResponse]:
        call = self._step_calls.pop(self._index(event), None)
        if call is None:
            return []
        arguments = None if call.streamed or not call.arguments else json_text(call.arguments)
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments, finished=True)])
        ]

    def _index(self, event: InteractionEvent) -> int:
        value = event.index
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._error("index", "is missing or not an integer")
        return value

    def _delta_string(self, value: Any, key: str) -> str:
        """The string ``value`` of the delta's ``key`` (``""`` when absent)."""
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._error(f"delta.{key}", "is not a string")
        return value

    def _error(self, where: str, problem: str) -> ConverterError:
        return converter_error(self._event_number, where, problem)


def _nonempty(value: Any) -> str | None:
    """A field that must be a non-empty string when present: the string, else None."""
    return value if isinstance(value, str) and value else None


_STEP_EVENTS: Final[
    dict[str | None, Callable[[InteractionsConverter, InteractionEvent], list[ChunkResponse]]]
] = {
    "step.start": InteractionsConverter._step_start,
    "content.start": InteractionsConverter._step_start,
    "step.delta": InteractionsConverter._step_delta,
    "content.delta": InteractionsConverter._step_delta,
    "step.stop": InteractionsConverter._step_stop,
    "content.stop": InteractionsConverter._step_stop,
}
"""The handler of each step event type (both spellings the Interactions API streams)."""
