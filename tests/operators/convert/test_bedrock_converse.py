"""Amazon Bedrock ConverseStream: the converter on exact events, the recorded bodies at every byte
boundary, bytes against boto3's dicts, errors naming the event and field, truncation."""

from __future__ import annotations

import base64
import itertools
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.eventstream import EventStreamFramer
from operators.convert.bedrock_converse import BedrockConverseConverter
from pipeline.compose import process
from pipeline.errors import ConverterError, ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse, ResponseEnd, TokenUsage, ToolCallDelta, ToolInvocation, ToolResult
from pipeline.testing import collect, sequential_call_ids
from tests.conftest import FIXTURES
from tests.converter_cases import fold_calls, run_converter
from tests.reference_converse import read_frames

FOLDER = FIXTURES / "bedrock_converse"
BODIES = sorted(FOLDER.glob("*.bin"))
LINES = sorted(FOLDER.glob("*.jsonl"))
CODE_INTERPRETER = FOLDER / "pydantic-ai_nova-2-lite_server_code_interpreter_then_tool_use.eventstream.bin"


def frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """An event-stream frame with string headers, correct lengths and CRCs."""
    header_bytes = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event_frame(event: dict[str, Any]) -> bytes:
    """The frame Bedrock sends for the boto3-shaped ``{"<event>": body}``."""
    ((name, body),) = event.items()
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return frame(json.dumps({**body, "p": "abcdefgh"}).encode(), headers)


def exception_frame(kind: str, body: dict[str, Any]) -> bytes:
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return frame(json.dumps(body).encode(), headers)


def boto3_events(path: Path) -> list[dict[str, Any]]:
    """What boto3's ``response["stream"]`` yields for a recording: ``{"<event>": body}`` without the
    padding, ``redactedContent`` as bytes (a blob)."""
    if path.suffix == ".jsonl":
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        events = [{name: body} for name, body in read_frames(path.read_bytes())]
    for event in events:
        for body in event.values():
            body.pop("p", None)
            reasoning = body.get("delta", {}).get("reasoningContent", {})
            if "redactedContent" in reasoning:
                reasoning["redactedContent"] = base64.b64decode(reasoning["redactedContent"])
    return events


def from_bytes(pieces: list[bytes]) -> list[ChunkResponse]:
    framer, converter = EventStreamFramer(), BedrockConverseConverter(id_factory=sequential_call_ids)
    payloads = [payload for piece in pieces for payload in framer.feed(piece)] + framer.finish()
    return run_converter(converter, payloads)


def from_dicts(events: list[dict[str, Any]]) -> list[ChunkResponse]:
    return run_converter(BedrockConverseConverter(id_factory=sequential_call_ids), events)


def convert(*events: dict[str, Any]) -> list[ChunkResponse]:
    return from_dicts(list(events))


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


# exact events


def delta(index: int, **body: Any) -> dict[str, Any]:
    return {"contentBlockDelta": {"contentBlockIndex": index, "delta": body}}


def stop(index: int) -> dict[str, Any]:
    return {"contentBlockStop": {"contentBlockIndex": index}}


USAGE = {
    "inputTokens": 10,
    "outputTokens": 5,
    "totalTokens": 20,
    "cacheReadInputTokens": 4,
    "cacheWriteInputTokens": 1,
}


def test_every_kind_of_block_gives_its_chunks() -> None:
    tool_start = {"toolUse": {"toolUseId": "tooluse_1", "name": "weather"}}
    chunks = convert(
        {"messageStart": {"role": "assistant"}},
        delta(0, reasoningContent={"text": "Hm"}),
        delta(0, reasoningContent={"signature": "sig"}),
        stop(0),
        delta(1, reasoningContent={"redactedContent": b"\x00\x01"}),
        stop(1),
        delta(2, text="Hi "),
        delta(2, citation={"title": "doc", "location": {"documentPage": {"start": 1}}}),
        delta(2, text=""),
        stop(2),
        {"contentBlockStart": {"contentBlockIndex": 3, "start": tool_start}},
        delta(3, toolUse={"input": '{"city":'}),
        delta(3, toolUse={"input": ""}),
        delta(3, toolUse={"input": '"Paris"}'}),
        stop(3),
        {"messageStop": {"stopReason": "tool_use", "additionalModelResponseFields": {"x": 1}}},
        {"metadata": {"usage": USAGE, "metrics": {"latencyMs": 42}, "serviceTier": {"type": "flex"}}},
    )
    assert chunks == [
        ChunkResponse(reasoning="Hm"),
        ChunkResponse(reasoning_signature="sig"),
        ChunkResponse(reasoning_done=True),
        ChunkResponse(encrypted_reasoning="AAE="),
        ChunkResponse(reasoning_done=True),
        ChunkResponse(content="Hi "),
        ChunkResponse(citations=[{"title": "doc", "location": {"documentPage": {"start": 1}}}]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, "tooluse_1", "weather")]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"city":')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='"Paris"}')]),
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]),
        ChunkResponse(
            finish_reason="tool_calls",
            metadata={"stop_reason": "tool_use", "additional_model_response_fields": {"x": 1}},
        ),
        ChunkResponse(
            is_complete=True,
            finish_reason="tool_calls",
            usage=TokenUsage(
                prompt_tokens=15,
                completion_tokens=5,
                total_tokens=20,
                cached_tokens=4,
                cache_creation_tokens=1,
            ),
            metadata={"latency_ms": 42, "service_tier": "flex"},
        ),
    ]


