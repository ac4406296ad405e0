"""The segment emitter's rules give exactly what its general path gives.

``SegmentEmitter.feed`` first asks the rule made by the state the last chunk left (the open text run, the
open call); ``_feed`` is the general path alone. What each property pins:

- ``test_the_emitters_rules_give_what_the_general_path_gives``: any mix of text, reasoning, refusals,
  signatures, citations, tool calls, results, usage and metadata, so the open text or reasoning run's rule
  takes a chunk only when the general path would give just its CONTENT event (and keeps the same usage and
  metadata for the response's end). Plain text and reasoning with one more field set (`one_more`) test
  each field a rule reads on its own, empty values among them.
- ``test_the_emitters_tool_call_rule_gives_what_the_general_path_gives``: tool calls (file tools among
  them, complete, cut short or invalid) streamed in random deltas through the splitter, other chunks
  among them, some deltas with one more field of their own or of their chunk, so the open call's rule
  agrees on streaming, completion and errors.
- ``test_each_field_beside_a_continuing_delta_goes_the_general_way`` and
  ``test_each_field_beside_a_continuing_argument_delta_goes_the_general_way``: each field a rule reads, set
  alone beside more of the open run's text or the open call's arguments, which the properties meet only by
  chance.
- The examples below them: the events the rules give on the commonest chunks, by value.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import ArgumentSplitter
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.errors import ConfigurationError
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    SplitChunk,
    TokenUsage,
    ToolCallDelta,
    ToolResult,
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
    tool_results=st.sampled_from([None, [], [ToolResult(call_id="srv_1", name="web_search", content=[1])]]),
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

RESULT = ToolResult(call_id="srv_1", name="web_search", content=[1])
USAGE = TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
EXTRA: dict[str, list[Any]] = {
    "content": ["", "a"],
    "reasoning": ["", "hmm"],
    "refusal": ["", "no"],
    "reasoning_id": ["rs_1", "rs_2"],
    "reasoning_signature": ["", "sig"],
    "encrypted_reasoning": ["", "enc"],
    "reasoning_done": [True],
    "content_signature": ["", "csig"],
    "citations": [[], [{"url": "u"}]],
    "tool_calls": [[], [ToolCallDelta(0, "call_1", "f", '{"a"')]],
    "tool_results": [[], [RESULT]],
    "usage": [USAGE],
    "finish_reason": ["", "stop"],
    "metadata": [{}, {"id": "x"}],
    "is_complete": [True],
}
"""Values other than the default of each field of a chunk: one at a time beside plain text or reasoning."""


@st.composite
def one_more(draw: st.DrawFn, base: st.SearchStrategy[ChunkResponse], fields: list[str]) -> ChunkResponse:
    """A chunk of ``base`` with one more of ``fields`` set."""
    field = draw(st.sampled_from(fields))
    return msgspec.structs.replace(draw(base), **{field: draw(st.sampled_from(EXTRA[field]))})


ONE_MORE = one_more(st.one_of(PLAIN, THOUGHT), sorted(EXTRA))


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.one_of(CHUNK, PLAIN, PLAIN, THOUGHT, THOUGHT, ONE_MORE, ONE_MORE), max_size=12))
def test_the_emitters_rules_give_what_the_general_path_gives(chunks: list[ChunkResponse]) -> None:
    assert run(split(chunks), general=False) == run(split(chunks), general=True)


@pytest.mark.parametrize(
    ("field", "value"), [(field, value) for field, values in EXTRA.items() for value in values]
)
@pytest.mark.parametrize(
    "opening", [ChunkResponse(content="a"), ChunkResponse(reasoning="r", reasoning_id="rs_1")]
)
def test_each_field_beside_a_continuing_delta_goes_the_general_way(
    opening: ChunkResponse, field: str, value: Any
) -> None:
    """Every field a run's rule reads, set alone beside more of the open run's text (deterministic: the
    property above meets each one only by chance)."""
    for more in (
        ChunkResponse(content="b"),
        ChunkResponse(reasoning="s"),
        ChunkResponse(reasoning="s", reasoning_id="rs_1"),
    ):
        chunks = [opening, msgspec.structs.replace(more, **{field: value})]
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


DELTA_EXTRA: dict[str, list[Any]] = {
    "index": [0, 1, 2],
    "call_id": ["call_0", "call_1", "other"],
    "name": ["get_weather", "write_file"],
    "finished": [True],
    "kind": ["server", "custom"],
    "signature": ["", "s"],
    "server_name": ["srv"],
}
"""Values of a tool call delta's fields, one at a time beside its arguments."""


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
            delta = ToolCallDelta(index, arguments_delta=piece)
            if draw(st.integers(0, 5)) == 0:
                field = draw(st.sampled_from(sorted(DELTA_EXTRA)))
                delta = msgspec.structs.replace(delta, **{field: draw(st.sampled_from(DELTA_EXTRA[field]))})
            chunk = ChunkResponse(tool_calls=[delta])
            if draw(st.integers(0, 5)) == 0:
                chunk = draw(one_more(st.just(chunk), sorted(set(EXTRA) - {"tool_calls"})))
            chunks.append(chunk)
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


_OPENED_CALL = ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "get_weather", '{"city": "Pa')])


@pytest.mark.parametrize(
    ("field", "value"),
    [(field, value) for field, values in EXTRA.items() if field != "tool_calls" for value in values],
)
@pytest.mark.parametrize(
    "opening",
    [
        [_OPENED_CALL],
        # A reasoning run opened beside the call's next delta stays open while the call streams.
        [
            _OPENED_CALL,
            ChunkResponse(reasoning="x", reasoning_id="rs_1", tool_calls=[ToolCallDelta(0, None, None, "r")]),
        ],
    ],
    ids=["call", "call-and-reasoning"],
)
def test_each_field_beside_a_continuing_argument_delta_goes_the_general_way(
    opening: list[ChunkResponse], field: str, value: Any
) -> None:
    """Every field the open call's rule reads, set alone beside the call's next arguments (deterministic:
    the property above meets each one only by chance)."""
    more = ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "is")], **{field: value})
    chunks = [*opening, more, ChunkResponse(reasoning="y", reasoning_id="rs_1"), ChunkResponse(content="z")]
    assert run(split(chunks), general=False) == run(split(chunks), general=True)


def test_a_file_delta_gives_one_content_event() -> None:
    core = emitter()
    splitter = ArgumentSplitter()
    first = ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "write_file", '{"content": "a')])
    (chunk,) = splitter.feed(first)
    core.feed(chunk)
    (chunk,) = splitter.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="\\tb")]))
    assert core.feed(chunk) == [SegmentEvent(SegmentEventType.CONTENT, "call_1", None, {"delta": "\tb"})]


@pytest.mark.parametrize("opening", [ChunkResponse(content="a"), ChunkResponse(reasoning="r")])
def test_tool_calls_that_skipped_the_splitter_are_refused_in_an_open_run(opening: ChunkResponse) -> None:
    core = emitter()
    core.feed(opening)
    more = msgspec.structs.replace(opening, tool_calls=[ToolCallDelta(0, "call_1", "f", "{}")])
    with pytest.raises(ConfigurationError):
        core.feed(more)
