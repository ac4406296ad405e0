"""The segment emitter and the invocation folder, driven through their synchronous cores (chunks with tool
calls go through the argument splitter first, as in every pipeline)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pytest
from aiostream import stream

from operators.arguments.splitter import ArgumentSplitter, split_arguments
from operators.invocations import InvocationFolder, fold_invocations
from operators.segments import SegmentEmitter, SegmentIdFactory, emit_segments
from pipeline import (
    ArgumentDelta,
    ArgumentError,
    ArgumentValue,
    ChunkResponse,
    ConfigurationError,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    TokenUsage,
    ToolCallDelta,
    ToolInvocation,
)
from pipeline.models import SplitChunk


def counter_ids() -> SegmentIdFactory:
    numbers = itertools.count()
    return lambda kind: f"{kind.value}{next(numbers)}"


def run(chunks: Iterable[ChunkResponse | SplitChunk], **options: Any) -> list[dict[str, Any]]:
    """The events of ``chunks``: plain chunks through splitter, emitter and folder; a :class:`SplitChunk`
    (argument events made by hand) straight to the emitter. A second folder, not fed the events its
    ``passes`` accepts (as a chain does), must give the same events."""
    splitter = ArgumentSplitter()
    emitter = SegmentEmitter(segment_ids=counter_ids(), **options)
    folder, skipping = InvocationFolder(), InvocationFolder()
    out: list[dict[str, Any]] = []

    def fold(events: Iterable[Any]) -> None:
        for event in events:
            folded = folder.feed(event)
            assert folded == ([event] if skipping.passes(event) else skipping.feed(event))
            out.extend(item.to_dict() for item in folded)

    for chunk in chunks:
        for split in [chunk] if isinstance(chunk, SplitChunk) else splitter.feed(chunk):
            fold(emitter.feed(split))
    for split in splitter.finish():
        fold(emitter.feed(split))
    fold(emitter.finish())
    assert folder.invocations == skipping.invocations
    return out


def split(*deltas: tuple[ToolCallDelta, tuple[Any, ...]], **fields: Any) -> SplitChunk:
    """A chunk of ``deltas``, each with the argument events given (as the splitter would attach them)."""
    chunk = ChunkResponse(tool_calls=[delta for delta, _ in deltas], **fields)
    return SplitChunk(chunk, tuple(events for _, events in deltas))


def start(segment_id: str, kind: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "SEGMENT_START",
        "segment_id": segment_id,
        "segment_type": kind,
        "payload": {"metadata": metadata} if metadata else {},
    }


def content(segment_id: str, delta: str) -> dict[str, Any]:
    return {"type": "SEGMENT_CONTENT", "segment_id": segment_id, "payload": {"delta": delta}}


def end(segment_id: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "SEGMENT_END",
        "segment_id": segment_id,
        "payload": {"metadata": metadata} if metadata else {},
    }


def argument(segment_id: str, path: list[Any], **change: Any) -> dict[str, Any]:
    return {"type": "SEGMENT_ARGUMENT", "segment_id": segment_id, "payload": {"path": path, **change}}


RESPONSE_END: dict[str, Any] = {"type": "RESPONSE_END", "finish_reason": None, "usage": None, "metadata": {}}


def test_reasoning_then_text_are_two_runs() -> None:
    events = run([ChunkResponse(reasoning="Hm"), ChunkResponse(reasoning="m."), ChunkResponse(content="Hi")])
    assert events == [
        start("reasoning0", "reasoning"),
        content("reasoning0", "Hm"),
        content("reasoning0", "m."),
        end("reasoning0"),
        start("text1", "text"),
        content("text1", "Hi"),
        end("text1"),
        RESPONSE_END,
    ]


def test_tool_call_streams_content_and_arguments_and_ends_when_complete() -> None:
    chunks: list[ChunkResponse | SplitChunk] = [
        ChunkResponse(content="Let me look."),
        split(
            (
                ToolCallDelta(0, "call_a", "get_weather", '{"city": "Pa'),
                (ArgumentDelta(("city",), "Pa"),),
            )
        ),
        split(
            (
                ToolCallDelta(0, arguments_delta='ris"}'),
                (
                    ArgumentDelta(("city",), "ris"),
                    ArgumentValue(("city",), "Paris"),
                    ArgumentValue((), {"city": "Paris"}),
                ),
            )
        ),
        split((ToolCallDelta(0, finished=True), ()), finish_reason="tool_calls", is_complete=True),
    ]
    tool = {"tool_name": "get_weather", "call_id": "call_a"}
    expected = [
        start("text0", "text"),
        content("text0", "Let me look."),
        end("text0"),
        start("call_a", "tool_call", tool),
        content("call_a", '{"city": "Pa'),
        argument("call_a", ["city"], delta="Pa"),
        content("call_a", 'ris"}'),
        argument("call_a", ["city"], delta="ris"),
        argument("call_a", ["city"], value="Paris"),
        end("call_a", {**tool, "arguments": {"city": "Paris"}}),
        ToolInvocation("call_a", "get_weather", {"city": "Paris"}).to_dict(),
        {**RESPONSE_END, "finish_reason": "tool_calls"},
    ]
    assert run(chunks) == expected
    assert (
        run(
            split_chunk.chunk if isinstance(split_chunk, SplitChunk) else split_chunk
            for split_chunk in chunks
        )
        == expected
    )


def test_write_file_streams_decoded_content_and_path_after_content() -> None:
    chunks = [
        split(
            (
                ToolCallDelta(0, "w1", "write_file", '{"content": "a\\nb'),
                (ArgumentDelta(("content",), "a\nb"),),
            )
        ),
        split(
            (
                ToolCallDelta(0, arguments_delta='", "path": "x.py"}'),
                (
                    ArgumentValue(("content",), "a\nb"),
                    ArgumentValue(("path",), "x.py"),
                    ArgumentValue((), {"content": "a\nb", "path": "x.py"}),
                ),
            )
        ),
    ]
    tool = {"tool_name": "write_file", "call_id": "w1"}
    arguments = {"content": "a\nb", "path": "x.py"}
    expected = [
        start("w1", "write_file", tool),
        content("w1", "a\nb"),
        argument("w1", ["path"], value="x.py"),
        end("w1", {**tool, "arguments": arguments, "path": "x.py"}),
        ToolInvocation("w1", "write_file", arguments).to_dict(),
        RESPONSE_END,
    ]
    assert run(chunks) == expected


def test_truncated_call_gives_an_invocation_with_the_error_and_raw_text() -> None:
    chunks = [
        split((ToolCallDelta(0, "c", "make_file", '{"path": "a'), ())),
        split((ToolCallDelta(0, finished=True), (ArgumentError("truncated", "cut off", 11),))),
    ]
    events = run(chunks)
    invocation = events[-2]
    assert invocation == {
        "type": "TOOL_INVOCATION",
        "id": "c",
        "name": "make_file",
        "arguments": {},
        "error": {"kind": "truncated", "message": "cut off", "raw": '{"path": "a', "offset": 11},
    }


def test_calls_are_parsed_by_the_splitter_as_they_stream() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "f", '{"a": ')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta="[1, 2]}", finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(1, "d", "g", "", finished=True)]),
        ChunkResponse(tool_calls=[ToolCallDelta(2, "e", "h", '{"a": ')]),
    ]
    invocations = [event for event in run(chunks) if event["type"] == "TOOL_INVOCATION"]
    assert [(i["id"], i["arguments"], i["error"] and i["error"]["kind"]) for i in invocations] == [
        ("c", {"a": [1, 2]}, None),
        ("d", {}, None),
        ("e", {}, "truncated"),
    ]


def test_a_chunk_with_tool_calls_that_skipped_the_splitter_is_refused_by_name() -> None:
    emitter = SegmentEmitter()
    assert emitter.feed(ChunkResponse(content="a", tool_calls=[])) != []
    with pytest.raises(ConfigurationError, match="pipe split_arguments before emit_segments"):
        emitter.feed(ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "f", "{}")]))


def test_a_name_that_comes_late_still_decides_the_segment_type() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "c", None, '{"path": "p", ')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, "write_file", '"content": "x"}', finished=True)]),
    ]
    events = run(chunks)
    assert events[0] == start("c", "write_file", {"tool_name": "write_file", "call_id": "c"})
    assert events[-2]["arguments"] == {"path": "p", "content": "x"}


def test_signatures_and_encrypted_reasoning_close_with_their_run() -> None:
    chunks = [
        ChunkResponse(reasoning="think"),
        ChunkResponse(reasoning_signature="sig"),
        ChunkResponse(content="ok"),
        ChunkResponse(encrypted_reasoning="opaque"),
    ]
    assert run(chunks) == [
        start("reasoning0", "reasoning"),
        content("reasoning0", "think"),
        end("reasoning0", {"signature": "sig"}),
        start("text1", "text"),
        content("text1", "ok"),
        end("text1"),
        start("reasoning2", "reasoning"),
        end("reasoning2", {"encrypted_content": "opaque"}),
        RESPONSE_END,
    ]


def test_server_tools_are_folded_as_provider_executed() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "s", "web_search", '{"q": 1}', True, kind="server")])
    ]
    invocation = run(chunks)[-2]
    assert invocation["provider_executed"] is True


def test_response_end_carries_usage_finish_reason_and_metadata() -> None:
    usage = TokenUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    chunks = [
        ChunkResponse(content="x", metadata={"id": "r1"}),
        ChunkResponse(finish_reason="stop", usage=usage, metadata={"model": "m"}, is_complete=True),
    ]
    assert (
        run(chunks)[-1]
        == ResponseEnd(finish_reason="stop", usage=usage, metadata={"id": "r1", "model": "m"}).to_dict()
    )


def test_folder_validates_against_tool_schemas() -> None:
    import pydantic

    class Weather(pydantic.BaseModel):
        city: str

    folder = InvocationFolder(tools={"get_weather": Weather})
    folder.feed(SegmentEvent.start("c", SegmentType.TOOL_CALL, {"tool_name": "get_weather"}))
    _, invocation = folder.feed(
        SegmentEvent.end("c", {"tool_name": "get_weather", "arguments": {"town": "x"}})
    )
    assert isinstance(invocation, ToolInvocation)
    assert invocation.error is not None
    assert invocation.error.kind == "invalid_arguments"
    assert folder.invocations == [invocation]


class Boom(Exception):
    pass


@pytest.mark.anyio
async def test_operator_closes_open_calls_as_interrupted_when_the_source_fails() -> None:
    async def chunks() -> Any:
        yield ChunkResponse(content="a")
        yield ChunkResponse(tool_calls=[ToolCallDelta(0, "c", "f", '{"x": ')])
        raise Boom("connection reset")

    seen: list[Any] = []

    async def consume() -> None:
        async with (
            stream.iterate(chunks()) | split_arguments.pipe() | emit_segments.pipe() | fold_invocations.pipe()
        ).stream() as events:
            async for event in events:
                seen.append(event)

    with pytest.raises(Boom):
        await consume()
    invocation = seen[-1]
    assert isinstance(invocation, ToolInvocation)
    assert invocation.error is not None
    assert invocation.error.kind == "interrupted"
    assert "Boom: connection reset" in invocation.error.message
    assert invocation.error.raw == '{"x": '


@pytest.mark.anyio
async def test_operators_compose_with_pipes() -> None:
    source = stream.iterate([ChunkResponse(content="a"), ChunkResponse(content="b")])
    folded = source | emit_segments.pipe(segment_ids=counter_ids()) | fold_invocations.pipe()
    async with folded.stream() as items:
        events = [event async for event in items]
    assert [event.to_dict() for event in events] == [
        start("text0", "text"),
        content("text0", "a"),
        content("text0", "b"),
        end("text0"),
        RESPONSE_END,
    ]
