"""The emitter given the splitter and the folder gives what the three chained give, chunk by chunk.

`pipeline.process` runs ``SegmentEmitter(splitter=..., folder=...)``: the splitter is fed only the chunks it
does not pass on as they are, the folder only tool segments' STARTs and ENDs. What each property pins:

- ``test_fused_gives_what_the_chain_gives``: any mix of text, reasoning, signatures, citations, results,
  usage and metadata, and tool calls streamed in random deltas (file tools, cut short, invalid), every
  chunk's outputs, then ``finish``'s, equal the chain's; with and without values kept (``fold=False``).
- ``test_fused_abort_gives_what_the_chain_gives``: the same cut off at any chunk by a failure: what
  ``abort`` closes (tool calls ``interrupted``, each still folded) equals the chain's.
- ``test_an_invocation_follows_its_end``: the commonest call, by value.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import ArgumentSplitter
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.errors import ProviderError
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentType,
    ToolCallDelta,
    ToolInvocation,
)
from pipeline.stage import Core, chain
from tests.operators.segments.test_segments_fast_path import CHUNK, ONE_MORE, PLAIN, THOUGHT, split_calls


def emitter(**options: Any) -> SegmentEmitter:
    counter = itertools.count()
    return SegmentEmitter(
        segment_ids=lambda kind: f"{kind}_{next(counter)}", call_ids=lambda i: f"gen_{i}", **options
    )


def cores(keep_values: bool) -> tuple[Any, Any]:
    """The three stages chained, and the emitter given the other two."""
    folded = [InvocationFolder()] if keep_values else []
    chained = chain(ArgumentSplitter(keep_values=keep_values), emitter(keep_values=keep_values), *folded)
    fused = emitter(
        keep_values=keep_values,
        splitter=ArgumentSplitter(keep_values=keep_values),
        folder=InvocationFolder() if keep_values else None,
    )
    return chained, fused


def each(core: Core[Any, Any], chunks: list[ChunkResponse]) -> list[list[Any]]:
    return [core.feed(chunk) for chunk in chunks] + [core.finish()]


MIXED = st.lists(st.one_of(CHUNK, PLAIN, THOUGHT, ONE_MORE), max_size=6)


@st.composite
def streams(draw: st.DrawFn) -> list[ChunkResponse]:
    """Tool calls in random deltas with other chunks between them, maybe text before and after."""
    calls = draw(split_calls())
    return [*draw(MIXED), *calls[:-1], *draw(MIXED), calls[-1], *draw(MIXED)]


@settings(max_examples=300, deadline=None)
@given(chunks=streams(), keep_values=st.booleans())
def test_fused_gives_what_the_chain_gives(chunks: list[ChunkResponse], keep_values: bool) -> None:
    chained, fused = cores(keep_values)
    assert each(fused, chunks) == each(chained, chunks)


@settings(max_examples=200, deadline=None)
@given(chunks=streams(), data=st.data())
def test_fused_abort_gives_what_the_chain_gives(chunks: list[ChunkResponse], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(chunks)), label="cut")
    failure = ProviderError("the connection broke")
    chained, fused = cores(True)
    outcomes = []
    for core in (chained, fused):
        fed = [core.feed(chunk) for chunk in chunks[:cut]]
        outcomes.append((fed, core.abort(failure)))
    assert outcomes[1] == outcomes[0]


def test_an_invocation_follows_its_end() -> None:
    _, fused = cores(True)
    fused.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "get_weather", '{"city": ')]))
    events = fused.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='"Paris"}')]))
    end = SegmentEvent.end(
        "call_1",
        {"tool_name": "get_weather", "call_id": "call_1", "arguments": {"city": "Paris"}},
        segment_type=SegmentType.TOOL_CALL,
    )
    assert events[-2:] == [end, ToolInvocation("call_1", "get_weather", {"city": "Paris"})]
    assert [type(event).__name__ for event in fused.finish()] == ["ResponseEnd"]
