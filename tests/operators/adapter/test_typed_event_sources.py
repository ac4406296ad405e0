"""The typed converters (Anthropic Messages, OpenAI Responses) read a framed event's bytes and its decoded
dict alike: every recorded stream gives the same chunks, and the same error, whichever each event is."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.convert.anthropic import AnthropicConverter
from operators.convert.openai_responses import OpenAIResponsesConverter
from pipeline.errors import ConverterError, ProviderError, StreamfoldError
from pipeline.models import ChunkResponse, Payload
from pipeline.stage import Core
from tests.conftest import TESTS
from tests.converter_cases import sequential_ids

FIXTURES = TESTS / "fixtures"
RECORDINGS = sorted(
    path
    for folder in ("anthropic", "openai_responses")
    for path in (FIXTURES / folder).iterdir()
    if path.suffix in {".sse", ".jsonl", ".bin"}
)


def sse_payloads(body: bytes) -> Iterator[Payload]:
    """Each ``data:`` line's value with its offset (every recorded event has one data line)."""
    offset = 0
    for line in body.splitlines(keepends=True):
        if line.startswith(b"data:"):
            start = 6 if line.startswith(b"data: ") else 5
            data = line[start:].rstrip(b"\r\n")
            if data.strip() != b"[DONE]":  # the framer's sentinel, never a converter's event
                yield Payload(data, offset + start)
        offset += len(line)


def jsonl_payloads(body: bytes) -> Iterator[Payload]:
    offset = 0
    for line in body.splitlines(keepends=True):
        if line.strip():
            yield Payload(line.rstrip(b"\r\n"), offset)
        offset += len(line)


def eventstream_payloads(body: bytes) -> Iterator[Payload]:
    """The model event inside each AWS event-stream frame (``{"bytes": base64(event)}``)."""
    offset = 0
    while offset < len(body):
        total, headers = struct.unpack_from(">II", body, offset)
        frame_payload = body[offset + 12 + headers : offset + total - 4]
        yield Payload(base64.b64decode(json.loads(frame_payload)["bytes"]), offset)
        offset += total


def payloads(path: Path) -> list[Payload]:
    body = path.read_bytes()
    readers = {".sse": sse_payloads, ".jsonl": jsonl_payloads, ".bin": eventstream_payloads}
    return list(readers[path.suffix](body))


def converter_for(path: Path) -> Core[Any, ChunkResponse]:
    if path.parent.name == "anthropic":
        return AnthropicConverter(id_factory=sequential_ids)
    return OpenAIResponsesConverter(id_factory=sequential_ids)


def run(path: Path, items: list[Any]) -> tuple[list[ChunkResponse], tuple[Any, ...] | None]:
    """The chunks of ``items``, and what the converter raised (class, message, payload) if it did."""
    converter = converter_for(path)
    chunks: list[ChunkResponse] = []
    try:
        for item in items:
            chunks += converter.feed(item)
        chunks += converter.finish()
    except StreamfoldError as error:
        return chunks, (type(error), str(error), getattr(error, "payload", None))
    return chunks, None


RECORDED = {path: payloads(path) for path in RECORDINGS}


def by_name(path: Path) -> str:
    return path.name


def test_every_recording_has_events() -> None:
    assert len(RECORDINGS) >= 60
    assert all(RECORDED[path] for path in RECORDINGS)


@pytest.mark.parametrize("path", RECORDINGS, ids=by_name)
def test_bytes_and_dicts_give_the_same_chunks(path: Path) -> None:
    framed = RECORDED[path]
    decoded = [json.loads(payload.data) for payload in framed]
    from_bytes = run(path, framed)
    assert from_bytes == run(path, decoded)
    assert from_bytes[0]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_mix_of_bytes_and_dicts_gives_the_same_chunks(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(RECORDINGS), label="recording")
    framed = RECORDED[path]
    as_bytes = data.draw(st.lists(st.booleans(), min_size=len(framed), max_size=len(framed)))
    mixed = [
        payload if framed_one else json.loads(payload.data)
        for payload, framed_one in zip(framed, as_bytes, strict=True)
    ]
    assert run(path, mixed) == run(path, framed)


IN_BAND_ERRORS = [
    ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ("anthropic", {"error": {"type": "api_error", "message": "upstream down"}}),
    ("openai_responses", {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down."}),
    (
        "openai_responses",
        {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "crashed"}}},
    ),
]


@pytest.mark.parametrize(("folder", "event"), IN_BAND_ERRORS)
def test_an_in_band_error_raises_the_same_from_bytes_and_dict(folder: str, event: dict[str, Any]) -> None:
    path = FIXTURES / folder / "x"
    framed = Payload(json.dumps(event).encode(), 40)
    outcome = run(path, [framed])
    assert outcome == run(path, [event])
    assert outcome[1] is not None
    assert outcome[1][0] is ProviderError
    assert outcome[1][2] == event


@pytest.mark.parametrize(
    ("folder", "event", "message"),
    [
        (
            "anthropic",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
            "event 0 (content_block_delta): field 'delta.text': Expected `str`, got `int`",
        ),
        (
            "openai_responses",
            {"type": "response.output_text.delta", "output_index": "0", "delta": "x"},
            "event 0 (response.output_text.delta): field 'output_index': Expected `int | null`, got `str`",
        ),
        (
            "openai_responses",
            {"type": "response.output_text.delta", "output_index": 0},
            "event 0 (response.output_text.delta): field 'delta' should be a string, got nothing",
        ),
    ],
)
def test_a_schema_error_names_event_type_and_field_from_bytes_and_dict(
    folder: str, event: dict[str, Any], message: str
) -> None:
    path = FIXTURES / folder / "x"
    outcome = run(path, [Payload(json.dumps(event).encode(), 0)])
    assert outcome == run(path, [event])
    assert outcome[1] == (ConverterError, message, None)


@pytest.mark.parametrize("folder", ["anthropic", "openai_responses"])
def test_unknown_event_types_and_fields_give_nothing(folder: str) -> None:
    unknown = [
        {"type": "something_new", "index": "not an int either", "delta": [1, 2]},
        {"type": "response.shell_call_output_content.delta", "output_index": 0, "delta": {"stdout": "x"}},
        {"type": "ping", "extra": {"nested": True}},
    ]
    path = FIXTURES / folder / "x"
    if folder == "anthropic":
        unknown = unknown[1:]
    framed = [Payload(json.dumps(event).encode(), 0) for event in unknown]
    assert run(path, framed) == run(path, unknown) == ([], None)
