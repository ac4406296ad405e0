"""The SSE / JSON Lines decoders and the event parser: exact events, any chunking, errors with offsets."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import pytest
from aiostream import streamcontext
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import (
    EventParser,
    JSONLinesDecoder,
    ServerSentEvent,
    SSEDecoder,
    decode_jsonl,
    decode_sse,
    parse_events,
    sse_events,
)
from operators.adapter.payloads import raise_for_provider_error
from operators.adapter.sources import from_bytes
from pipeline.errors import ProviderError, StreamDecodeError
from tests.conftest import FIXTURES

SSE_FILES = sorted(FIXTURES.glob("*/*.sse"))
JSONL_FILES = sorted(path for path in FIXTURES.glob("*/*.jsonl"))


def decode_all(decoder: SSEDecoder, chunks: list[bytes]) -> list[ServerSentEvent]:
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.finish())
    return events


def sse(data: bytes) -> list[ServerSentEvent]:
    return decode_all(SSEDecoder(), [data])


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    bounds = [0, *sorted({min(max(p, 0), len(data)) for p in positions}), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


def reference_events(data: bytes) -> list[ServerSentEvent]:
    """An independent, whole-text reading of the same rules (for recorded fixtures: LF or CRLF only)."""
    text = data.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    events = []
    last_id = None
    for block in text.split("\n\n"):
        event, data_lines, retry = None, [], None
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data_lines.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                last_id = value
            elif name == "retry" and value.isdigit():
                retry = int(value)
        if data_lines:
            events.append(ServerSentEvent(event=event, data="\n".join(data_lines), id=last_id, retry=retry))
    return events


class TestSSEDecoderRules:
    def test_fields_comments_and_dispatch(self) -> None:
        stream = (
            b": a comment\n"
            b"event: message_start\n"
            b'data: {"a": 1}\n'
            b"\n"
            b"data:no space\n"
            b"data:  two spaces\n"
            b"unknown: ignored\n"
            b"\n"
        )
        assert sse(stream) == [
            ServerSentEvent(event="message_start", data='{"a": 1}'),
            ServerSentEvent(data="no space\n two spaces"),
        ]

    def test_line_endings_cr_lf_crlf_mixed(self) -> None:
        assert sse(b"data: a\rdata: b\r\ndata: c\n\r\n") == [ServerSentEvent(data="a\nb\nc")]

    def test_field_without_colon_is_an_empty_value(self) -> None:
        assert sse(b"data\ndata\n\n") == [ServerSentEvent(data="\n")]
        assert sse(b"data\n\n") == [ServerSentEvent(data="")]

    def test_event_without_data_is_not_dispatched(self) -> None:
        assert sse(b"event: ping\n\nid: 1\n\n") == []

    def test_id_persists_and_retry_is_per_event(self) -> None:
        stream = b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\nretry: x\ndata: c\n\n"
        assert sse(stream) == [
            ServerSentEvent(data="a", id="7", retry=1500),
            ServerSentEvent(data="b", id="7"),
            ServerSentEvent(data="c", id=""),
        ]

    def test_id_with_null_is_ignored(self) -> None:
        assert sse(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")[1] == ServerSentEvent(data="b", id="1")

    def test_bom_at_start_only(self) -> None:
        assert sse(b"\xef\xbb\xbfdata: a\n\n") == [ServerSentEvent(data="a")]
        # A BOM later in the stream is ordinary text (here: part of a field name, so the field is unknown).
        assert sse(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [ServerSentEvent(data="a")]

    @pytest.mark.parametrize("split", [1, 2])
    def test_bom_split_across_chunks(self, split: int) -> None:
        stream = b"\xef\xbb\xbfdata: a\n\n"
        assert decode_all(SSEDecoder(), [stream[:split], stream[split:]]) == [ServerSentEvent(data="a")]

    def test_last_event_without_blank_line_is_dispatched_at_finish(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: 1\n\ndata: 2") == [ServerSentEvent(data="1")]
        assert decoder.finish() == [ServerSentEvent(data="2")]

    def test_crlf_split_between_chunks_is_one_line_ending(self) -> None:
        events = decode_all(SSEDecoder(), [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
        assert events == [ServerSentEvent(data="a\nb")]

    def test_cr_at_chunk_end_then_other_text(self) -> None:
        assert decode_all(SSEDecoder(), [b"data: a\r", b"\r", b"data: b\r", b"\r"]) == [
            ServerSentEvent(data="a"),
            ServerSentEvent(data="b"),
        ]

    @pytest.mark.parametrize("text", ["é", "€", "𝄞", "日本語"])
    def test_utf8_split_inside_multibyte_characters(self, text: str) -> None:
        stream = f"data: {text}\n\n".encode()
        for position in range(len(stream) + 1):
            assert decode_all(SSEDecoder(), cut(stream, [position])) == [ServerSentEvent(data=text)]
        byte_by_byte = [stream[i : i + 1] for i in range(len(stream))]
        assert decode_all(SSEDecoder(), byte_by_byte) == [ServerSentEvent(data=text)]


class TestSSEDecoderErrors:
    def test_invalid_utf8_names_the_byte_offset(self) -> None:
        with pytest.raises(StreamDecodeError, match="byte 16") as caught:
            decode_all(SSEDecoder(), [b"data: ok\n\ndata", b": \xff\n\n"])
        assert caught.value.offset == 16

    def test_truncated_utf8_at_end_is_an_error(self) -> None:
        with pytest.raises(StreamDecodeError) as caught:
            decode_all(SSEDecoder(), [b"data: \xe2\x82"])
        assert caught.value.offset == 6

    def test_events_before_the_bad_bytes_are_returned(self) -> None:
        decoder = SSEDecoder()
        assert decoder.feed(b"data: 1\n\n") == [ServerSentEvent(data="1")]
        with pytest.raises(StreamDecodeError):
            decoder.feed(b"data: \xc3\x28\n")

    def test_max_event_size_caps_the_event(self) -> None:
        decoder = SSEDecoder(max_event_size=20)
        assert decoder.feed(b"data: 0123456789\n\n") == [ServerSentEvent(data="0123456789")]
        with pytest.raises(StreamDecodeError, match="starting at byte 18") as caught:
            decoder.feed(b"data: 0123456789\ndata: 0123456789\n")
        assert caught.value.offset == 18

    def test_max_event_size_caps_a_line_that_never_ends(self) -> None:
        decoder = SSEDecoder(max_event_size=100)
        decoder.feed(b"data: " + b"x" * 50)
        with pytest.raises(StreamDecodeError, match="max_event_size=100"):
            decoder.feed(b"x" * 60)

    def test_comments_do_not_count_toward_the_cap(self) -> None:
        decoder = SSEDecoder(max_event_size=30)
        events = decode_all(decoder, [b": keep-alive padding padding\n" * 10 + b"data: x\n\n"])
        assert events == [ServerSentEvent(data="x")]


class TestSSEDecoderOnFixtures:
    @pytest.mark.parametrize("path", SSE_FILES, ids=lambda path: path.name)
    def test_one_piece_matches_an_independent_reading(self, path: Path) -> None:
        data = path.read_bytes()
        events = sse(data)
        assert events == reference_events(data)
        assert events

    @pytest.mark.parametrize("path", SSE_FILES[::4], ids=lambda path: path.name)
    def test_every_split_position_gives_the_same_events(self, path: Path) -> None:
        data = path.read_bytes()[:6000]
        expected = sse(data)
        for position in range(len(data) + 1):
            assert decode_all(SSEDecoder(), cut(data, [position])) == expected, position

    @settings(max_examples=60, deadline=None)
    @given(
        path=st.sampled_from(SSE_FILES),
        positions=st.lists(st.integers(min_value=0, max_value=80_000), max_size=40),
        crlf=st.booleans(),
    )
    def test_any_rechunking_gives_the_same_events(self, path: Path, positions: list[int], crlf: bool) -> None:
        data = path.read_bytes()
        if crlf:
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        assert decode_all(SSEDecoder(), cut(data, positions)) == sse(data)


class TestJSONLinesDecoder:
    def test_one_value_per_non_blank_line(self) -> None:
        decoder = JSONLinesDecoder()
        values = (
            decoder.feed(b'{"a": 1}\r\n\n  \n[1, 2]\n"s"\r{"b"') + decoder.feed(b": 2}") + decoder.finish()
        )
        assert values == [{"a": 1}, [1, 2], "s", {"b": 2}]

    def test_done_line_is_skipped(self) -> None:
        assert JSONLinesDecoder().feed(b'{"a": 1}\n[DONE]\n') == [{"a": 1}]

    def test_invalid_json_names_line_and_offset(self) -> None:
        decoder = JSONLinesDecoder()
        with pytest.raises(StreamDecodeError, match=r"line 1 \(byte 9\)") as caught:
            decoder.feed(b'{"a": 1}\n{"b": \n')
        assert caught.value.offset == 9

    def test_objects_only(self) -> None:
        with pytest.raises(StreamDecodeError, match=r"line 0 .* not an object"):
            JSONLinesDecoder(objects_only=True).feed(b"[1]\n")

    def test_in_band_error_object_raises(self) -> None:
        decoder = JSONLinesDecoder()
        with pytest.raises(ProviderError, match="line 1"):
            decoder.feed(
                b'{"a": 1}\n{"type": "error", "error": {"type": "overloaded_error", "message": "x"}}\n'
            )
        assert JSONLinesDecoder(check_errors=False).feed(b'{"error": {"message": "x"}}\n') == [
            {"error": {"message": "x"}}
        ]

    def test_max_line_size(self) -> None:
        decoder = JSONLinesDecoder(max_line_size=10)
        with pytest.raises(StreamDecodeError, match="max_line_size=10"):
            decoder.feed(b'{"a": "0123456789"')

    @settings(max_examples=40, deadline=None)
    @given(path=st.sampled_from(JSONL_FILES), positions=st.lists(st.integers(0, 80_000), max_size=30))
    def test_any_rechunking_gives_every_line(self, path: Path, positions: list[int]) -> None:
        data = path.read_bytes()
        decoder = JSONLinesDecoder(check_errors=False)
        values: list[Any] = []
        for chunk in cut(data, positions):
            values.extend(decoder.feed(chunk))
        values.extend(decoder.finish())
        assert values == [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def parse(*events: ServerSentEvent) -> list[dict[str, Any]]:
    parser = EventParser()
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(parser.feed(event))
    out.extend(parser.finish())
    return out


class TestEventParser:
    def test_json_data_and_done(self) -> None:
        assert parse(ServerSentEvent(data='{"a": [1]}'), ServerSentEvent(data="[DONE]")) == [{"a": [1]}]

    def test_invalid_json_names_the_event_number_and_an_excerpt(self) -> None:
        with pytest.raises(StreamDecodeError, match=r"event 1 .*not valid JSON.*'\{\"a\": '") as caught:
            parse(ServerSentEvent(data="{}"), ServerSentEvent(data='{"a": '))
        assert caught.value.offset == 1

    def test_non_object_data(self) -> None:
        with pytest.raises(StreamDecodeError, match=r"event 0 .*not a JSON object"):
            parse(ServerSentEvent(data="[1, 2]"))

    def test_sse_error_event(self) -> None:
        data = '{"error": {"message": "Tool choice is required", "type": "invalid_request_error", '
        data += '"code": "tool_use_failed", "status_code": 400}}'
        with pytest.raises(ProviderError) as caught:
            parse(ServerSentEvent(data="{}"), ServerSentEvent(event="error", data=data))
        error = caught.value
        assert str(error) == "event 1: provider error (tool_use_failed): Tool choice is required"
        assert (error.kind, error.status, error.payload) == ("tool_use_failed", 400, json.loads(data))

    def test_sse_error_event_with_plain_text(self) -> None:
        with pytest.raises(ProviderError, match="event 0: provider error: upstream died"):
            parse(ServerSentEvent(event="error", data="upstream died"))

    def test_anthropic_error(self) -> None:
        payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        with pytest.raises(ProviderError, match="Overloaded") as caught:
            parse(ServerSentEvent(event="error", data=json.dumps(payload)))
        assert caught.value.kind == "overloaded_error"
        with pytest.raises(ProviderError, match="Overloaded"):
            parse(ServerSentEvent(data=json.dumps(payload)))

    def test_responses_error(self) -> None:
        payload = {"type": "error", "code": "ERR_SOMETHING", "message": "Something went wrong", "param": None}
        with pytest.raises(ProviderError, match="Something went wrong") as caught:
            parse(ServerSentEvent(event="error", data=json.dumps(payload)))
        assert caught.value.kind == "ERR_SOMETHING"

    def test_gemini_error(self) -> None:
        payload = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
        with pytest.raises(ProviderError, match="Quota exceeded") as caught:
            parse(ServerSentEvent(data=json.dumps(payload)))
        assert (caught.value.kind, caught.value.status) == ("RESOURCE_EXHAUSTED", 429)

    def test_error_key_that_is_not_an_error(self) -> None:
        raise_for_provider_error({"choices": [], "error": {"message": "x"}})
        raise_for_provider_error({"error": None, "id": "x"})
        raise_for_provider_error({"type": "response.failed", "error": {"message": "handled by converter"}})


class TestGroqErrorFixtures:
    @pytest.mark.parametrize(
        ("name", "message"),
        [
            ("pydantic-ai_groq_gpt-oss-120b_reasoning_text_then_error_event.sse", "Tool choice is required"),
            (
                "pydantic-ai_groq_gpt-oss-120b_reasoning_then_midstream_error_event.sse",
                "Tool call validation",
            ),
        ],
    )
    def test_events_before_the_error_then_provider_error(self, name: str, message: str) -> None:
        data = (FIXTURES / "openai_compatible" / name).read_bytes()
        events = sse(data)
        parser = EventParser()
        received: list[dict[str, Any]] = []

        def feed_all() -> None:
            for event in events:
                received.extend(parser.feed(event))

        with pytest.raises(ProviderError, match=message) as caught:
            feed_all()
        assert len(received) == len(events) - 1
        assert all("choices" in payload for payload in received)
        assert caught.value.kind == "tool_use_failed"
        assert caught.value.status == 400


async def collect(source: AsyncIterable[Any], into: list[Any] | None = None) -> list[Any]:
    items = [] if into is None else into
    async with streamcontext(source) as iterator:
        async for item in iterator:
            items.append(item)
    return items


class TestOperators:
    @pytest.mark.anyio
    async def test_decode_and_parse_pipe(self) -> None:
        data = b'data: {"a": 1}\n\n: c\ndata: [DONE]\n\n'
        events = await collect(from_bytes(data, chunk_size=3) | decode_sse.pipe())
        assert events == [ServerSentEvent(data='{"a": 1}'), ServerSentEvent(data="[DONE]")]
        payloads = await collect(from_bytes(data, chunk_size=3) | decode_sse.pipe() | parse_events.pipe())
        assert payloads == [{"a": 1}]
        assert await collect(from_bytes(data, chunk_size=5) | sse_events.pipe()) == [{"a": 1}]

    @pytest.mark.anyio
    async def test_nothing_before_an_error_in_the_same_chunk_is_lost(self) -> None:
        data = b'data: {"a": 1}\n\nevent: error\ndata: {"error": {"message": "boom"}}\n\n'
        received: list[dict[str, Any]] = []
        with pytest.raises(ProviderError, match="boom"):
            await collect(from_bytes(data) | sse_events.pipe(), received)
        assert received == [{"a": 1}]
        events: list[ServerSentEvent] = []
        with pytest.raises(StreamDecodeError, match="byte 15"):
            await collect(from_bytes(b"data: 1\n\ndata: \xff\n\n") | decode_sse.pipe(), events)
        assert events == [ServerSentEvent(data="1")]
        values: list[Any] = []
        with pytest.raises(StreamDecodeError, match="line 1"):
            await collect(from_bytes(b'{"a": 1}\n{\n') | decode_jsonl.pipe(), values)
        assert values == [{"a": 1}]

    @pytest.mark.anyio
    async def test_decode_jsonl(self) -> None:
        assert await collect(from_bytes(b'{"a": 1}\n{"b": 2}', chunk_size=4) | decode_jsonl.pipe()) == [
            {"a": 1},
            {"b": 2},
        ]

    @pytest.mark.anyio
    async def test_sse_events_raises_after_what_came_before(self) -> None:
        data = b'data: {"a": 1}\n\nevent: error\ndata: {"error": {"message": "boom"}}\n\n'
        received: list[dict[str, Any]] = []
        with pytest.raises(ProviderError, match="boom"):
            await collect(from_bytes(data, chunk_size=7) | sse_events.pipe(), received)
        assert received == [{"a": 1}]
