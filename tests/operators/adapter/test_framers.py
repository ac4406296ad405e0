"""The framers (SSE, JSON Lines, JSON array, AWS event-stream): each event's bytes and their offset, the
same however the body is cut into reads, and errors that name what and where."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import (
    EventStreamFramer,
    JSONArrayFramer,
    JSONLinesDecoder,
    JSONLinesFramer,
    SSEDecoder,
    SSEFramer,
    SSEPayloadDecoder,
)
from pipeline.errors import ProviderError, StreamDecodeError
from pipeline.models import Payload
from tests.conftest import FIXTURES
from tests.core_runs import run_to_end

SSE_BODIES = [
    FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse",
    FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_thinking_then_tool_use.sse",
    FIXTURES / "gemini" / "fantasy_gemini-2.5-pro_2_parallel_function_calls_two_chunks.sse",  # CRLF
    FIXTURES / "openai_responses" / "fantasy_gpt-5_reasoning_summary_then_function_call.sse",
]
JSONL_BODY = FIXTURES / "anthropic" / "vercel_claude-sonnet-4-5_thinking_signature_text.jsonl"
EVENTSTREAM_BODY = FIXTURES / "anthropic" / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.eventstream.bin"


def json_array_body() -> bytes:
    """A Gemini SSE recording's payloads as the streamed JSON array ``streamGenerateContent`` sends."""
    lines = SSE_BODIES[2].read_bytes().splitlines()
    payloads = [line[len(b"data: ") :] for line in lines if line.startswith(b"data: ")]
    return b"[" + b",\r\n".join(payloads) + b"]"


Framer = Callable[[], Any]
BODIES: list[tuple[str, Framer, bytes]] = [
    *((path.name, SSEFramer, path.read_bytes()) for path in SSE_BODIES),
    ("jsonl", JSONLinesFramer, JSONL_BODY.read_bytes()),
    ("json array", JSONArrayFramer, json_array_body()),
    ("eventstream", EventStreamFramer, EVENTSTREAM_BODY.read_bytes()),
]


def frame(framer: Any, reads: list[bytes]) -> tuple[list[Payload], str | None]:
    return run_to_end(framer, reads)


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    bounds = sorted({position % (len(data) + 1) for position in positions})
    return [data[start:end] for start, end in zip([0, *bounds], [*bounds, len(data)], strict=True)]


@pytest.mark.parametrize(("name", "make", "body"), BODIES, ids=[name for name, _, _ in BODIES])
def test_byte_by_byte_reads_give_the_payloads_of_one_read(name: str, make: Framer, body: bytes) -> None:
    whole, error = frame(make(), [body])
    assert error is None
    assert len(whole) > 1
    assert frame(make(), [body[index : index + 1] for index in range(len(body))]) == (whole, None)


@settings(max_examples=60, deadline=None)
@given(
    body=st.sampled_from(BODIES), positions=st.lists(st.integers(min_value=0, max_value=20000), max_size=8)
)
def test_reads_cut_anywhere_give_the_payloads_of_one_read(
    body: tuple[str, Framer, bytes], positions: list[int]
) -> None:
    _, make, data = body
    assert frame(make(), cut(data, positions)) == frame(make(), [data])


@pytest.mark.parametrize(("name", "make", "body"), BODIES[:-1], ids=[name for name, _, _ in BODIES[:-1]])
def test_each_payload_is_json_at_its_offset_in_the_body(name: str, make: Framer, body: bytes) -> None:
    """The offset of a payload is where its bytes start in the stream (one-line SSE data, a line, an
    array element), so that an error inside it can name the byte."""
    payloads, _ = frame(make(), [body])
    for payload in payloads:
        assert body[payload.offset : payload.offset + len(payload.data)] == payload.data
        assert isinstance(json.loads(payload.data), dict)


def test_eventstream_payloads_are_the_events_inside_the_wrapper() -> None:
    payloads, _ = frame(EventStreamFramer(), [EVENTSTREAM_BODY.read_bytes()])
    decoded = FIXTURES / "anthropic" / "fantasy_bedrock_claude-sonnet-4-5_tool_use_only.decoded.jsonl"
    expected = [json.loads(line) for line in decoded.read_text().splitlines() if line.strip()]
    assert [json.loads(payload.data) for payload in payloads] == expected


