"""Structured output streamed into a pydantic model: partial snapshots with a "field complete" signal.

`stream_structured` reads a response whose content is one JSON object (JSON mode, a response schema,
structured output) and yields a `StructuredUpdate` per piece of it::

    async for update in stream_structured(process(response), Recipe):
        for delta in update.deltas:          # string text as it streams: ("steps", 2, "text") "Whisk"
            ...
        if "title" in update.fields:         # a top-level field just completed and was validated
            show_title(update.partial.title)
        if update.done:
            recipe = update.value            # the whole object, validated once by the model

Linear per byte: the JSON is parsed once, incrementally (`operators.arguments.structured
.ContentJSONParser`); a top-level field is validated once, when its value completes, against its own
annotation and constraints; ``partial`` is rebuilt (``model_construct``, no validation) only when a field
completes. Nothing re-parses or re-validates the accumulated text per delta, as instructor's partial
models and pydantic-ai's streamed output do.

Policies:

- ``partial`` holds the fields completed so far (validated) and the model's defaults; a required field
  not yet complete is absent (see ``model_fields_set``); text still streaming is in ``deltas``, not in
  ``partial`` (joining it per update would be quadratic).
- Per-field validation checks the field's type and ``Field`` constraints; field and model validators
  run in the final validation of the whole object (they may need the other fields).
- A field that fails its validation is reported on its update (``errors``) and left out of ``partial``;
  the stream goes on. Invalid JSON, a cut-off or oversized text, no content at all, or a final
  validation failure raise `StructuredOutputError` after every update before it was yielded.
- Keys that are not fields are left to the final validation (the model's ``extra`` setting decides).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Annotated, Any, Generic, TypeVar

import msgspec
from aiostream import streamcontext
from pydantic import BaseModel, TypeAdapter, ValidationError

from operators.arguments.structured import DEFAULT_MAX_OUTPUT_SIZE, ContentJSONParser
from pipeline.errors import StreamfoldError
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentEvent,
    ArgumentValue,
    ChunkResponse,
    JSONPath,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
)

__all__ = ["StructuredOutput", "StructuredOutputError", "StructuredUpdate", "stream_structured"]

M = TypeVar("M", bound=BaseModel)


class StructuredOutputError(StreamfoldError):
    """The content is not a JSON object valid for the model.

    Args:
        message: what is wrong, and where.
        kind: ``invalid_json``, ``truncated``, ``too_large``, ``empty`` (no content) or ``validation``.
        offset: where, in characters of the content (``invalid_json``, ``truncated``, ``too_large``).
        validation_error: pydantic's error (``validation``).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        offset: int | None = None,
        validation_error: ValidationError | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.offset = offset
        self.validation_error = validation_error


class StructuredUpdate(msgspec.Struct, Generic[M], frozen=True, gc=False):
    """What one piece of content changed (a msgspec Struct: one per delta, cheap to build)."""

    partial: M
    """The fields completed so far, validated, and the defaults; built without validation."""
    completed: tuple[JSONPath, ...] = ()
    """Paths of the values (any depth, inner first) that completed in this update."""
    fields: tuple[str, ...] = ()
    """Top-level fields (by name) that completed and passed their validation in this update."""
    deltas: tuple[ArgumentDelta, ...] = ()
    """String text streamed in this update, by path."""
    errors: tuple[tuple[str, ValidationError], ...] = ()
    """Top-level fields that completed but failed their validation (left out of ``partial``)."""
    done: bool = False
    """The whole object is complete and valid: it is in ``value``."""
    value: M | None = None


