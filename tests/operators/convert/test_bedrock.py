"""The Bedrock event-stream decoder: the recorded body at any split, hand-built frames, the operator."""

from __future__ import annotations

import base64
import itertools
import json
import re
import struct
import zlib
from typing import Any

import pytest
from aiostream import stream
from hypothesis import given
from hypothesis import strategies as st

from operators.adapter.eventstream import EventStreamDecoder, decode_eventstream
from operators.convert.anthropic import AnthropicConverter, convert_anthropic
from pipeline.errors import ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse
from tests.conftest import TESTS

FIXTURES = TESTS / "fixtures" / "anthropic"
BODY = (FIXTURES / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.eventstream.bin").read_bytes()
DECODED = [
    json.loads(line)
    for line in (FIXTURES / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.decoded.jsonl")
    .read_text()
    .splitlines()
    if line.strip()
]


def decode(pieces: list[bytes], decoder: EventStreamDecoder | None = None) -> list[dict[str, Any]]:
    decoder = decoder or EventStreamDecoder()
    return [event for piece in pieces for event in decoder.feed(piece)] + decoder.finish()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


def header(name: str, value_type: int, value: bytes) -> bytes:
    encoded = name.encode()
    return bytes([len(encoded)]) + encoded + bytes([value_type]) + value


def string_header(name: str, value: str) -> bytes:
    encoded = value.encode()
    return header(name, 7, struct.pack(">H", len(encoded)) + encoded)


def frame(payload: bytes, *headers: bytes) -> bytes:
    """An event-stream frame with correct lengths and CRCs."""
    header_bytes = b"".join(headers)
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event_frame(event: dict[str, Any]) -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    return frame(
        json.dumps({"bytes": inner, "p": "abc"}).encode(),
        string_header(":event-type", "chunk"),
        string_header(":content-type", "application/json"),
        string_header(":message-type", "event"),
    )


def test_the_recorded_body_whole_and_byte_by_byte() -> None:
    assert decode([BODY]) == DECODED
    assert decode([BODY[offset : offset + 1] for offset in range(len(BODY))]) == DECODED


@given(st.lists(st.integers(min_value=0, max_value=len(BODY)), max_size=12))
def test_the_recorded_body_split_anywhere(cuts: list[int]) -> None:
    assert decode(split(BODY, cuts)) == DECODED


def test_the_recorded_body_converts_like_its_decoded_events() -> None:
    converter = AnthropicConverter()
    from_body = [chunk for event in decode([BODY]) for chunk in converter.feed(event)]
    converter = AnthropicConverter()
    assert from_body == [chunk for event in DECODED for chunk in converter.feed(event)]
    assert from_body[-1] == ChunkResponse(is_complete=True, finish_reason="tool_calls")


def test_headers_of_every_type_are_read() -> None:
    headers = (
        header("t", 0, b""),
        header("f", 1, b""),
        header("b", 2, b"\x05"),
        header("s", 3, struct.pack(">h", -2)),
        header("i", 4, struct.pack(">i", 7)),
        header("l", 5, struct.pack(">q", 2**40)),
        header("raw", 6, struct.pack(">H", 2) + b"\x00\xff"),
        header("ts", 8, struct.pack(">q", 1_700_000_000_000)),
        header("id", 9, bytes(range(16))),
        string_header(":message-type", "event"),
    )
    assert decode([frame(b'{"type": "ping"}', *headers)]) == [{"type": "ping"}]


def test_an_exception_frame_raises_after_the_events_before_it() -> None:
    decoder = EventStreamDecoder()
    exception = frame(
        b'{"message": "Too many requests"}',
        string_header(":exception-type", "throttlingException"),
        string_header(":message-type", "exception"),
    )
    body = event_frame({"type": "ping"}) + exception
    assert decoder.feed(body[:-5]) == [{"type": "ping"}]
    with pytest.raises(ProviderError) as caught:
        decoder.feed(body[-5:])
    assert (
        str(caught.value) == "event-stream frame 1: provider error (throttlingException): Too many requests"
    )
    assert caught.value.kind == "throttlingException"
    assert caught.value.payload == {"message": "Too many requests"}


def test_an_error_frame_raises() -> None:
    error = frame(
        b"",
        string_header(":error-code", "InternalFailure"),
        string_header(":error-message", "boom"),
        string_header(":message-type", "error"),
    )
    with pytest.raises(
        ProviderError, match=re.escape("event-stream frame 0: provider error (InternalFailure): boom")
    ):
        decode([error])


def test_unknown_message_types_are_skipped_and_plain_payloads_pass_through() -> None:
    unknown = frame(b"{}", string_header(":message-type", "initial-response"))
    plain = frame(b'{"type": "message_stop"}', string_header(":message-type", "event"))
    assert decode([unknown, plain]) == [{"type": "message_stop"}]


def test_a_body_cut_inside_a_frame_is_reported_at_the_end() -> None:
    body = event_frame({"type": "ping"}) + event_frame({"type": "ping"})[:20]
    decoder = EventStreamDecoder()
    assert decoder.feed(body) == [{"type": "ping"}]
    with pytest.raises(StreamDecodeError, match="ends inside frame 1 at byte") as caught:
        decoder.finish()
    assert caught.value.offset == len(event_frame({"type": "ping"}))


@pytest.mark.parametrize(
    ("mangle", "problem"),
    [
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "bad message CRC"),
        (lambda data: bytes([data[0] ^ 1]) + data[1:], "bad prelude CRC"),
        (lambda data: data[:40] + b"X" + data[41:], "bad message CRC"),
    ],
)
def test_corrupt_frames_are_reported_with_their_offset(mangle: Any, problem: str) -> None:
    first = event_frame({"type": "ping"})
    with pytest.raises(StreamDecodeError, match=problem) as caught:
        decode([first + mangle(event_frame({"type": "ping"}))])
    assert caught.value.offset == len(first)
    assert f"at byte {len(first)}" in str(caught.value)


def test_frames_over_the_cap_are_refused_before_they_are_buffered() -> None:
    big = event_frame({"type": "content_block_delta", "text": "x" * 1000})
    decoder = EventStreamDecoder(max_frame_size=500)
    with pytest.raises(StreamDecodeError, match="over the cap of 500"):
        decoder.feed(big[:12])


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"not json", "payload that is not valid JSON"),
        (b"[1]", "payload that is not a JSON object"),
        (b'{"bytes": "@@@"}', "not base64"),
        (b'{"bytes": 5}', "'bytes' field that is not a string"),
        (b'{"bytes": "WzFd"}', "event that is not a JSON object"),
    ],
)
def test_bad_payloads_are_decode_errors(payload: bytes, problem: str) -> None:
    with pytest.raises(StreamDecodeError, match=problem):
        decode([frame(payload, string_header(":message-type", "event"))])


def test_malformed_headers_are_decode_errors() -> None:
    with pytest.raises(StreamDecodeError, match="unknown type 42"):
        decode([frame(b"{}", header("x", 42, b""))])
    with pytest.raises(StreamDecodeError, match="malformed headers"):
        decode([frame(b"{}", header("x", 7, struct.pack(">H", 50) + b"short"))])


@pytest.mark.anyio
async def test_operator_into_the_anthropic_converter() -> None:
    pieces = split(BODY, [5, 100, 101, 700, 2000])
    pipeline = stream.iterate(pieces) | decode_eventstream.pipe() | convert_anthropic.pipe()
    async with pipeline.stream() as chunks:
        received = [chunk async for chunk in chunks]
    converter = AnthropicConverter()
    expected = [chunk for event in DECODED for chunk in converter.feed(event)]
    received_ids = [delta.call_id for chunk in received for delta in chunk.tool_calls or []]
    assert received == expected
    assert received_ids[0] == "toolu_bdrk_018dfpvS9zVjdozFjuwZf5cx"
