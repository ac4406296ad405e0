"""The segment emitter's rules give exactly what its general path gives.

``SegmentEmitter.feed`` first asks the rule made by the state the last chunk left (the open text run, the
open call); ``_feed`` is the general path alone. What each property pins:

- ``test_the_emitters_rules_give_what_the_general_path_gives``: any mix of text, reasoning, refusals,
  signatures, citations, tool calls, results, usage and metadata, so the open text or reasoning run's rule
  takes a chunk only when the general path would give just its CONTENT event (and keeps the same usage and
  metadata for the response's end).
- ``test_the_emitters_tool_call_rule_gives_what_the_general_path_gives``: tool calls (file tools among
  them, complete, cut short or invalid) streamed in random deltas through the splitter, other chunks
  among them, so the open call's rule agrees on streaming, completion and errors.
- The examples below them: the events the rules give on the commonest chunks, by value.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import ArgumentSplitter
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    SplitChunk,
    TokenUsage,
    ToolCallDelta,
)


def emitter() -> SegmentEmitter:
    counter = iter(range(1000))
    return SegmentEmitter(segment_ids=lambda kind: f"{kind}_{next(counter)}", call_ids=lambda i: f"gen_{i}")


def split(chunks: list[ChunkResponse]) -> list[ChunkResponse | SplitChunk]:
    """``chunks`` through the argument splitter, as the emitter gets them in a pipeline."""
    splitter = ArgumentSplitter()
    return [out for chunk in chunks for out in splitter.feed(chunk)] + splitter.finish()


def run(chunks: list[ChunkResponse | SplitChunk], *, general: bool) -> list[Any]:
    core = emitter()
    feed = core._feed if general else core.feed
    outputs: list[Any] = []
    for chunk in chunks:
        outputs.append(feed(chunk))
    outputs.append(core.finish())
    return outputs


TEXT = st.sampled_from(["", "a", " fox", "é"])
CHUNK = st.builds(
    ChunkResponse,
    content=TEXT,
    reasoning=st.sampled_from([None, "", "hmm"]),
    refusal=st.sampled_from([None, "", "no"]),
    reasoning_id=st.sampled_from([None, "rs_1"]),
    reasoning_signature=st.sampled_from([None, "sig"]),
    encrypted_reasoning=st.sampled_from([None, "enc"]),
    reasoning_done=st.booleans(),
    content_signature=st.sampled_from([None, "csig"]),
    citations=st.sampled_from([None, [], [{"url": "u"}]]),
    tool_calls=st.sampled_from(
        [None, [], [ToolCallDelta(0, "call_1", "f", '{"a"')], [ToolCallDelta(0, arguments_delta=": 1}")]]
    ),
    usage=st.sampled_from([None, TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)]),
    finish_reason=st.sampled_from([None, "stop"]),
    metadata=st.sampled_from([None, {}, {"id": "x"}]),
)
PLAIN = st.builds(ChunkResponse, content=TEXT)
THOUGHT = st.builds(
    ChunkResponse,
    reasoning=TEXT,
    reasoning_id=st.sampled_from([None, "rs_1", "rs_2"]),
    usage=st.sampled_from([None, TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)]),
    metadata=st.sampled_from([None, {"id": "y"}]),
)


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.one_of(CHUNK, PLAIN, PLAIN, THOUGHT, THOUGHT), max_size=12))
def test_the_emitters_rules_give_what_the_general_path_gives(chunks: list[ChunkResponse]) -> None:
    assert run(split(chunks), general=False) == run(split(chunks), general=True)


def test_text_chunks_continue_the_open_run() -> None:
    core = emitter()
    assert core.feed(ChunkResponse(content="Hi", metadata={"id": "r"})) == [
        SegmentEvent.start("text_0", SegmentType.TEXT),
        SegmentEvent(SegmentEventType.CONTENT, "text_0", None, {"delta": "Hi"}),
    ]
    assert core.feed(ChunkResponse(content=" there")) == [
        SegmentEvent(SegmentEventType.CONTENT, "text_0", None, {"delta": " there"})
    ]


def test_the_folder_passes_content_through() -> None:
    event = SegmentEvent(SegmentEventType.CONTENT, "text_0", None, {"delta": "Hi"})
    assert InvocationFolder().feed(event) == [event]


_CALLS = st.sampled_from(
    [
        ("write_file", '{"path": "a.py", "content": "x = \\"\\u00e9\\"\\n\\tprint(x)\\n"}'),
        ("patch_file", '{"patch": "@@ -1 +1 @@\\n-a\\n+b\\n", "path": "b.py"}'),
        ("get_weather", '{"city": "Paris", "days": [1, 2]}'),
        ("write_file", '{"content": "cut short'),
        ("write_file", '{"content": "bad \\q escape"}'),
    ]
)


@st.composite
def split_calls(draw: st.DrawFn) -> list[ChunkResponse]:
    """Tool calls streamed in random deltas, other chunks among them."""
    chunks: list[ChunkResponse] = []
    for index in range(draw(st.integers(min_value=1, max_value=2))):
        name, text = draw(_CALLS)
        cuts = sorted(set(draw(st.lists(st.integers(1, max(len(text) - 1, 1)), max_size=12))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if b > a]
        chunks.append(ChunkResponse(tool_calls=[ToolCallDelta(index, f"call_{index}", name, "")]))
        for piece in pieces:
            chunks.append(ChunkResponse(tool_calls=[ToolCallDelta(index, arguments_delta=piece)]))
            if draw(st.integers(0, 5)) == 0:
                chunks.append(draw(st.one_of(CHUNK, PLAIN)))
        if draw(st.booleans()):
            chunks.append(ChunkResponse(tool_calls=[ToolCallDelta(index, finished=True)]))
    chunks.append(ChunkResponse(finish_reason="tool_calls", is_complete=True))
    return chunks


@settings(max_examples=300, deadline=None)
@given(split_calls())
def test_the_emitters_tool_call_rule_gives_what_the_general_path_gives(
    chunks: list[ChunkResponse],
) -> None:
    assert run(split(chunks), general=False) == run(split(chunks), general=True)


def test_a_file_delta_gives_one_content_event() -> None:
    core = emitter()
    splitter = ArgumentSplitter()
    first = ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "write_file", '{"content": "a')])
    (chunk,) = splitter.feed(first)
    core.feed(chunk)
    (chunk,) = splitter.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="\\tb")]))
    assert core.feed(chunk) == [SegmentEvent(SegmentEventType.CONTENT, "call_1", None, {"delta": "\tb"})]
