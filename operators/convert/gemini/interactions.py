"""The Gemini Interactions API converter: ``event_type`` events -> chunks.

A Gemini stream whose events carry an ``event_type`` is an Interactions API stream::

    interaction.created {interaction: {id, model}}
    step.start {index, step: {type: thought | text | function_call {id, name, arguments}}}
    step.delta {index, delta: {type: text | thought_summary | thought_signature | arguments_delta}}
    step.stop {index}                                     a function_call step is complete
    interaction.completed {interaction: {status, usage}}  requires_action / completed -> the finish

(``content.start`` / ``content.delta`` / ``content.stop`` are taken as the older names of the step events.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from operators.convert._base import IdFactory, is_mapping, new_call_id
from operators.convert.gemini._common import converter_error, provider_error, token_usage
from operators.convert.gemini._partial_args import json_text
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta

__all__ = ["InteractionsConverter"]

_USAGE_FIELDS: Final = (
    "total_input_tokens",
    "total_output_tokens",
    "total_thought_tokens",
    "total_cached_tokens",
    "total_tokens",
)


class _StepCall:
    """An Interactions API ``function_call`` step whose ``step.stop`` has not arrived."""

    __slots__ = ("arguments", "position", "streamed")

    def __init__(self, position: int, arguments: Mapping[str, Any] | None) -> None:
        self.position = position
        self.arguments = arguments
        """The step's ``arguments`` object: the arguments if no ``arguments_delta`` follows."""
        self.streamed = False


class InteractionsConverter:
    """Sans-IO core: one Interactions API event (a dict) in, the chunks it carries out.

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

    def feed(self, event: Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one event; event types this version does not know give nothing."""
        self._event_number += 1
        if not is_mapping(event):
            raise self._error("the chunk", f"is a {type(event).__name__}, not a mapping")
        if event.get("error") is not None:
            raise provider_error(event, self._event_number)
        return self._interaction_event(event, event.get("event_type"))

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a step never stopped stays unfinished on purpose."""
        return []

    def _interaction_event(self, event: Mapping[str, Any], event_type: Any) -> list[ChunkResponse]:
        if event_type in ("step.start", "content.start"):
            return self._step_start(event)
        if event_type in ("step.delta", "content.delta"):
            return self._step_delta(event)
        if event_type in ("step.stop", "content.stop"):
            return self._step_stop(event)
        if event_type in (
            "interaction.created",
            "interaction.start",
            "interaction.completed",
            "interaction.complete",
        ):
            return self._interaction(event, completed=event_type.startswith("interaction.complete"))
        if event_type == "error":
            raise provider_error(event, self._event_number)
        return []  # interaction.status_update and event types this version does not know

    def _interaction(self, event: Mapping[str, Any], *, completed: bool) -> list[ChunkResponse]:
        interaction = self._mapping(event, "interaction")
        metadata: dict[str, Any] = {}
        for key in ("id", "model", "service_tier"):
            value = interaction.get(key)
            if isinstance(value, str) and self._known_metadata.get(key) != value:
                metadata[key] = self._known_metadata[key] = value
        usage = self._interaction_usage(interaction.get("usage"))
        finish_reason = None
        if completed:
            status = interaction.get("status")
            if not isinstance(status, str):
                raise self._error("interaction.status", "is missing or not a string")
            metadata["stop_reason"] = status
            if status in ("completed", "requires_action"):
                finish_reason = "tool_calls" if self._made_function_call else "stop"
            else:
                finish_reason = status.lower()
        if not metadata and usage is None and not completed:
            return []
        return [
            ChunkResponse(
                usage=usage, finish_reason=finish_reason, metadata=metadata or None, is_complete=completed
            )
        ]

    def _step_start(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        step_index = self._index(event)
        step = event.get("step", event.get("content"))
        if not is_mapping(step):
            raise self._error("step", "is missing or not a mapping")
        step_type = step.get("type")
        if step_type == "text":
            text = step.get("text")
            return [ChunkResponse(content=text)] if isinstance(text, str) and text else []
        if step_type != "function_call":
            return []  # thought steps stream their text and signature as deltas
        name = step.get("name")
        if not isinstance(name, str) or not name:
            raise self._error("step.name", "is missing or not a string")
        arguments = step.get("arguments")
        if arguments is not None and not is_mapping(arguments):
            raise self._error("step.arguments", "is not a mapping")
        if step_index in self._step_calls:
            raise self._error("step.start", f"starts step {step_index} again before its stop")
        position = self._call_count
        self._call_count += 1
        self._made_function_call = True
        call_id = step.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = self._id_factory(position)
        signature = step.get("signature")
        self._step_calls[step_index] = _StepCall(position, arguments or None)
        delta = ToolCallDelta(
            position, call_id, name, signature=signature if isinstance(signature, str) and signature else None
        )
        return [ChunkResponse(tool_calls=[delta])]

    def _step_delta(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        step_index = self._index(event)
        delta = self._mapping(event, "delta")
        delta_type = delta.get("type")
        if delta_type == "text":
            text = self._delta_string(delta, "text")
            return [ChunkResponse(content=text)] if text else []
        if delta_type in ("thought_summary", "thought"):
            content = delta.get("content")
            text = self._delta_string(content if is_mapping(content) else delta, "text")
            return [ChunkResponse(reasoning=text)] if text else []
        if delta_type == "thought_signature":
            signature = self._delta_string(delta, "signature")
            return [ChunkResponse(reasoning_signature=signature)] if signature else []
        if delta_type == "arguments_delta":
            call = self._step_calls.get(step_index)
            if call is None:
                raise self._error(
                    "step.delta", f"has arguments for step {step_index}, not an open function call"
                )
            arguments = self._delta_string(delta, "arguments")
            if not arguments:
                return []
            call.streamed = True
            return [ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments)])]
        return []  # delta types this version does not know

    def _step_stop(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        call = self._step_calls.pop(self._index(event), None)
        if call is None:
            return []
        arguments = None if call.streamed or not call.arguments else json_text(call.arguments)
        return [
            ChunkResponse(tool_calls=[ToolCallDelta(call.position, arguments_delta=arguments, finished=True)])
        ]

    def _interaction_usage(self, raw: Any) -> TokenUsage | None:
        return token_usage(raw, self._event_number, "interaction.usage", _USAGE_FIELDS)

    def _index(self, event: Mapping[str, Any]) -> int:
        value = event.get("index")
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._error("index", "is missing or not an integer")
        return value

    def _mapping(self, owner: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = owner.get(key)
        if not is_mapping(value):
            raise self._error(key, "is missing or not a mapping")
        return value

    def _delta_string(self, owner: Mapping[str, Any], key: str) -> str:
        """The string at ``key`` (``""`` when absent)."""
        value = owner.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._error(f"delta.{key}", "is not a string")
        return value

    def _error(self, where: str, problem: str) -> ConverterError:
        return converter_error(self._event_number, where, problem)
