"""What the converter tests share: reading recordings, deterministic call ids, running a converter core,
feeding and draining the async operators, and folding chunks back into whole tool calls.

The deliberately naive references that a test file checks its converter against stay in that file (and in
``tests/reference.py``): they share no code with the converters, nor with each other.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from aiostream import streamcontext

from pipeline.models import ChunkResponse, ToolCallKind
from pipeline.stage import Core

__all__ = [
    "Event",
    "FoldedCall",
    "chunked_bytes",
    "collect",
    "fold_calls",
    "iterate",
    "load_events",
    "run_converter",
    "sequential_ids",
]

T = TypeVar("T")

Event: TypeAlias = dict[str, Any]


def load_events(path: Path) -> list[Event]:
    """The events of a recording: the ``data:`` lines of an ``.sse`` file, one JSON a line of a ``.jsonl``
    file. Blank lines and the ``[DONE]`` sentinel are skipped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".sse":
        lines = [line[5:] for line in lines if line.startswith("data:")]
    payloads = (line.strip() for line in lines)
    return [json.loads(payload) for payload in payloads if payload and payload != "[DONE]"]


def sequential_ids(index: int) -> str:
    """A deterministic id factory: ``gen_0``, ``gen_1``, ... by the call's position."""
    return f"gen_{index}"


def run_converter(converter: Core[Any, ChunkResponse], events: Iterable[Any]) -> list[ChunkResponse]:
    """Every chunk ``converter`` gives for ``events``, then at the end of the input."""
    chunks = [chunk for event in events for chunk in converter.feed(event)]
    return chunks + list(converter.finish())


async def iterate(items: Iterable[T]) -> AsyncIterator[T]:
    """``items`` as an async source."""
    for item in items:
        yield item


async def chunked_bytes(data: bytes, size: int) -> AsyncIterator[bytes]:
    """``data`` as an async source of ``size``-byte pieces (the last one may be shorter)."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def collect(source: AsyncIterable[T], into: list[T] | None = None) -> list[T]:
    """Every item of ``source``, closing it properly. Items are appended to ``into`` as they arrive, so a
    test can see what came before a failure."""
    received = [] if into is None else into
    async with streamcontext(source) as items:
        async for item in items:
            received.append(item)
    return received


@dataclass
class FoldedCall:
    """A tool call put back together from its deltas."""

    index: int
    call_id: str
    name: str
    kind: ToolCallKind
    signature: str | None
    """The signature of the call's first delta."""
    arguments: str
    finished: bool


def fold_calls(chunks: Iterable[ChunkResponse]) -> list[FoldedCall]:
    """The tool calls of ``chunks``, checking what every converter promises: positions are 0, 1, 2, ... in
    order of first appearance, the first delta of a call names it, no delta follows the one that finished
    it, a call keeps its kind."""
    calls: dict[int, FoldedCall] = {}
    pieces: dict[int, list[str]] = {}
    for chunk in chunks:
        for delta in chunk.tool_calls or []:
            call = calls.get(delta.index)
            if call is None:
                assert delta.call_id is not None, "the first delta of a call names it"
                assert delta.name is not None, "the first delta of a call names it"
                call = calls[delta.index] = FoldedCall(
                    delta.index, delta.call_id, delta.name, delta.kind, delta.signature, "", False
                )
                pieces[delta.index] = []
            assert not call.finished, f"no delta after the one that finished the call: {delta}"
            assert delta.kind == call.kind, f"a call keeps its kind: {delta}"
            pieces[delta.index].append(delta.arguments_delta or "")
            call.finished = delta.finished
    assert list(calls) == list(range(len(calls))), f"positions in order of first appearance: {list(calls)}"
    for index, call in calls.items():
        call.arguments = "".join(pieces[index])
    return list(calls.values())
