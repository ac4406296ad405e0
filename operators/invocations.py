"""The invocation folder: segment events in, the same events out with a `ToolInvocation` right after
the END of each tool segment.

Exactly one invocation per call; its ``id`` is the segment id, which is the provider's call id. Arguments
that could not be parsed give an invocation carrying the error and the raw text, never a silent ``{}``.
With ``tools``, the arguments are also validated against each tool's pydantic model or JSON-schema'd
type; a failed validation is an ``invalid_arguments`` error on the invocation.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, TypeAlias

import msgspec
import pydantic
from aiostream import pipable_operator

from pipeline.errors import ConfigurationError
from pipeline.models import (
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    ToolCallError,
    ToolInvocation,
)
from pipeline.stage import operator_stream

__all__ = ["InvocationFolder", "ToolSchemas", "fold_invocations"]

ToolSchemas: TypeAlias = Mapping[str, type[pydantic.BaseModel] | pydantic.TypeAdapter[Any]]
"""Tool name -> the pydantic model (or ``TypeAdapter``) its arguments must validate against."""

_CONTENT = SegmentEventType.CONTENT
_ARGUMENT = SegmentEventType.ARGUMENT
_TOOL_SEGMENTS = frozenset({SegmentType.TOOL_CALL, SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})


class InvocationFolder:
    """Sans-IO core of `fold_invocations`.

    ``feed`` returns the event itself, followed by the invocation it completes, if any. ``invocations``
    lists every invocation folded so far (the synchronous handlers' ``get_all_invocations``).

    Args:
        tools: tool name -> the pydantic model (or `TypeAdapter`) its arguments are validated against.

    Raises:
        ConfigurationError: ``tools`` is not a mapping.
    """

    def __init__(self, *, tools: ToolSchemas | None = None) -> None:
        if tools is not None and not isinstance(tools, Mapping):
            raise ConfigurationError(f"tools must map tool names to pydantic models, got {tools!r}")
        self._adapters = {name: _adapter(name, schema) for name, schema in (tools or {}).items()}
        self._tool_segments: dict[str, dict[str, Any]] = {}
        self._folded: set[str] = set()
        self.invocations: list[ToolInvocation] = []

    def passes(self, event: SegmentEvent | ToolInvocation | ResponseEnd) -> bool:
        """Whether ``feed`` would pass ``event`` on alone and keep nothing of it: a content or argument
        event (the `pipeline.stage.Core` pass-through contract)."""
        return type(event) is SegmentEvent and (event.event_type is _CONTENT or event.event_type is _ARGUMENT)

    def feed(
        self, event: SegmentEvent | ToolInvocation | ResponseEnd
    ) -> list[SegmentEvent | ToolInvocation | ResponseEnd]:
        """Pass ``event`` on (an invocation folded already, too); after a tool call's END, the folded
        `ToolInvocation` follows it."""
        if type(event) is SegmentEvent and event.event_type is _CONTENT:  # most events: passed through
            return [event]
        if not isinstance(event, SegmentEvent):
            return [event]
        event_type = event.event_type
        if event_type is SegmentEventType.START:
            if event.segment_type in _TOOL_SEGMENTS:
                self._tool_segments[event.segment_id] = event.metadata
            return [event]
        if event_type is SegmentEventType.END:
            start_metadata = self._tool_segments.pop(event.segment_id, None)
            if start_metadata is not None and event.segment_id not in self._folded:
                self._folded.add(event.segment_id)
                invocation = self._fold(event.segment_id, start_metadata, event.metadata)
                self.invocations.append(invocation)
                return [event, invocation]
        return [event]

    def finish(self) -> list[SegmentEvent | ToolInvocation | ResponseEnd]:
        """Nothing: every call was folded at its END."""
        return []

    def _fold(self, call_id: str, start: Mapping[str, Any], end: Mapping[str, Any]) -> ToolInvocation:
        name = str(end.get("tool_name") or start.get("tool_name") or "")
        arguments = end.get("arguments")
        if not isinstance(arguments, dict):
            arguments = {}
        error_fields = end.get("error")
        error = (
            ToolCallError(
                error_fields["kind"],
                str(error_fields["message"]),
                str(error_fields.get("raw", "")),
                error_fields.get("offset"),
            )
            if error_fields
            else None
        )
        if error is None and (adapter := self._adapters.get(name)) is not None:
            error = _validate(adapter, arguments)
        return ToolInvocation(
            call_id,
            name,
            arguments,
            error,
            provider_executed=bool(start.get("provider_executed") or end.get("provider_executed")),
            signature=end.get("signature"),
        )


def _adapter(
    name: str, schema: type[pydantic.BaseModel] | pydantic.TypeAdapter[Any]
) -> pydantic.TypeAdapter[Any]:
    if isinstance(schema, pydantic.TypeAdapter):
        return schema
    try:
        return pydantic.TypeAdapter(schema)
    except pydantic.PydanticSchemaGenerationError:
        raise ConfigurationError(
            f"tools[{name!r}] must be a pydantic model or TypeAdapter, got {schema!r}"
        ) from None


def _validate(adapter: pydantic.TypeAdapter[Any], arguments: dict[str, Any]) -> ToolCallError | None:
    try:
        adapter.validate_python(arguments)
    except pydantic.ValidationError as exc:
        return ToolCallError("invalid_arguments", str(exc), msgspec.json.encode(arguments).decode())
    return None


@pipable_operator
def fold_invocations(
    source: AsyncIterable[SegmentEvent | ToolInvocation | ResponseEnd], *, tools: ToolSchemas | None = None
) -> AsyncIterator[SegmentEvent | ToolInvocation | ResponseEnd]:
    """Pass segment events through and yield each `ToolInvocation` right after its segment's END.

    Args:
        source: the events of `operators.emit_segments`.
        tools: tool name -> the pydantic model (or `TypeAdapter`) its arguments are validated against.
    """
    return operator_stream(source, InvocationFolder(tools=tools))
