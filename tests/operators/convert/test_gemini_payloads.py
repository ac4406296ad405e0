"""The Gemini converter gives the same chunks whether it decodes each event's bytes or is fed the dicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from operators.convert.gemini import GeminiConverter
from pipeline.errors import ConverterError, ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse, Payload
from tests.conftest import TESTS
from tests.converter_cases import sequential_ids
from tests.reference import read_payloads

FIXTURES = TESTS / "fixtures" / "gemini"
RECORDINGS = sorted(path for path in FIXTURES.iterdir() if path.suffix in {".sse", ".jsonl"})


def event_payloads(path: Path) -> list[Payload]:
    """Each recorded event's bytes and their offset: the ``data`` of an SSE event (every recorded event has
    one ``data`` line), or one JSON line."""
    payloads = []
    offset = 0
    for line in path.read_bytes().splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        data = line.rstrip(b"\r\n")
        if path.suffix == ".sse":
            if not data.startswith(b"data:"):
                continue
            prefix = 6 if data.startswith(b"data: ") else 5
            start, data = start + prefix, data[prefix:]
        if data.strip() and data.strip() != b"[DONE]":
            payloads.append(Payload(data, start))
    return payloads


def convert(items: list[Any]) -> list[ChunkResponse]:
    converter = GeminiConverter(id_factory=sequential_ids)
    chunks = [chunk for item in items for chunk in converter.feed(item)]
    return chunks + converter.finish()


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda path: path.name)
def test_feeding_the_event_bytes_gives_what_feeding_the_dicts_gives(path: Path) -> None:
    payloads = event_payloads(path)
    dicts = [event for _, event in read_payloads(path)]
    assert [json.loads(payload.data) for payload in payloads] == dicts
    assert convert(payloads) == convert(dicts)


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}',
        b'{"event_type": "error", "error": {"code": 429, "message": "quota"}}',
    ],
)
def test_an_in_band_error_in_the_bytes_raises_what_the_dict_raises(body: bytes) -> None:
    first = (
        b'{"event_type": "interaction.created", "interaction": {"id": "i"}}'
        if b"event_type" in body
        else b'{"candidates": [{"content": {"parts": [{"text": "a"}]}}]}'
    )
    raised = []
    for items in ([Payload(first, 0), Payload(body, 90)], [json.loads(first), json.loads(body)]):
        converter = GeminiConverter()
        converter.feed(items[0])
        with pytest.raises(ProviderError) as caught:
            converter.feed(items[1])
        raised.append(caught.value)
    assert [str(error) for error in raised] == [str(raised[1])] * 2
    assert raised[0].payload == raised[1].payload == json.loads(body)
    assert str(raised[0]).startswith("event 1: provider error")


def test_an_error_element_of_a_json_array_body_is_a_provider_error() -> None:
    body = b'[{"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}]'
    element = body[1:-1]
    with pytest.raises(ProviderError) as caught:
        GeminiConverter().feed(Payload(element, 1))
    assert str(caught.value) == "event 0: provider error (INVALID_ARGUMENT): API key not valid"
    assert caught.value.status == 400


def test_bytes_that_are_not_json_name_their_offset() -> None:
    converter = GeminiConverter()
    converter.feed(Payload(b'{"candidates": []}', 0))
    with pytest.raises(StreamDecodeError) as caught:
        converter.feed(Payload(b'{"candidates": [', 40))
    assert caught.value.offset == 40
    assert str(caught.value).startswith("event 1 (at byte 40) is ")


def test_the_first_event_decides_the_api_from_its_bytes() -> None:
    converter = GeminiConverter()
    text = b'{"event_type": "step.delta", "index": 0, "delta": {"type": "text", "text": "hi"}}'
    assert converter.feed(Payload(text, 0)) == [ChunkResponse(content="hi")]
    with pytest.raises(ConverterError, match="field 'candidates'"):
        GeminiConverter().feed(Payload(b'{"candidates": {}}', 0))


@pytest.mark.parametrize(
    "part",
    [
        b'{"videoMetadata": {"fps": 2}}',
        b'{"functionResponse": {"name": "f", "response": {}}}',
        b'{"brandNewKind": {"x": [1, 2]}, "text": "kept"}',
    ],
)
def test_unknown_fields_and_part_kinds_are_harmless(part: bytes) -> None:
    body = b'{"candidates": [{"content": {"parts": [' + part + b']}, "future": 1}], "novel": {"a": 1}}'
    chunks = GeminiConverter().feed(Payload(body, 0))
    assert chunks == ([ChunkResponse(content="kept")] if b"kept" in part else [])


def test_a_failing_event_leaves_nothing_behind_for_the_next() -> None:
    converter = GeminiConverter(id_factory=sequential_ids)
    text = b'{"text": "lost"}'
    stray = b'{"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}]}}'
    body = b'{"candidates": [{"content": {"parts": [' + text + b", " + stray + b"]}}]}"
    with pytest.raises(ConverterError, match="no streamed call is open"):
        converter.feed(Payload(body, 0))
    assert converter.feed({"candidates": [{"content": {"parts": [{"text": "next"}]}}]}) == [
        ChunkResponse(content="next")
    ]
