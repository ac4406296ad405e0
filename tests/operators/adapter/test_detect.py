"""Wire-format and framing detection, on every recorded fixture file (the folder names the answer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from operators.adapter import EventParser, JSONLinesDecoder, SSEDecoder
from operators.adapter.detect import detect_framing, detect_wire_format, sniff_framing
from operators.adapter.eventstream import EventStreamFramer
from pipeline.errors import ConfigurationError
from tests.conftest import FIXTURES

FOLDER_FORMATS = {
    "anthropic": "anthropic",
    "cohere": "cohere",
    "gemini": "gemini",
    "ollama": "ollama",
    "openai_chat": "openai",
    "openai_compatible": "openai",
    "openai_responses": "openai-responses",
    "bedrock_converse": "bedrock-converse",
}
INTERACTIONS_API = "vercel_gemini-2.5-flash_interactions_api_tool_call.jsonl"
STREAM_FILES = sorted(
    path
    for path in FIXTURES.glob("*/*")
    if path.parent.name in FOLDER_FORMATS and path.suffix in (".sse", ".jsonl")
)
OTHER_FILES = sorted(
    path
    for path in FIXTURES.glob("*/*")
    if path.is_file() and path.parent.name != "fixtures" and path not in STREAM_FILES
)


def first_event(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        decoder = JSONLinesDecoder(check_errors=False)
        values: list[dict[str, Any]] = decoder.feed(data) + decoder.finish()
        return values[0]
    parser = EventParser()
    for event in SSEDecoder().feed(data):
        payloads = parser.feed(event)
        if payloads:
            return payloads[0]
    raise AssertionError(f"no event in {path.name}")


@pytest.mark.parametrize("path", STREAM_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_framing_of_every_stream_fixture(path: Path) -> None:
    expected = "jsonl" if path.suffix == ".jsonl" else "sse"
    assert detect_framing(path.read_bytes()[:200]) == expected
    assert detect_framing(path.read_bytes()[:12]) == expected


@pytest.mark.parametrize("path", STREAM_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_wire_format_of_every_stream_fixture(path: Path) -> None:
    """The Interactions API recording is not generateContent, but the Gemini converter reads it too."""
    event = first_event(path)
    if path.name == INTERACTIONS_API:
        assert event["event_type"] == "interaction.created"
        assert "candidates" not in event
    assert detect_wire_format(event) == FOLDER_FORMATS[path.parent.name]


@pytest.mark.parametrize("path", OTHER_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_framing_of_the_other_files(path: Path) -> None:
    """Bedrock's binary frames are ``eventstream`` (from their first 12 bytes); a JSON array (the kimi deltas
    file, a pythonic answer's head, xLAM's bare list of calls) is ``json``; other plain model text is no
    framing."""
    head = path.read_bytes()[:200]
    if path.suffix == ".bin":
        assert detect_framing(head) == detect_framing(head[:12]) == "eventstream"
    elif path.suffix == ".json" or head.startswith(b"["):
        assert detect_framing(head) == "json"  # (a pythonic answer, [f(a=1)], starts as an array does)
    else:
        with pytest.raises(ConfigurationError, match="neither SSE, JSON Lines, a JSON array nor an AWS"):
            detect_framing(head)


def test_other_files_are_the_expected_ones() -> None:
    folders = {path.parent.name for path in OTHER_FILES}
    assert folders == {"anthropic", "bedrock_converse", "raw_model_output", "reasoning"}
    assert [path.suffix for path in OTHER_FILES if path.parent.name == "anthropic"] == [".bin"]
    assert {path.suffix for path in OTHER_FILES if path.parent.name == "bedrock_converse"} == {".bin"}


@pytest.mark.parametrize(
    "path",
    sorted(FIXTURES.glob("bedrock_converse/*.bin")),
    ids=lambda path: path.name,
)
def test_wire_format_of_converse_event_stream_bytes(path: Path) -> None:
    """A ConverseStream frame names its event in a header: the framer's event is boto3's shape."""
    framer = EventStreamFramer()
    payload = framer.feed(path.read_bytes())[0]
    assert detect_wire_format(msgspec.json.decode(payload.data)) == "bedrock-converse"


def test_converse_events_are_one_member_alone() -> None:
    assert detect_wire_format({"contentBlockDelta": {"contentBlockIndex": 0}}) == "bedrock-converse"
    assert detect_wire_format({"throttlingException": {"message": "slow"}}) == "bedrock-converse"
    assert detect_wire_format({"metadata": {}, "candidates": []}) == "gemini"


@pytest.mark.parametrize(
    ("first_bytes", "framing"),
    [
        (b"\xef\xbb\xbfdata: {}\n\n", "sse"),
        (b"\n\r\n: keep-alive\n", "sse"),
        (b"event: message_start\r\n", "sse"),
        (b"id: 1\n", "sse"),
        (b"data\n", "sse"),
        (b'  {"type": "ping"}\n', "jsonl"),
        (b"{", "jsonl"),
        (b"[1, 2]\n", "json"),
        (b'[{"candidates": []},\r\n', "json"),
        (b'{\n  "error": {\n', "json"),
        (b"{ \r\n", "json"),
        (b"\rdata: {}\r\r", "sse"),
        (b"retry\r", "sse"),
    ],
)
def test_framing_edge_cases(first_bytes: bytes, framing: str) -> None:
    assert detect_framing(first_bytes) == framing


@pytest.mark.parametrize(
    "first_bytes",
    [
        b"",
        b" \r\n",
        b"hello: world\n",
        b"database: x\n",
        b"<html>",
        b"dat",
        b"\x00\x00\x00\x10" + b"\x00" * 8,
    ],
)
def test_framing_refusals(first_bytes: bytes) -> None:
    with pytest.raises(ConfigurationError):
        detect_framing(first_bytes)


@pytest.mark.parametrize(
    ("event", "wire_format"),
    [
        ({"choices": [], "usage": {"prompt_tokens": 1}}, "openai"),
        ({"object": "chat.completion.chunk", "id": "x"}, "openai"),
        ({"type": "response.created", "response": {}}, "openai-responses"),
        ({"type": "error", "code": "x", "message": "m", "sequence_number": 3}, "openai-responses"),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "m"}}, "anthropic"),
        ({"type": "ping"}, "anthropic"),
        ({"usageMetadata": {"promptTokenCount": 1}}, "gemini"),
        ({"type": "content-delta", "index": 0}, "cohere"),
        ({"index": 1, "delta": {"type": "arguments_delta"}, "event_type": "step.delta"}, "gemini"),
    ],
)
def test_wire_format_edge_cases(event: dict[str, Any], wire_format: str) -> None:
    assert detect_wire_format(event) == wire_format


def test_unknown_event_names_what_it_saw() -> None:
    with pytest.raises(ConfigurationError, match=r"type 'mystery' and keys: type, x"):
        detect_wire_format({"type": "mystery", "x": 1})


@pytest.mark.parametrize(
    ("start", "probe", "answer"),
    [
        (b"", b"", None),
        (b"\x00\x00\x01", b"", None),
        (b"{", b"{", None),
        (b"{ ", b"{ ", None),
        (b"dat", b"dat", None),
        (b"data", b"data", None),
        (b"event", b"event", None),
        (b"datum", b"datum", "unknown"),
        (b"data:", b"data:", "sse"),
        (b"\r\r\r:", b":", "sse"),
    ],
)
def test_sniffing_tells_when_it_needs_more_bytes(start: bytes, probe: bytes, answer: str | None) -> None:
    assert sniff_framing(start, probe) == answer


def test_auto_detection_reads_a_first_payload_once_and_hands_the_payload_on() -> None:
    """A framer's first :class:`Payload` is decoded generically to tell the wire format; the converter
    chosen gets the payload itself (it decodes it into its own types)."""
    from unittest import mock

    from operators.auto import _LazyConverter
    from pipeline.models import Payload

    received: list[object] = []

    class Recording:
        def feed(self, item: object) -> list[object]:
            received.append(item)
            return []

        def finish(self) -> list[object]:
            return []

    payload = Payload(b'{"type": "message_start", "message": {}}', 6)
    with mock.patch("operators.auto._converter", return_value=Recording()) as make:
        lazy = _LazyConverter("auto", None, 0)
        lazy.feed(payload)
        lazy.feed(payload)
    assert make.call_args.args[0] == "anthropic"
    assert received == [payload, payload]


def test_a_first_payload_that_is_not_json_names_its_byte() -> None:
    from operators.auto import _LazyConverter
    from pipeline.errors import StreamDecodeError
    from pipeline.models import Payload

    with pytest.raises(StreamDecodeError, match=r"^event 0 \(at byte 6\) is not valid JSON") as caught:
        _LazyConverter("auto", None, 0).feed(Payload(b"{oops", 6))
    assert caught.value.offset == 6