class StructuredOutput(Generic[M]):
    """Sans-IO: content text (or its argument events) in, `StructuredUpdate`s out, for one
    response. ``feed(text)``, then ``finish()``; both raise `StructuredOutputError`, with the update
    the piece made before the failure on its ``partial_outputs``.

    Args:
        model: the pydantic model the JSON object is validated against.
        max_size: cap, in characters, of the content (``too_large`` beyond it).
    """

    def __init__(self, model: type[M], *, max_size: int = DEFAULT_MAX_OUTPUT_SIZE) -> None:
        self._model = model
        self._parser = ContentJSONParser(max_size=max_size)
        self._names: dict[str, str] = {}
        """JSON key -> field name (aliases and names)."""
        for name, info in model.model_fields.items():
            self._names[name] = name
            alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
            if alias:
                self._names[alias] = name
        self._adapters: dict[str, TypeAdapter[Any]] = {}
        self._values: dict[str, Any] = {}
        self._partial: M = model.model_construct()
        self._done = False
        self._seen = False

    @property
    def partial(self) -> M:
        return self._partial

    def feed(self, text: str) -> list[StructuredUpdate[M]]:
        """The update the next piece of content makes (none when it changes nothing)."""
        if not text:
            return []
        self._seen = True
        events = self._parser.feed_text(text)
        if len(events) == 1 and type(events[0]) is ArgumentDelta:  # the usual delta: string text
            return [StructuredUpdate(self._partial, (), (), (events[0],))]
        return self.feed_events(events)

    def finish(self) -> list[StructuredUpdate[M]]:
        """The content has ended: the final update.

        Raises:
            StructuredOutputError: no content came (``empty``), the object never completed (``truncated``),
                or it is not valid for the model.
        """
        if self._done:
            return []
        if not self._seen:
            raise StructuredOutputError("the response has no content: no JSON object came", kind="empty")
        updates = self.feed_events(self._parser.finish())
        if not self._done:  # pragma: no cover - the parser reports the root or an error at finish
            raise StructuredOutputError("the JSON object never completed", kind="truncated")
        return updates

    def feed_events(self, events: Iterable[ArgumentEvent]) -> list[StructuredUpdate[M]]:
        """The update made by path-addressed events (from `ContentJSONParser`)."""
        completed: list[JSONPath] = []
        fields: list[str] = []
        deltas: list[ArgumentDelta] = []
        errors: list[tuple[str, ValidationError]] = []
        value: M | None = None
        failure: StructuredOutputError | None = None
        for event in events:
            if type(event) is ArgumentDelta:
                deltas.append(event)
            elif type(event) is ArgumentValue:
                path = event.path
                if not path:
                    try:
                        value = self._validate_root(event.value)
                    except StructuredOutputError as exc:
                        failure = exc
                        break
                    continue
                completed.append(path)
                if len(path) == 1:
                    self._complete_field(path[0], event.value, fields, errors)
            elif isinstance(event, ArgumentError):
                message = f"structured output: {event.message}"
                failure = StructuredOutputError(message, kind=event.kind, offset=event.offset)
                break
        updates = self._update(completed, fields, deltas, errors, value)
        if failure is not None:
            # What this piece completed before the failure is not lost: it travels on the exception.
            failure.partial_outputs = updates
            raise failure
        return updates

    def _update(
        self,
        completed: list[JSONPath],
        fields: list[str],
        deltas: list[ArgumentDelta],
        errors: list[tuple[str, ValidationError]],
        value: M | None,
    ) -> list[StructuredUpdate[M]]:
        if not (completed or deltas or errors or value is not None):
            return []
        if fields:
            values = self._values
            self._partial = self._model.model_construct(set(values), **values)
        if value is not None:
            self._done = True
        return [
            StructuredUpdate(
                self._partial,
                tuple(completed),
                tuple(fields),
                tuple(deltas),
                tuple(errors),
                value is not None,
                value,
            )
        ]

    def _complete_field(
        self, key: str | int, raw: Any, fields: list[str], errors: list[tuple[str, ValidationError]]
    ) -> None:
        name = self._names.get(key) if isinstance(key, str) else None
        if name is None:
            return
        try:
            self._values[name] = self._adapter(name).validate_python(raw)
        except ValidationError as exc:
            errors.append((name, exc))
            self._values.pop(name, None)
            return
        fields.append(name)

    def _adapter(self, name: str) -> TypeAdapter[Any]:
        adapter = self._adapters.get(name)
        if adapter is None:
            info = self._model.model_fields[name]
            annotation: Any = info.annotation
            if info.metadata:
                annotation = Annotated[(annotation, *info.metadata)]
            adapter = self._adapters[name] = TypeAdapter(annotation)
        return adapter

    def _validate_root(self, raw: Any) -> M:
        try:
            return self._model.model_validate(raw)
        except ValidationError as exc:
            raise StructuredOutputError(
                f"structured output: the JSON value is not a valid {self._model.__name__}: {exc}",
                kind="validation",
                validation_error=exc,
            ) from exc


async def stream_structured(
    source: AsyncIterable[Any], model: type[M], *, max_size: int = DEFAULT_MAX_OUTPUT_SIZE
) -> AsyncIterator[StructuredUpdate[M]]:
    """Updates of ``model`` from one response whose content is a JSON object.

    The response ends at a chunk with ``is_complete``, a `ResponseEnd`, or the end of the source; what
    follows is not read.

    Args:
        source: `ChunkResponse`s (``to_chunks(...)``), the events of ``process(...)`` (the content of
            text segments is read), or content strings.
        model: the pydantic model the object fills.
        max_size: characters of content accepted before a ``too_large`` `StructuredOutputError`.

    Yields:
        A `StructuredUpdate` per piece of content that changed the object.

    Raises:
        StructuredOutputError: after the updates before it, when the content is not a valid object.
    """
    core = StructuredOutput(model, max_size=max_size)
    try:
        async for update in _updates(core, source):
            yield update
    except StructuredOutputError as failure:
        updates, failure.partial_outputs = failure.partial_outputs, []
        for update in updates:
            yield update
        raise


async def _updates(
    core: StructuredOutput[M], source: AsyncIterable[Any]
) -> AsyncIterator[StructuredUpdate[M]]:
    text_segments: set[str] = set()
    async with streamcontext(source) as items:
        async for item in items:
            for update in _feed_item(core, item, text_segments):
                yield update
            if _ends(item):
                break
    for update in core.finish():
        yield update


def _ends(item: Any) -> bool:
    return (type(item) is ChunkResponse and item.is_complete) or isinstance(item, ResponseEnd)


def _feed_item(core: StructuredOutput[M], item: Any, text_segments: set[str]) -> list[StructuredUpdate[M]]:
    """The content text of one item of the source, fed to ``core``."""
    if type(item) is ChunkResponse:
        return core.feed(item.content)
    if isinstance(item, str):
        return core.feed(item)
    if type(item) is SegmentEvent:
        if item.event_type is SegmentEventType.START:
            if item.segment_type is SegmentType.TEXT:
                text_segments.add(item.segment_id)
        elif item.event_type is SegmentEventType.CONTENT and item.segment_id in text_segments:
            return core.feed(item.payload["delta"])
    return []