def test_a_server_tool_and_its_result() -> None:
    start = {"toolUse": {"toolUseId": "t1", "name": "nova_code_interpreter", "type": "server_tool_use"}}
    result_start = {
        "toolResult": {"toolUseId": "t1", "type": "nova_code_interpreter_result", "status": "error"}
    }
    chunks = convert(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": start}},
        delta(0, toolUse={"input": "{}"}),
        stop(0),
        {"contentBlockStart": {"contentBlockIndex": 1, "start": result_start}},
        delta(1, toolResult=[{"json": {"exitCode": 1}}]),
        delta(1, toolResult=[{"text": "boom"}]),
        stop(1),
    )
    assert chunks[0] == ChunkResponse(
        tool_calls=[ToolCallDelta(0, "t1", "nova_code_interpreter", kind="server")]
    )
    assert chunks[-1] == ChunkResponse(
        tool_results=[
            ToolResult(
                call_id="t1",
                name="nova_code_interpreter",
                content=[{"json": {"exitCode": 1}}, {"text": "boom"}],
                is_error=True,
                result_type="nova_code_interpreter_result",
            )
        ]
    )


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("malformed_tool_use", "malformed_tool_use"),
    ],
)
def test_stop_reasons_in_openai_words(stop_reason: str, finish_reason: str) -> None:
    chunks = convert({"messageStop": {"stopReason": stop_reason}})
    assert chunks == [
        ChunkResponse(finish_reason=finish_reason, metadata={"stop_reason": stop_reason}),
        ChunkResponse(is_complete=True, finish_reason=finish_reason),
    ]


def test_the_response_is_complete_once_stop_and_metadata_both_came() -> None:
    metadata = {"metadata": {"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}}}
    chunks = convert(metadata, {"messageStop": {"stopReason": "end_turn"}})
    assert [chunk.is_complete for chunk in chunks] == [False, True]
    assert chunks[0].finish_reason is None


def test_a_stream_cut_before_message_stop_has_no_finish_and_an_unfinished_call() -> None:
    start = {"toolUse": {"toolUseId": "t1", "name": "f"}}
    chunks = convert(
        {"contentBlockStart": {"contentBlockIndex": 0, "start": start}}, delta(0, toolUse={"input": '{"a":'})
    )
    assert [call.finished for call in fold_calls(chunks)] == [False]
    assert not any(chunk.is_complete or chunk.finish_reason for chunk in chunks)


@pytest.mark.anyio
async def test_a_body_cut_before_message_stop_ends_unsafe_with_a_truncated_call() -> None:
    body = CODE_INTERPRETER.read_bytes()
    head = body[: sum(frame_lengths(body)[:8])]  # up to the start of the final_result call
    assert read_frames(head)[-1][0] == "contentBlockStart"
    cut = head + event_frame(delta(2, toolUse={"input": '{"result": 70'}))
    events = await collect(process(cut, id_factory=sequential_call_ids))
    (end,) = [event for event in events if isinstance(event, ResponseEnd)]
    assert end.finish_reason is None
    final = [event for event in events if isinstance(event, ToolInvocation)][-1]
    assert (final.name, final.error.kind if final.error else None) == ("final_result", "truncated")


def frame_lengths(body: bytes) -> list[int]:
    lengths, at = [], 0
    while at < len(body):
        (total,) = struct.unpack_from(">I", body, at)
        lengths.append(total)
        at += total
    return lengths


# errors


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            {"contentBlockDelta": {"contentBlockIndex": "0", "delta": {"text": "x"}}},
            "event 0: field 'contentBlockDelta.contentBlockIndex': Expected `int`, got `str`",
        ),
        (
            {"contentBlockDelta": {"delta": {"text": "x"}}},
            "event 0 (contentBlockDelta): field 'contentBlockIndex' should be an integer, got nothing",
        ),
        (
            {"contentBlockDelta": {"contentBlockIndex": 0}},
            "event 0 (contentBlockDelta): field 'delta' should be an object, got nothing",
        ),
        (
            delta(0, toolUse={"input": "{}"}),
            "event 0 (contentBlockDelta): has toolUse input for block 0, not an open call",
        ),
        (
            {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t"}}}},
            "event 0 (contentBlockStart): field 'start.toolUse.name' should be a string, got nothing",
        ),
        ({"messageStop": {}}, "event 0 (messageStop): field 'stopReason' should be a string, got nothing"),
        (
            delta(0, reasoningContent={"redactedContent": "@@"}),
            "event 0: field 'contentBlockDelta.delta.reasoningContent.redactedContent': Invalid base64",
        ),
    ],
)
def test_errors_name_the_event_and_the_field(event: dict[str, Any], message: str) -> None:
    with pytest.raises(ConverterError, match=re.escape(message)):
        convert(event)


