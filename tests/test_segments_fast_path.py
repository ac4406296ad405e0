"""The segment emitter's fast path (a chunk that is only the next text of the open text run) gives exactly
what its general path gives, and the invocation folder passes CONTENT events through unchanged."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolCallDelta,
)


def emitter() -> SegmentEmitter:
    counter = iter(range(1000))
    return SegmentEmitter(segment_ids=lambda kind: f"{kind}_{next(counter)}", call_ids=lambda i: f"gen_{i}")


def run(chunks: list[ChunkResponse], *, general: bool) -> list[Any]:
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


@settings(max_examples=500, deadline=None)
@given(chunks=st.lists(st.one_of(CHUNK, PLAIN, PLAIN), max_size=12))
def test_the_emitters_fast_path_gives_what_the_general_path_gives(chunks: list[ChunkResponse]) -> None:
    assert run(chunks, general=False) == run(chunks, general=True)


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
