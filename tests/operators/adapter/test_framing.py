"""Auto framing and the byte decoders' failures: a bounded head, CR line ends, Gemini's JSON array, Bedrock's
binary frames, HTTP error bodies fed as bytes, invalid UTF-8 and JSON that is not I-JSON (RFC 7493)."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.adapter import JSONLinesDecoder, JSONSequenceDecoder, SSEDecoder, SSEPayloadDecoder
from operators.adapter.eventstream import EventStreamDecoder
from operators.adapter.sources import from_bytes, provider_events
from pipeline.cli.main import main
from pipeline.compose import chunk_core, process
from pipeline.errors import ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse, PipelineEvent, ResponseEnd, SegmentEvent, SegmentEventType
from pipeline.testing import chunked, collect, counter_segment_ids, feed_all, sequential_call_ids
from tests.conftest import FIXTURES

GEMINI_SSE = FIXTURES / "gemini" / "fantasy_gemini-2.5-pro_2_parallel_function_calls_two_chunks.sse"
BEDROCK = FIXTURES / "anthropic" / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.eventstream.bin"
BEDROCK_DECODED = FIXTURES / "anthropic" / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.decoded.jsonl"
OPENAI_CHUNK = {
    "id": "c",
    "object": "chat.completion.chunk",
    "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}],
}
OPENAI_401 = b"""{
    "error": {
        "message": "Incorrect API key provided: sk-abc. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }
}
"""


async def pieces(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def run(items: list[Any], **options: Any) -> tuple[list[PipelineEvent], BaseException | None]:
    """Every event of ``process()`` over ``items``, and the error it ended with."""
    received: list[PipelineEvent] = []
    try:
        ids: dict[str, Any] = {"id_factory": sequential_call_ids, "segment_ids": counter_segment_ids()}
        async with process(pieces(items), **ids, **options).stream() as events:
            async for event in events:
                received.append(event)
    except Exception as error:
        return received, error
    return received, None


def text_of(events: list[PipelineEvent]) -> str:
    return "".join(
        event.payload["delta"]
        for event in events
        if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.CONTENT
    )


def sse_payloads(path: Path) -> list[bytes]:
    return [line[6:] for line in path.read_bytes().splitlines() if line.startswith(b"data: ")]


def gemini_array() -> bytes:
    """The Gemini SSE recording as ``streamGenerateContent`` without ``alt=sse`` sends it: one JSON array."""
    return b"[" + b",\r\n".join(sse_payloads(GEMINI_SSE)) + b"]"


# --- item 3: auto framing decides within a bounded head -------------------------------------------------


def test_a_huge_first_event_without_a_line_end_hits_the_event_cap_while_it_streams() -> None:
    """The framing is told from ``data:``; the SSE decoder's cap then applies to the first event at once
    (it used to be held, re-joined on every read, until its first LF)."""
    core = chunk_core(provider="openai")
    assert core.feed(b"data: ") == []
    megabyte = b"x" * (1024 * 1024)
    for _ in range(15):
        assert core.feed(megabyte) == []
    with pytest.raises(StreamDecodeError, match="larger than max_event_size=16777216"):
        core.feed(megabyte)


def test_the_framing_head_is_capped() -> None:
    core = chunk_core()
    core.feed(b"\n" * 65536)
    with pytest.raises(StreamDecodeError, match="no content in the first 65537 bytes"):
        core.feed(b"\r")


def test_cr_only_sse_yields_each_event_as_it_arrives() -> None:
    core = chunk_core(provider="openai")
    first = core.feed(b"data: " + json.dumps(OPENAI_CHUNK).encode() + b"\r\r")
    assert [chunk.content for chunk in first] == ["Hi"]
    assert [chunk.content for chunk in core.feed(b"data: " + json.dumps(OPENAI_CHUNK).encode() + b"\r")] == []
    assert [chunk.content for chunk in core.feed(b"\r")] == ["Hi"]


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 5, None])
async def test_cr_only_sse_through_process(size: int | None) -> None:
    body = (b"data: " + json.dumps(OPENAI_CHUNK).encode() + b"\r\r") * 2
    events, error = await run(chunked(body, size))
    assert error is None
    assert text_of(events) == "HiHi"


# --- item 4: CR-only JSON Lines -------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 7, None])
async def test_cr_only_json_lines_under_auto_framing(size: int | None) -> None:
    body = (json.dumps(OPENAI_CHUNK).encode() + b"\r") * 3
    events, error = await run(chunked(body, size))
    assert error is None
    assert text_of(events) == "HiHiHi"


def test_cr_only_json_lines_yield_each_line_as_it_ends() -> None:
    core = chunk_core()
    line = json.dumps(OPENAI_CHUNK).encode()
    assert [chunk.content for chunk in core.feed(line + b"\r")] == ["Hi"]


# --- item 5: invalid UTF-8 ------------------------------------------------------------------------------


def test_json_lines_with_invalid_utf8_in_a_string_name_the_stream_offset_after_the_lines_before() -> None:
    decoder = JSONLinesDecoder()
    values, error = feed_all(decoder, [b'{"a": 1}\n{"b": 2}\n  {"c": "x\xff"}\n'])
    assert values == [{"a": 1}, {"b": 2}]
    assert isinstance(error, StreamDecodeError)
    assert error.offset == 28
    assert "invalid UTF-8 at byte 28 of the stream" in str(error)


@pytest.mark.anyio
async def test_json_lines_with_invalid_utf8_through_process() -> None:
    line = json.dumps(OPENAI_CHUNK).encode()
    events, error = await run([line + b"\n" + line + b"\n", b'{"x": "\xc3("}\n'])
    assert text_of(events) == "HiHi"
    assert isinstance(error, StreamDecodeError)
    assert error.offset == 2 * (len(line) + 1) + 7


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("chunks", "offset", "text"),
    [
        ([b"hello \xff world"], 6, "hello "),
        ([b"abc", b"de\xff"], 5, "abcde"),
        ([b"ab\xe2", b"\x98x"], 2, "ab"),
        ([b"ok \xe2\x98"], 3, "ok "),  # cut off at the end
    ],
)
async def test_text_with_invalid_utf8(chunks: list[bytes], offset: int, text: str) -> None:
    events, error = await run(chunks, provider="text")
    assert isinstance(error, StreamDecodeError)
    assert error.offset == offset
    assert f"invalid UTF-8 at byte {offset} of the text stream" in str(error)
    assert text_of(events) == text


# --- item 8: Bedrock frames before a bad one ------------------------------------------------------------


def _frame(payload: bytes, *headers: tuple[str, str]) -> bytes:
    header_bytes = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
        for name, value in headers
    )
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_bytes))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + header_bytes + payload
    return body + struct.pack(">I", zlib.crc32(body))


def _event_frame(event: dict[str, Any]) -> bytes:
    inner = base64.b64encode(json.dumps(event).encode()).decode()
    return _frame(json.dumps({"bytes": inner}).encode(), (":message-type", "event"))


PING = {"type": "ping"}
START = {"type": "message_start", "message": {"id": "m", "model": "claude", "content": [], "usage": {}}}


def test_bedrock_events_before_an_exception_frame_in_the_same_read_are_kept() -> None:
    exception = _frame(
        b'{"message": "Too many requests"}',
        (":message-type", "exception"),
        (":exception-type", "throttlingException"),
    )
    values, error = feed_all(EventStreamDecoder(), [_event_frame(START) + _event_frame(PING) + exception])
    assert values == [START, PING]
    assert isinstance(error, ProviderError)
    assert "(throttlingException): Too many requests" in str(error)


def test_bedrock_events_before_a_crc_mismatch_in_the_same_read_are_kept() -> None:
    bad = bytearray(_event_frame(PING))
    bad[-1] ^= 0xFF
    values, error = feed_all(EventStreamDecoder(), [_event_frame(START) + bytes(bad)])
    assert values == [START]
    assert isinstance(error, StreamDecodeError)
    assert "bad message CRC" in str(error)


# --- item 12: HTTP error bodies fed as bytes ------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, None])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": {"message": "Invalid API key", "type": "invalid_request_error"}}', "Invalid API key"),
        (OPENAI_401, "Incorrect API key provided: sk-abc"),
        (
            b'[{"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}]',
            "not valid",
        ),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b'{"message": "Forbidden"}\n', "Forbidden"),
    ],
)
async def test_a_json_error_body_is_a_provider_error_with_its_message(
    body: bytes, message: str, size: int | None
) -> None:
    events, error = await run(chunked(body, size))
    assert isinstance(error, ProviderError), error
    assert message in str(error)
    assert not [event for event in events if isinstance(event, ResponseEnd)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "quoted"),
    [
        (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "<html><body><h1>502 Bad Gateway"),
        (b"Internal Server Error", "Internal Server Error"),
        (b"upstream connect error or disconnect/reset before headers\n", "upstream connect error"),
        (b"\xef\xbb\xbf\r\nNot Found\r\n", "Not Found"),
    ],
)
async def test_a_text_error_body_is_a_decode_error_quoting_its_start(body: bytes, quoted: str) -> None:
    events, error = await run(chunked(body, 3))
    assert isinstance(error, StreamDecodeError)
    assert "neither SSE, JSON Lines" in str(error)
    assert quoted in str(error)
    assert events == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("items", "what"), [([], "empty body"), ([b""], "is empty"), ([b" \n", b"\r\n"], "only whitespace")]
)
async def test_an_empty_body_is_a_decode_error(items: list[bytes], what: str) -> None:
    events, error = await run(items)
    assert isinstance(error, StreamDecodeError)
    assert what in str(error)
    assert events == []


@pytest.mark.anyio
async def test_an_html_page_under_explicit_sse_framing_is_a_decode_error() -> None:
    _, error = await run(
        [b"<html>\n<h1>Service Unavailable</h1>\n</html>\n"], framing="sse", provider="openai"
    )
    assert isinstance(error, StreamDecodeError)
    assert "ended without any event; it starts with b'<html>\\n<h1>Service Unavailable" in str(error)


def test_sse_of_comments_only_is_not_an_error() -> None:
    assert feed_all(SSEPayloadDecoder(), [b": keep-alive\n\n"]) == ([], None)


# --- item 24: Gemini's streamed JSON array --------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 13, None])
async def test_a_gemini_json_array_gives_the_events_of_the_sse_recording(size: int | None) -> None:
    reference, error = await run([GEMINI_SSE.read_bytes()])
    assert error is None
    events, error = await run(chunked(gemini_array(), size))
    assert error is None
    assert events == reference


def test_each_array_element_comes_out_as_its_last_byte_arrives() -> None:
    payloads = sse_payloads(GEMINI_SSE)
    decoder = JSONSequenceDecoder()
    assert decoder.feed(b"[" + payloads[0][:-1]) == []
    assert decoder.feed(payloads[0][-1:]) == [json.loads(payloads[0])]
    assert decoder.feed(b",\r\n" + payloads[1] + b"]") == [json.loads(payloads[1])]
    assert decoder.finish() == []


STRINGS = st.text(alphabet=st.sampled_from('ab{}[]",\\\n\u00e9\u2603'), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(STRINGS, inner, max_size=3),
    max_leaves=10,
)
OBJECTS = st.lists(st.dictionaries(STRINGS, VALUES, max_size=4), max_size=5)


@settings(max_examples=150, deadline=None)
@given(
    objects=OBJECTS, sizes=st.lists(st.integers(min_value=1, max_value=9), min_size=1), indent=st.booleans()
)
def test_json_sequence_decoder_at_any_chunking(
    objects: list[dict[str, Any]], sizes: list[int], indent: bool
) -> None:
    as_array = json.dumps(objects, indent=2 if indent else None).encode()
    as_sequence = b"\n".join(json.dumps(value, indent=2 if indent else None).encode() for value in objects)
    for body in (as_array, as_sequence):
        values, error = feed_all(JSONSequenceDecoder(), chunked(body, sizes))
        assert error is None
        assert values == objects


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'[{"a": 1}, {"b"', "ends inside object 1 (started at byte 11"),
        (b'[{"a": 1}', "ends without its closing ']'"),
        (b'[{"a": 1}, 2]', "expected a JSON object at byte 11"),
        (b'[{"a": 1}] {"b": 2}', "expected nothing after the array at byte 11"),
        (b'[{"a": 1} {"b": 2}]', "expected ',' or ']' at byte 10"),
        (b'{"a": 1}\n{"b": }', "JSON object 1 (byte 9) is not valid JSON"),
    ],
)
def test_json_sequence_errors_come_after_the_objects_before(body: bytes, message: str) -> None:
    values, error = feed_all(JSONSequenceDecoder(), [body])
    assert values == [{"a": 1}]
    assert isinstance(error, StreamDecodeError)
    assert message in str(error)


def test_json_sequence_object_cap() -> None:
    decoder = JSONSequenceDecoder(max_value_size=10)
    with pytest.raises(
        StreamDecodeError, match="JSON object 0 starting at byte 1 is larger than max_value_size=10"
    ):
        decoder.feed(b'[{"a": "0123456789')


@pytest.mark.anyio
async def test_provider_events_reads_a_json_array() -> None:
    events = await collect(provider_events(from_bytes(gemini_array(), chunk_size=7), framing="json"))
    assert events == [json.loads(payload) for payload in sse_payloads(GEMINI_SSE)]


# --- item 25: Bedrock's binary framing, detected --------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 100, None])
async def test_process_detects_a_bedrock_event_stream(size: int | None) -> None:
    decoded = [json.loads(line) for line in BEDROCK_DECODED.read_text().splitlines() if line.strip()]
    reference, error = await run(decoded)
    assert error is None
    events, error = await run(chunked(BEDROCK.read_bytes(), size))
    assert error is None
    assert events == reference
    assert any(type(event).__name__ == "ToolInvocation" for event in events)


def test_the_first_bedrock_frame_is_decoded_as_soon_as_it_is_whole() -> None:
    body = BEDROCK.read_bytes()
    (first_length,) = struct.unpack_from(">I", body)
    core = chunk_core()
    assert core.feed(body[: first_length - 1]) == []
    first = list(core.feed(body[first_length - 1 : first_length]))
    assert first
    assert isinstance(first[0], ChunkResponse)


def test_streamfold_replay_reads_a_bedrock_recording(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(BEDROCK), "--output", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    invocations = [line for line in lines if line["type"] == "TOOL_INVOCATION"]
    assert len(invocations) == 1
    assert invocations[0]["error"] is None


# --- item 18: deep nesting and JSON that is not I-JSON --------------------------------------------------

# Deeper than msgspec goes on every supported Python: the C recursion limit is about 1,000 levels on
# 3.11, 1,500 on 3.12 and several thousand on 3.13.
DEEP = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def sse_body(*payloads: bytes) -> bytes:
    return b"".join(b"data: " + payload + b"\n\n" for payload in payloads)


FIRST = json.dumps(OPENAI_CHUNK).encode()


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (DEEP, "JSON nested too deeply to decode"),
        (b'{"a": "\\ud800"}', r"not I-JSON \(RFC 7493\): a lone surrogate escape '\\\\ud800'"),
        (b'{"a": "\\udc00x"}', r"not I-JSON \(RFC 7493\): a lone surrogate escape '\\\\udc00'"),
        (b'{"a": 1e999}', r"not I-JSON \(RFC 7493\): the number 1e999 .* is beyond the range of a double"),
    ],
)
def test_sse_event_json_problems_name_the_event_and_byte_offset(payload: bytes, problem: str) -> None:
    values, error = feed_all(SSEPayloadDecoder(), [sse_body(FIRST, payload)])
    assert values == [OPENAI_CHUNK]
    assert isinstance(error, StreamDecodeError)
    offset = len(FIRST) + 8 + len(b"data: ")  # the first byte of the event's data
    assert error.offset == offset
    assert f"event 1 (byte {offset}) has data that is" in str(error)
    assert re.search(problem, str(error)), str(error)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (DEEP, "JSON nested too deeply to decode"),
        (b'{"a": "\\ud800"}', "lone surrogate escape '\\\\ud800' at byte "),
        (b'{"a": 1e999}', "the number 1e999 at byte "),
    ],
)
def test_json_lines_and_arrays_name_the_problem(payload: bytes, problem: str) -> None:
    line_values, line_error = feed_all(JSONLinesDecoder(), [FIRST + b"\n" + payload + b"\n"])
    array_values, array_error = feed_all(JSONSequenceDecoder(), [b"[" + FIRST + b"," + payload + b"]"])
    assert line_values == array_values == [OPENAI_CHUNK]
    assert isinstance(line_error, StreamDecodeError)
    assert isinstance(array_error, StreamDecodeError)
    assert problem in str(line_error)
    assert problem in str(array_error)
    assert f"line 1 (byte {len(FIRST) + 1})" in str(line_error)
    assert f"JSON object 1 (byte {len(FIRST) + 2})" in str(array_error)


def test_bedrock_deeply_nested_event_is_a_decode_error() -> None:
    frame = _frame(
        json.dumps({"bytes": base64.b64encode(DEEP).decode()}).encode(), (":message-type", "event")
    )
    values, error = feed_all(EventStreamDecoder(), [_event_frame(PING) + frame])
    assert values == [PING]
    assert isinstance(error, StreamDecodeError)
    assert "JSON nested too deeply to decode" in str(error)


@pytest.mark.anyio
async def test_deep_nesting_through_process() -> None:
    events, error = await run([sse_body(FIRST, DEEP)])
    assert text_of(events) == "Hi"
    assert isinstance(error, StreamDecodeError)
    assert "event 1 (at byte" in str(error)


def test_sse_decoder_alone_is_unchanged() -> None:
    """The plain SSE decoder gives events with their text data."""
    assert SSEDecoder().feed(b"data: x\n\n")[0].data == "x"


# --- any chunking, every framing ------------------------------------------------------------------------

RECHUNKED = {
    "sse": (FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_tool_use.sse").read_bytes(),
    "sse-cr": (FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_tool_use.sse")
    .read_bytes()
    .replace(b"\n", b"\r"),
    "jsonl": (FIXTURES / "anthropic" / "vercel_claude-haiku-4-5_text_then_tool_use.jsonl").read_bytes(),
    "json": gemini_array(),
    "eventstream": BEDROCK.read_bytes(),
}


@pytest.mark.anyio
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    framing=st.sampled_from(sorted(RECHUNKED)),
    sizes=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=8),
    lead=st.sampled_from([b"", b"\n", b"\r\n\r\n", b"\xef\xbb\xbf"]),
)
async def test_auto_framing_at_any_chunking(framing: str, sizes: list[int], lead: bytes) -> None:
    body = RECHUNKED[framing]
    if framing != "eventstream":
        body = lead + body
    reference, error = await run([body])
    assert error is None
    assert reference
    assert await run(chunked(body, sizes)) == (reference, None)


@pytest.mark.anyio
@pytest.mark.parametrize("framing", sorted(RECHUNKED))
async def test_a_tiny_first_read_then_a_large_one_still_tells_the_framing(framing: str) -> None:
    """The first read of 1 byte, the next of 256 (past the small head): the event-stream prelude's 12 bytes
    span both reads (found by the property test above: the framing was judged on 1 byte)."""
    body = RECHUNKED[framing]
    reference, error = await run([body])
    assert error is None
    assert await run(chunked(body, [1, 256])) == (reference, None)


@pytest.mark.anyio
@pytest.mark.parametrize("framing", sorted(set(RECHUNKED) - {"eventstream"}))
@pytest.mark.parametrize("cut", [1, 2])
@pytest.mark.parametrize("lead", [b"", b"\r\n"])
async def test_a_bom_split_by_the_first_read_then_a_large_read(framing: str, cut: int, lead: bytes) -> None:
    """The first read ends inside a UTF-8 BOM and the next one, past the small head, starts with the BOM's
    rest (found by the property test above: the rest was taken for the content, ``\\xbb\\xbf[...``)."""
    body = b"\xef\xbb\xbf" + lead + RECHUNKED[framing]
    reference, error = await run([body])
    assert error is None
    assert reference
    assert await run(chunked(body, [cut, 256])) == (reference, None)
    assert await run(chunked(body, [1, 1, 256])) == (reference, None)