def test_the_same_error_from_bytes_names_the_frame_offset() -> None:
    body = event_frame({"messageStart": {"role": "assistant"}}) + frame(
        b'{"contentBlockIndex": 0, "delta": {"text": 5}}', {":event-type": "contentBlockDelta"}
    )
    with pytest.raises(ConverterError, match=re.escape("event 1: field 'contentBlockDelta.delta.text'")):
        from_bytes([body])
    with pytest.raises(StreamDecodeError, match="at byte"):
        from_bytes([frame(b"{not json", {":event-type": "messageStart"})])


def test_an_exception_event_is_a_provider_error_from_dicts_and_from_bytes() -> None:
    details = {"message": "Model Stream Error", "originalStatusCode": 500, "originalMessage": "failed"}
    with pytest.raises(ProviderError) as from_dict:
        convert({"messageStart": {"role": "assistant"}}, {"modelStreamErrorException": details})
    assert str(from_dict.value) == "event 1: provider error (modelStreamErrorException): Model Stream Error"
    assert (from_dict.value.kind, from_dict.value.status) == ("modelStreamErrorException", 500)
    body = event_frame({"messageStart": {"role": "assistant"}}) + exception_frame(
        "modelStreamErrorException", details
    )
    with pytest.raises(ProviderError) as from_frame:
        from_bytes([body])
    assert (from_frame.value.kind, from_frame.value.status) == ("modelStreamErrorException", 500)
    assert str(from_frame.value).endswith("provider error (modelStreamErrorException): Model Stream Error")


@pytest.mark.parametrize(
    "kind",
    ["internalServerException", "validationException", "throttlingException", "serviceUnavailableException"],
)
def test_every_exception_event_raises(kind: str) -> None:
    with pytest.raises(ProviderError, match=re.escape(f"event 0: provider error ({kind}): nope")):
        convert({kind: {"message": "nope"}})


def test_unknown_events_and_deltas_give_nothing() -> None:
    assert (
        convert(
            {"somethingNew": {}},
            delta(0, image={"source": {}}),
            {"contentBlockStart": {"contentBlockIndex": 0, "start": {}}},
        )
        == []
    )


# bytes and dicts


@pytest.mark.parametrize("path", BODIES, ids=lambda path: path.name)
def test_each_recorded_body_reads_like_boto3s_events(path: Path) -> None:
    assert from_bytes([path.read_bytes()]) == from_dicts(boto3_events(path))


@pytest.mark.parametrize("path", LINES, ids=lambda path: path.name)
def test_frames_built_from_the_decoded_recordings_read_like_their_dicts(path: Path) -> None:
    events = boto3_events(path)
    body = b"".join(event_frame(event) for event in events)
    assert from_bytes([body]) == from_dicts(events)


@pytest.mark.parametrize("path", BODIES[:3], ids=lambda path: path.name)
def test_a_recorded_body_cut_at_every_byte(path: Path) -> None:
    body = path.read_bytes()
    whole = from_bytes([body])
    assert from_bytes([body[offset : offset + 1] for offset in range(len(body))]) == whole
    for cut in range(1, len(body)):
        assert from_bytes([body[:cut], body[cut:]]) == whole, cut


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(CODE_INTERPRETER.read_bytes())), max_size=12))
def test_the_recorded_body_split_anywhere(cuts: list[int]) -> None:
    body = CODE_INTERPRETER.read_bytes()
    assert from_bytes(split(body, cuts)) == from_bytes([body])


@pytest.mark.anyio
async def test_process_reads_boto3_events_and_bytes_alike() -> None:
    from_stream = await collect(process(CODE_INTERPRETER.read_bytes(), id_factory=sequential_call_ids))
    from_boto3 = await collect(process(boto3_events(CODE_INTERPRETER), id_factory=sequential_call_ids))
    assert [event.to_dict() for event in from_stream] == [event.to_dict() for event in from_boto3]
    named = await collect(
        process(CODE_INTERPRETER.read_bytes(), provider="bedrock-converse", framing="eventstream")
    )
    assert [event.to_dict() for event in named] == [event.to_dict() for event in from_stream]


@pytest.mark.anyio
async def test_a_converse_stream_read_as_anthropic_says_so() -> None:
    with pytest.raises(ConverterError, match="looks like 'bedrock-converse'"):
        await collect(process(CODE_INTERPRETER.read_bytes(), provider="anthropic"))
