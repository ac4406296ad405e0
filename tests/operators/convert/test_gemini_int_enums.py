"""Gemini with integer enums (``$alt=json;enum-encoding=int``, what Google's Go client asks for): every enum
the converter reads is read as its name, by the numbers of googleapis' ``google/ai/generativelanguage/v1beta``
protos, and the enums it skips (safety ratings, token details' modality) are skipped as numbers too."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from operators.convert.gemini import GeminiConverter
from pipeline.compose import process
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolResult
from pipeline.testing import counter_segment_ids, summarize
from tests.conftest import TESTS
from tests.converter_cases import collect, load_events, run_converter, sequential_ids

FIXTURES = TESTS / "fixtures" / "gemini"
GENERATE_CONTENT = sorted(
    path
    for path in FIXTURES.iterdir()
    if path.suffix in {".sse", ".jsonl"} and "event_type" not in load_events(path)[0]
)

# Candidate.FinishReason and PromptFeedback.BlockReason in generative_service.proto; the rest skipped.
FINISH_NUMBERS = {
    "STOP": 1,
    "MAX_TOKENS": 2,
    "SAFETY": 3,
    "RECITATION": 4,
    "OTHER": 5,
    "MALFORMED_FUNCTION_CALL": 10,
}
BLOCK_NUMBERS = {"SAFETY": 1, "OTHER": 2, "BLOCKLIST": 3, "PROHIBITED_CONTENT": 4, "IMAGE_SAFETY": 5}
SKIPPED_ENUMS = ("category", "probability", "severity", "modality", "urlRetrievalStatus", "trafficType")


def convert(events: Iterable[Any]) -> list[ChunkResponse]:
    return run_converter(GeminiConverter(id_factory=sequential_ids), events)


def as_bytes(events: Iterable[Any]) -> list[Payload]:
    return [Payload(json.dumps(event).encode(), 0) for event in events]


LAST_CHUNK = {
    "candidates": [
        {
            "content": {"parts": [{"text": " world."}], "role": "model"},
            "finishReason": 1,
            "index": 0,
            "safetyRatings": [{"category": 8, "probability": 1}, {"category": 10, "probability": 2}],
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 5,
        "candidatesTokenCount": 3,
        "totalTokenCount": 8,
        "promptTokensDetails": [{"modality": 1, "tokenCount": 5}],
        "candidatesTokensDetails": [{"modality": 1, "tokenCount": 3}],
    },
    "modelVersion": "gemini-2.5-flash",
}


@pytest.mark.parametrize("read", [list, as_bytes])
def test_the_last_chunk_with_a_numbered_finish_reason_keeps_its_text(read: Any) -> None:
    first = {"candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"}, "index": 0}]}
    assert convert(read([first, LAST_CHUNK])) == [
        ChunkResponse(content="Hello"),
        ChunkResponse(
            content=" world.",
            finish_reason="stop",
            is_complete=True,
            usage=TokenUsage(prompt_tokens=5, completion_tokens=3, total_tokens=8),
            metadata={"stop_reason": "STOP", "model": "gemini-2.5-flash"},
        ),
    ]


async def body(*chunks: dict[str, Any]) -> AsyncIterator[bytes]:
    yield b"".join(b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n" for chunk in chunks)


@pytest.mark.anyio
async def test_through_process_with_auto_detection() -> None:
    summary = summarize(await collect(process(body(LAST_CHUNK), segment_ids=counter_segment_ids())))
    assert (summary.text, summary.finish_reason) == (" world.", "stop")


@pytest.mark.parametrize(
    ("number", "name", "finish_reason"),
    [
        (1, "STOP", "stop"),
        (2, "MAX_TOKENS", "length"),
        (3, "SAFETY", "content_filter"),
        (4, "RECITATION", "content_filter"),
        (5, "OTHER", "other"),
        (6, "LANGUAGE", "language"),
        (7, "BLOCKLIST", "content_filter"),
        (8, "PROHIBITED_CONTENT", "content_filter"),
        (9, "SPII", "content_filter"),
        (10, "MALFORMED_FUNCTION_CALL", "malformed_function_call"),
        (11, "IMAGE_SAFETY", "content_filter"),
        (12, "UNEXPECTED_TOOL_CALL", "unexpected_tool_call"),
        (13, "TOO_MANY_TOOL_CALLS", "too_many_tool_calls"),
        (14, "IMAGE_PROHIBITED_CONTENT", "image_prohibited_content"),
        (17, "IMAGE_RECITATION", "image_recitation"),
        (0, "FINISH_REASON_UNSPECIFIED", "finish_reason_unspecified"),
        (99, "99", "99"),
    ],
)
def test_every_finish_reason_number_reads_as_its_name(number: int, name: str, finish_reason: str) -> None:
    event = {"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": number}]}
    by_name = {"candidates": [{"content": {"parts": [{"text": "a"}]}, "finishReason": name}]}
    [converted] = convert([event])
    assert (converted.finish_reason, converted.metadata) == (finish_reason, {"stop_reason": name})
    assert convert(as_bytes([event])) == [converted] == convert([by_name])


@pytest.mark.parametrize(("number", "name"), [(1, "SAFETY"), (2, "OTHER"), (5, "IMAGE_SAFETY")])
def test_a_numbered_block_reason_reads_as_its_name(number: int, name: str) -> None:
    event = {"promptFeedback": {"blockReason": number, "safetyRatings": [{"category": 8, "probability": 4}]}}
    assert convert(as_bytes([event])) == [
        ChunkResponse(finish_reason="content_filter", is_complete=True, metadata={"stop_reason": name})
    ]


def test_numbered_code_language_and_outcomes() -> None:
    event = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {"executableCode": {"language": 1, "code": "print(1)"}},
                        {"codeExecutionResult": {"outcome": 1, "output": "1\n"}},
                        {"executableCode": {"language": 1, "code": "1/0"}},
                        {"codeExecutionResult": {"outcome": 3}},
                    ]
                }
            }
        ]
    }
    chunks = convert(as_bytes([event]))
    assert [delta.arguments_delta for chunk in chunks for delta in chunk.tool_calls or []] == [
        '{"language":"PYTHON","code":"print(1)"}',
        '{"language":"PYTHON","code":"1/0"}',
    ]
    assert [result for chunk in chunks for result in chunk.tool_results or []] == [
        ToolResult(
            call_id="gen_0",
            name="code_execution",
            content={"outcome": "OUTCOME_OK", "output": "1\n"},
            result_type="code_execution_result",
        ),
        ToolResult(
            call_id="gen_1",
            name="code_execution",
            content={"outcome": "OUTCOME_DEADLINE_EXCEEDED"},
            is_error=True,
            result_type="code_execution_result",
        ),
    ]


def numbered(value: Any, key: str = "") -> Any:
    """``value`` with its enums written as numbers, as the Go client receives them."""
    if isinstance(value, dict):
        return {name: numbered(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [numbered(item, key) for item in value]
    if isinstance(value, str) and key == "finishReason":
        return FINISH_NUMBERS[value]
    if isinstance(value, str) and key == "blockReason":
        return BLOCK_NUMBERS[value]
    if isinstance(value, str) and key in SKIPPED_ENUMS:
        return len(value)  # any number: the converter skips these fields
    return value


@pytest.mark.parametrize("path", GENERATE_CONTENT, ids=lambda path: path.name)
def test_every_recording_with_numbered_enums_gives_what_it_gives_with_names(path: Path) -> None:
    events = load_events(path)
    renumbered = [numbered(event) for event in events]
    assert convert(as_bytes(renumbered)) == convert(renumbered) == convert(events)


def test_the_recordings_hold_numbered_enums_once_renumbered() -> None:
    keys = {
        key
        for path in GENERATE_CONTENT
        for event in load_events(path)
        for key in ("finishReason", "modality", "trafficType")
        if f'"{key}"' in json.dumps(event)
    }
    assert keys == {"finishReason", "modality", "trafficType"}