def test_sse_multi_line_data_is_joined_and_starts_at_its_first_value() -> None:
    body = b': hi\n\nevent: x\ndata: {"a":\ndata: 1}\n\n'
    assert frame(SSEFramer(), [body]) == ([Payload(b'{"a":\n1}', body.index(b'{"a"'))], None)


def test_an_sse_error_event_raises_after_the_payloads_before() -> None:
    body = b'data: {"a": 1}\n\nevent: error\ndata: {"error": {"message": "boom", "code": "x"}}\n\n'
    payloads, error = frame(SSEFramer(), [body])
    assert payloads == [Payload(b'{"a": 1}', 6)]
    assert error == "ProviderError: event 1: provider error (x): boom"
    with pytest.raises(ProviderError):
        SSEFramer().feed(b"event: error\ndata: upstream died\n\n")


def test_an_sse_event_over_the_cap_names_its_byte() -> None:
    with pytest.raises(StreamDecodeError, match=r"starting at byte 13 is larger than max_event_size=20"):
        SSEFramer(max_event_size=20).feed(b"data: small\n\ndata: " + b"x" * 30 + b"\n\n")


def test_json_lines_skip_blank_lines_and_done_and_name_a_line_over_the_cap() -> None:
    assert frame(JSONLinesFramer(), [b'\n  {"a": 1}  \r\n[DONE]\n{"b": 2}']) == (
        [Payload(b'{"a": 1}', 3), Payload(b'{"b": 2}', 22)],
        None,
    )
    payloads, error = frame(JSONLinesFramer(max_line_size=10), [b'{"a": 1}\n{"b": 22222222}\n'])
    assert payloads == [Payload(b'{"a": 1}', 0)]
    assert error == "StreamDecodeError: JSON line starting at byte 9 is larger than max_line_size=10 bytes"


def test_a_json_array_element_that_is_not_an_object_names_its_byte() -> None:
    payloads, error = frame(JSONArrayFramer(), [b'[{"a": 1}, 2]'])
    assert payloads == [Payload(b'{"a": 1}', 1)]
    assert error == "StreamDecodeError: expected a JSON object at byte 11 of the JSON stream, got b'2]'"


def test_an_eventstream_body_cut_off_names_its_frame_and_byte() -> None:
    body = EVENTSTREAM_BODY.read_bytes()
    payloads, error = frame(EventStreamFramer(), [body[:-3]])
    assert payloads
    assert error is not None
    assert "ends inside frame" in error
    assert "at byte" in error


@pytest.mark.parametrize(("name", "make", "body"), BODIES, ids=[name for name, _, _ in BODIES])
@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_bytearray_and_memoryview_reads_give_the_payloads_of_bytes(
    name: str, make: Framer, body: bytes, kind: Callable[[bytes], Any]
) -> None:
    reads = cut(body, [7, 100, 101, len(body) // 2])
    expected = frame(make(), reads)
    assert expected[1] is None
    assert frame(make(), [kind(read) for read in reads]) == expected
    assert frame(make(), [kind(body)]) == frame(make(), [body])


@pytest.mark.parametrize(
    "make",
    [
        SSEFramer,
        SSEDecoder,
        SSEPayloadDecoder,
        JSONLinesFramer,
        JSONLinesDecoder,
        JSONArrayFramer,
        EventStreamFramer,
    ],
)
@pytest.mark.parametrize("read", ["data: {}\n\n", 7, None])
def test_a_read_that_is_not_bytes_raises_a_type_error_naming_the_framer(make: Framer, read: object) -> None:
    framer = make()
    with pytest.raises(TypeError) as caught:
        framer.feed(read)
    message = str(caught.value)
    assert message.startswith(
        (
            "SSEFramer reads",
            "SSEDecoder reads",
            "JSONLinesFramer reads",
            "JSONArrayFramer reads",
            "EventStreamFramer reads",
        )
    )
    assert message.endswith(f"a bytearray or a memoryview, not {type(read).__name__}")


def test_an_eventstream_read_that_is_not_bytes_after_a_partial_frame_names_the_framer() -> None:
    framer = EventStreamFramer()
    body = EVENTSTREAM_BODY.read_bytes()
    assert framer.feed(body[:5]) == []
    with pytest.raises(TypeError, match=r"^EventStreamFramer reads .* not str$"):
        framer.feed("more")  # type: ignore[arg-type]
    payloads, error = frame(framer, [body[5:]])
    assert (payloads, error) == frame(EventStreamFramer(), [body])
