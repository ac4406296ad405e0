"""Shared helpers for the delimiter-format tests: run a text through a :class:`DelimiterRewriter` at any
chunking, fold the result, and check that every chunking gives the same result.

Typical use::

    result = assert_chunking_invariant("kimi_k2", TEXT)
    assert result.content == "I'll check. "
    assert result.calls == [Call(0, "functions.get_weather:0", "get_weather", '{"city": "Beijing"}')]
    assert result.arguments(0) == {"city": "Beijing"}
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from operators.delimiters import DelimiterRewriter, get_format
from pipeline.models import ChunkResponse, ToolCallDelta

__all__ = [
    "Call",
    "Result",
    "assert_chunking_invariant",
    "assert_every_prefix_ends_cleanly",
    "chunkings",
    "collect",
    "marker_splits",
    "numbered_ids",
    "pieces_at",
    "run",
]

Channel = Literal["content", "reasoning"]


def numbered_ids(index: int) -> str:
    """A deterministic id factory: ``call_0``, ``call_1``, ..."""
    return f"call_{index}"


@dataclass(frozen=True)
class Call:
    """One folded tool call."""

    index: int
    call_id: str | None
    name: str | None
    arguments: str = ""
    finished: bool = True


@dataclass(frozen=True)
class Result:
    """What a stream folds into: the text of each channel, the calls, and the chunks' other fields."""

    content: str
    reasoning: str
    calls: list[Call]
    finish_reasons: list[str] = field(default_factory=list)

    def arguments(self, index: int) -> Any:
        """The arguments of call ``index`` parsed with :func:`json.loads`."""
        return json.loads(self.calls[index].arguments)

    def parsed(self) -> list[tuple[str | None, Any]]:
        """``(name, parsed arguments)`` of every call."""
        return [(call.name, json.loads(call.arguments)) for call in self.calls]


def collect(chunks: Iterable[ChunkResponse]) -> Result:
    """Fold rewritten chunks, checking the tool-call protocol on the way: a call's first delta has its
    id and name, indexes appear in order 0, 1, 2, and nothing follows a finished delta."""
    content: list[str] = []
    reasoning: list[str] = []
    finish_reasons: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        assert isinstance(chunk, ChunkResponse)
        content.append(chunk.content)
        if chunk.reasoning is not None:
            assert chunk.reasoning, "an empty reasoning string should be None"
            reasoning.append(chunk.reasoning)
        if chunk.finish_reason:
            finish_reasons.append(chunk.finish_reason)
        for delta in chunk.tool_calls or ():
            _fold(calls, delta)
    return Result(
        "".join(content),
        "".join(reasoning),
        [
            Call(index, call["call_id"], call["name"], "".join(call["arguments"]), call["finished"])
            for index, call in sorted(calls.items())
        ],
        finish_reasons,
    )


def _fold(calls: dict[int, dict[str, Any]], delta: ToolCallDelta) -> None:
    call = calls.get(delta.index)
    if call is None:
        assert delta.index == len(calls), f"call index {delta.index} after {len(calls)} calls"
        assert delta.call_id, f"first delta of call {delta.index} has no id: {delta}"
        assert delta.name is not None, f"first delta of call {delta.index} has no name: {delta}"
        call = calls[delta.index] = {
            "call_id": delta.call_id,
            "name": delta.name,
            "arguments": [],
            "finished": False,
        }
    else:
        assert not call["finished"], f"delta after the call finished: {delta}"
        assert delta.call_id in (None, call["call_id"]), f"call id changed: {delta}"
    if delta.arguments_delta:
        call["arguments"].append(delta.arguments_delta)
    call["finished"] = delta.finished


def run(
    format: str,
    pieces: Iterable[str | ChunkResponse],
    *,
    channel: Channel = "content",
    finish: bool = True,
    **options: Any,
) -> Result:
    """Feed ``pieces`` (text goes to ``channel``) through a rewriter of ``format`` and fold the output.

    Ids are :func:`numbered_ids` unless ``id_factory`` is given; other ``options`` go to the rewriter.
    """
    options.setdefault("id_factory", numbered_ids)
    rewriter = DelimiterRewriter(format, **options)
    return collect(_outputs(rewriter, pieces, channel, finish))


def _outputs(
    rewriter: DelimiterRewriter, pieces: Iterable[str | ChunkResponse], channel: Channel, finish: bool
) -> Iterator[ChunkResponse]:
    for piece in pieces:
        if isinstance(piece, str):
            piece = ChunkResponse(content=piece) if channel == "content" else ChunkResponse(reasoning=piece)
        yield from rewriter.feed(piece)
    if finish:
        yield from rewriter.finish()


def pieces_at(text: str, cuts: Iterable[int]) -> list[str]:
    """``text`` cut at the positions ``cuts`` (empty pieces dropped)."""
    points = [0, *sorted({cut for cut in cuts if 0 < cut < len(text)}), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(points) if end > start]


def marker_splits(text: str, markers: Sequence[str]) -> Iterator[list[str]]:
    """``text`` split in two at every position from one character before to one after each occurrence
    of each marker, then split at every marker boundary at once."""
    boundaries: set[int] = set()
    for marker in markers:
        start = text.find(marker)
        while start >= 0:
            end = start + len(marker)
            boundaries.update((start, end))
            for cut in range(max(1, start - 1), min(len(text), end + 2)):
                yield pieces_at(text, [cut])
            start = text.find(marker, start + 1)
    yield pieces_at(text, boundaries)


def chunkings(
    text: str, markers: Sequence[str], *, seed: int = 0, random_runs: int = 20
) -> Iterator[list[str]]:
    """Whole, one character at a time, two at a time, split around every marker, and random splits."""
    yield [text]
    yield list(text)
    yield pieces_at(text, range(2, len(text), 2))
    yield from marker_splits(text, markers)
    generator = random.Random(seed)
    for _ in range(random_runs):
        if len(text) > 1:
            yield pieces_at(
                text, generator.sample(range(1, len(text)), min(len(text) - 1, 1 + len(text) // 7))
            )


def assert_chunking_invariant(
    format: str,
    text: str,
    *,
    channel: Channel = "content",
    markers: Sequence[str] | None = None,
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> Result:
    """Run ``text`` at every chunking of :func:`chunkings` and assert identical results; return it."""
    if markers is None:
        markers = get_format(format).markers
    if tool_schemas is not None:
        options["tool_schemas"] = tool_schemas
    expected = run(format, [text], channel=channel, **options)
    for pieces in chunkings(text, markers):
        got = run(format, pieces, channel=channel, **options)
        assert got == expected, f"chunking {pieces!r} gives\n{got}\ninstead of\n{expected}"
    assert_every_prefix_ends_cleanly(format, text, channel=channel, **options)
    return expected


def assert_every_prefix_ends_cleanly(
    format: str, text: str, *, channel: Channel = "content", **options: Any
) -> None:
    """Cut ``text`` after every character (a ``max_tokens`` cut) and end the stream there: the rewriter
    must end cleanly (no exception, a well-formed call protocol), whole and with the last character
    arriving alone, with the same result both ways."""
    for end in range(len(text) + 1):
        prefix = text[:end]
        try:
            whole = run(format, [prefix], channel=channel, **options)
            split = run(format, [prefix[:-1], prefix[-1:]], channel=channel, **options)
        except Exception as exc:
            raise AssertionError(f"{format}: the text cut at {end} ({prefix!r}) raises {exc!r}") from exc
        assert split == whole, f"{format}: the text cut at {end} ({prefix!r}) depends on the chunking"
