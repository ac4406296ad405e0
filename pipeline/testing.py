"""Helpers for testing pipelines and operators: replay recorded streams at any chunking, collect results.

They are plain functions and async helpers, so they work under anyio's pytest plugin and pytest-asyncio
alike::

    events = await replay("tests/fixtures/anthropic/stream.sse", chunk_sizes=[1, 7, 3])
    summary = summarize(events)
    assert summary.invocations[0].arguments == {"city": "Paris"}
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiostream import streamcontext

from pipeline.errors import ConfigurationError, StreamfoldError

if TYPE_CHECKING:
    from operators.registry import ProviderOption, RegisteredFormat, ToolFormat
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolInvocation,
)
from pipeline.stage import Core

__all__ = [
    "Summary",
    "chunked",
    "collect",
    "counter_segment_ids",
    "feed_all",
    "replay",
    "sequential_call_ids",
    "summarize",
]

T = TypeVar("T")
U = TypeVar("U")


def sequential_call_ids(index: int) -> str:
    """A deterministic id factory: ``call_0``, ``call_1``, ... by the call's position."""
    return f"call_{index}"


def counter_segment_ids() -> Callable[[SegmentType], str]:
    """A deterministic segment id factory: ``text_0``, ``reasoning_1``, ... in order of creation."""
    numbers = itertools.count()
    return lambda kind: f"{kind.value}_{next(numbers)}"


def chunked(data: bytes, sizes: Sequence[int] | int | None = None) -> list[bytes]:
    """Split bytes into pieces of the given sizes.

    Args:
        data: the bytes.
        sizes: the pieces' sizes, cycled through (an int: every piece that size); ``None``: one piece.

    Raises:
        ConfigurationError: a size below 1, or no sizes at all."""
    if sizes is None:
        return [data]
    size_list = [sizes] if isinstance(sizes, int) else list(sizes)
    if not size_list or any(
        isinstance(size, bool) or not isinstance(size, int) or size < 1 for size in size_list
    ):
        raise ConfigurationError(f"chunk sizes must be integers >= 1, got {sizes!r}")
    cycle = itertools.cycle(size_list)
    pieces, position = [], 0
    while position < len(data):
        size = next(cycle)
        pieces.append(data[position : position + size])
        position += size
    return pieces


def feed_all(core: Core[T, U], items: Iterable[T]) -> tuple[list[U], StreamfoldError | None]:
    """Feed ``items`` to a sans-IO ``core`` and finish it, synchronously.

    An exception other than a `StreamfoldError` is a bug and propagates.

    Args:
        core: the sans-IO stage.
        items: what to feed it.

    Returns:
        Every output, in order, and the error that stopped the core, or None; the error's
        ``partial_outputs`` are included in the outputs, as `pipeline.stage.drive` delivers them."""
    outputs: list[U] = []
    try:
        for item in items:
            outputs += core.feed(item)
        outputs += core.finish()
    except StreamfoldError as error:
        outputs += error.partial_outputs
        return outputs, error
    return outputs, None


async def _pieces(items: Iterable[T]) -> AsyncIterator[T]:
    for item in items:
        yield item


async def collect(source: AsyncIterable[T]) -> list[T]:
    """Every item of ``source``, closing it properly."""
    async with streamcontext(source) as items:
        collected = [item async for item in items]
    return collected


async def replay(
    path: str | Path,
    *,
    provider: ProviderOption = "auto",
    tool_format: ToolFormat | RegisteredFormat | None = None,
    chunk_size: int | None = None,
    chunk_sizes: Sequence[int] | None = None,
    id_factory: Callable[[int], str] = sequential_call_ids,
    **options: Any,
) -> list[PipelineEvent]:
    """Run a recorded stream through the whole pipeline and return every event.

    Args:
        path: a recording: ``.sse`` and ``.jsonl`` files are provider streams, ``.txt`` files plain model
            text, a ``.json`` file a list of text deltas.
        provider: as `pipeline.process` takes it (``text`` for ``.txt`` and ``.json`` files).
        tool_format: as `pipeline.process` takes it.
        chunk_size: a ``.txt`` file's text is replayed in deltas of this many characters (default 4).
        chunk_sizes: re-chunk the bytes, cycling through these sizes.
        id_factory: makes ids for tool calls that arrive without one.
        **options: more options of `pipeline.process`.

    Returns:
        Every event of the stream.
    """
    from pipeline._options import check_count
    from pipeline.compose import process

    path = Path(path)
    if chunk_size is not None:
        check_count("chunk_size", chunk_size, minimum=1)
    data = path.read_bytes()
    source: AsyncIterable[Any]
    if path.suffix in {".txt", ".json"}:
        provider = "text"
        if path.suffix == ".json":
            deltas: list[str] = json.loads(data)
        else:
            text = data.decode()
            step = chunk_size or 4
            deltas = [text[i : i + step] for i in range(0, len(text), step)]
        source = _pieces(deltas)
    else:
        source = _pieces(chunked(data, chunk_sizes if chunk_sizes is not None else chunk_size))
    events = process(
        source,
        provider=provider,
        tool_format=tool_format,
        id_factory=id_factory,
        segment_ids=counter_segment_ids(),
        **options,
    )
    return await collect(events)


@dataclass
class Summary:
    """What a response amounts to: the text, the reasoning, the invocations and how it ended."""

    text: str = ""
    """The text segments' content, joined."""
    reasoning: str = ""
    """The reasoning segments' content, joined."""
    invocations: list[ToolInvocation] = field(default_factory=list)
    """The tool invocations, in order."""
    finish_reason: str | None = None
    """The `ResponseEnd`'s finish reason; None when the response did not end."""
    usage: TokenUsage | None = None
    """The `ResponseEnd`'s token usage."""
    error: BaseException | None = None
    """The error that stopped the response, if any."""
    segments: dict[str, str] = field(default_factory=dict)
    """Segment id -> the concatenated CONTENT of that segment."""


def summarize(events: Iterable[PipelineEvent], error: BaseException | None = None) -> Summary:
    """Fold a list of pipeline events into a `Summary` (a plain, non-incremental reference).

    Args:
        events: the pipeline's events.
        error: the error that stopped them, if any: kept in the summary.
    """
    summary = Summary(error=error)
    kinds: dict[str, SegmentType | None] = {}
    pieces: dict[str, list[str]] = {}
    text: list[str] = []
    reasoning: list[str] = []
    for event in events:
        if isinstance(event, SegmentEvent):
            if event.event_type is SegmentEventType.START:
                kinds[event.segment_id] = event.segment_type
                pieces[event.segment_id] = []
            elif event.event_type is SegmentEventType.CONTENT:
                delta = event.payload["delta"]
                pieces.setdefault(event.segment_id, []).append(delta)
                kind = kinds.get(event.segment_id)
                if kind is SegmentType.TEXT:
                    text.append(delta)
                elif kind is SegmentType.REASONING:
                    reasoning.append(delta)
        elif isinstance(event, ToolInvocation):
            summary.invocations.append(event)
        elif isinstance(event, ResponseEnd):
            summary.finish_reason = event.finish_reason
            summary.usage = event.usage
    summary.text = "".join(text)
    summary.reasoning = "".join(reasoning)
    summary.segments = {segment_id: "".join(parts) for segment_id, parts in pieces.items()}
    return summary
