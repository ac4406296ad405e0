"""The Gemini converter's hardening: wrong-typed fields, SDK objects, repeated call ids, code execution,
grounding citations, signatures on text parts; at the core and through ``process()``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest
from google.genai import types as genai_types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.adapter.sources import sdk_object_to_dict
from operators.convert.gemini import GeminiConverter
from pipeline.compose import process
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, ToolCallDelta, ToolResult
from tests.conftest import TESTS
from tests.converter_cases import collect, load_events, run_converter, sequential_ids

FIXTURES = TESTS / "fixtures" / "gemini"
GENERATE_CONTENT = sorted(
    path
    for path in FIXTURES.iterdir()
    if path.suffix in {".sse", ".jsonl"} and "event_type" not in load_events(path)[0]
)


def convert(events: Iterable[Any]) -> list[ChunkResponse]:
    return run_converter(GeminiConverter(id_factory=sequential_ids), events)


def chunk(*parts: dict[str, Any], finish: str | None = None, **candidate_fields: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [{**candidate, **candidate_fields}]}


def segment_ids() -> Any:
    counts: dict[str, int] = {}

    def next_id(kind: Any) -> str:
        number = counts.get(str(kind), 0)
        counts[str(kind)] = number + 1
        return f"{kind}{number}"

    return next_id


async def pipeline_events(source: Any) -> list[dict[str, Any]]:
    events = process(source, provider="gemini", id_factory=sequential_ids, segment_ids=segment_ids())
    return [event.to_dict() for event in await collect(events)]


async def one_piece(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def items(values: list[Any]) -> AsyncIterator[Any]:
    for value in values:
        yield value


# --------------------------------------------------------------------------------------------------
# Item 7: wrong-typed fields raise instead of silently dropping or misrouting


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (
            {"candidates": [{"index": "0", "content": {"parts": [{"text": "lost"}]}}]},
            "field 'candidates[0].index': Expected `int`, got `str`",
        ),
        (
            {"candidates": [{"index": False, "content": {"parts": [{"text": "lost"}]}}]},
            "field 'candidates[0].index': Expected `int`, got `bool`",
        ),
        (
            {"candidates": [{"index": 0.0, "content": {"parts": [{"text": "lost"}]}}]},
            "field 'candidates[0].index': Expected `int`, got `float`",
        ),
        (
            chunk({"functionCall": {"name": "f", "args": {}, "id": 7}}),
            "field 'candidates[0].content.parts[0].functionCall.id': Expected `str | null`, got `int`",
        ),
        (
            chunk({"text": "secret", "thought": "true"}),
            "field 'candidates[0].content.parts[0].thought': Expected `bool`, got `str`",
        ),
        (
            chunk({"functionCall": {"name": "f", "willContinue": "yes"}}),
            "field 'candidates[0].content.parts[0].functionCall.willContinue': Expected `bool`, got `str`",
        ),
        (
            chunk({"text": "a"}, finish="STOP", finishMessage=3),
            "field 'candidates[0].finishMessage': Expected `str | null`, got `int`",
        ),
    ],
)
def test_wrong_typed_fields_raise_a_converter_error_naming_them(event: dict[str, Any], problem: str) -> None:
    converter = GeminiConverter()
    converter.feed(chunk({"text": "before"}))
    with pytest.raises(ConverterError) as caught:
        converter.feed(event)
    assert caught.value.event_number == 1
    assert str(caught.value) == f"event 1: {problem}"


@pytest.mark.anyio
async def test_a_wrong_typed_candidate_index_fails_through_process_after_what_came_before() -> None:
    body = (
        b'data: {"candidates":[{"index":0,"content":{"parts":[{"text":"kept"}]}}]}\n\n'
        b'data: {"candidates":[{"index":"0","content":{"parts":[{"text":"lost?"}]}}]}\n\n'
    )
    received: list[Any] = []
    events = process(one_piece(body), provider="gemini", segment_ids=segment_ids())
    with pytest.raises(ConverterError, match=r"event 1: field 'candidates\[0\]\.index': Expected `int`"):
        await collect(events, received)
    received = [event.to_dict() for event in received]
    assert [event["payload"].get("delta") for event in received if event["type"] == "SEGMENT_CONTENT"] == [
        "kept"
    ]


# --------------------------------------------------------------------------------------------------
# Item 17: SDK objects give the same events as the raw bytes, with plain strings and numbers


def test_finish_and_block_reasons_from_sdk_objects_are_plain_strings() -> None:
    response = genai_types.GenerateContentResponse.model_validate(chunk({"text": "a"}, finish="MAX_TOKENS"))
    [converted] = convert([sdk_object_to_dict(response)])
    assert converted.metadata == {"stop_reason": "MAX_TOKENS"}
    assert type(converted.metadata["stop_reason"]) is str
    blocked = genai_types.GenerateContentResponse.model_validate(
        {"promptFeedback": {"blockReason": "SAFETY"}}
    )
    [converted] = convert([sdk_object_to_dict(blocked)])
    assert type(converted.metadata and converted.metadata["stop_reason"]) is str


def test_an_integral_number_value_is_an_integer_whether_the_sdk_made_it_a_float() -> None:
    streamed = [
        chunk({"functionCall": {"name": "f", "willContinue": True}}),
        chunk(
            {"functionCall": {"partialArgs": [{"jsonPath": "$.n", "numberValue": 2}], "willContinue": True}}
        ),
        chunk(
            {"functionCall": {"partialArgs": [{"jsonPath": "$.x", "numberValue": 0.5}], "willContinue": True}}
        ),
        chunk({"functionCall": {}}),
    ]
    sdk = [
        sdk_object_to_dict(genai_types.GenerateContentResponse.model_validate(event)) for event in streamed
    ]
    text = "".join(
        delta.arguments_delta or "" for response in convert(sdk) for delta in response.tool_calls or []
    )
    assert text == '{"n":2,"x":0.5}'
    assert convert(sdk) == convert(streamed)


def plain(value: Any) -> Any:
    """``value`` with the exact types of its JSON: a ``str`` subclass (an SDK enum) fails the comparison."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    assert type(value) in (str, int, float, bool, type(None)), f"{value!r} is a {type(value).__name__}"
    return value


@pytest.mark.anyio
@pytest.mark.parametrize("path", GENERATE_CONTENT, ids=[path.name for path in GENERATE_CONTENT])
async def test_sdk_objects_give_the_events_the_bytes_give(path: Path) -> None:
    from_bytes = await pipeline_events(one_piece(await anyio.Path(path).read_bytes()))
    objects = [genai_types.GenerateContentResponse.model_validate(event) for event in load_events(path)]
    from_sdk = await pipeline_events(items(objects))
    assert plain(from_sdk) == plain(from_bytes)
    assert json.dumps(from_sdk) == json.dumps(from_bytes)


# --------------------------------------------------------------------------------------------------
# Item 19: a part repeating a call id already seen


def test_a_call_part_repeated_to_the_letter_is_one_call() -> None:
    weather = {"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}}
    assert convert([chunk(weather), chunk(weather, finish="STOP")]) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "c1", "weather", '{"city":"Oslo"}', True)]),
        ChunkResponse(finish_reason="tool_calls", is_complete=True, metadata={"stop_reason": "STOP"}),
    ]


def test_a_call_reusing_an_id_with_other_arguments_is_a_call_of_its_own() -> None:
    first = {"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}}
    second = {"functionCall": {"name": "weather", "args": {"city": "Rome"}, "id": "c1"}}
    assert convert([chunk(first, second)]) == [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, "c1", "weather", '{"city":"Oslo"}', True),
                ToolCallDelta(1, "c1", "weather", '{"city":"Rome"}', True),
            ]
        )
    ]


def invocations(events: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [
        (event["id"], event["name"], event["arguments"])
        for event in events
        if event["type"] == "TOOL_INVOCATION"
    ]


@pytest.mark.anyio
async def test_a_duplicated_call_part_gives_one_segment_and_one_invocation_through_process() -> None:
    # The call part of fantasy_gemini-3.1-pro_parallel_function_calls_with_ids.sse, sent twice.
    weather = {"functionCall": {"name": "add", "args": {"a": 2, "b": 3}, "id": "zq4h6e0w"}}
    body = "".join(
        f"data: {json.dumps(event)}\n\n" for event in (chunk(weather), chunk(weather), chunk(finish="STOP"))
    ).encode()
    events = await pipeline_events(one_piece(body))
    starts = [event["segment_id"] for event in events if event["type"] == "SEGMENT_START"]
    assert starts == ["zq4h6e0w"]
    assert invocations(events) == [("zq4h6e0w", "add", {"a": 2, "b": 3})]


@pytest.mark.anyio
async def test_two_calls_sharing_an_id_give_two_invocations_through_process() -> None:
    first = {"functionCall": {"name": "add", "args": {"a": 2}, "id": "zq4h6e0w"}}
    second = {"functionCall": {"name": "add", "args": {"a": 3}, "id": "zq4h6e0w"}}
    events = await pipeline_events(items([chunk(first), chunk(second, finish="STOP")]))
    assert invocations(events) == [("zq4h6e0w", "add", {"a": 2}), ("zq4h6e0w_2", "add", {"a": 3})]


# --------------------------------------------------------------------------------------------------
# Item 28: code execution, built-in tools and grounding

# The parts of vercel/ai packages/google/src/__fixtures__/google-code-execution-multiple-results.json
# (gemini-3-flash-preview): one executableCode, two results, then text.
CODE = "print('ok')\nprint(1/0)"
FAILED_OUTPUT = "division by zero\nTraceback (most recent call last):\nZeroDivisionError: division by zero\n"
CODE_EXECUTION = [
    chunk({"executableCode": {"language": "PYTHON", "code": CODE}, "thoughtSignature": "EjQKMgFy"}),
    chunk(
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "ok\n"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_FAILED", "output": FAILED_OUTPUT}},
    ),
    chunk({"text": "The code printed ok, then failed.", "thoughtSignature": "EjQKMgFyyNp8"}, finish="STOP"),
]


def test_code_execution_is_a_server_call_and_its_results_are_tool_results() -> None:
    arguments = json.dumps({"language": "PYTHON", "code": CODE}, separators=(",", ":"))
    assert convert(CODE_EXECUTION) == [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, "gen_0", "code_execution", arguments, True, "server", signature="EjQKMgFy")
            ]
        ),
        ChunkResponse(
            tool_results=[
                ToolResult(
                    call_id="gen_0",
                    name="code_execution",
                    content={"outcome": "OUTCOME_OK", "output": "ok\n"},
                    result_type="code_execution_result",
                ),
                ToolResult(
                    call_id="gen_0",
                    name="code_execution",
                    content={"outcome": "OUTCOME_FAILED", "output": FAILED_OUTPUT},
                    is_error=True,
                    result_type="code_execution_result",
                ),
            ]
        ),
        ChunkResponse(
            content="The code printed ok, then failed.",
            content_signature="EjQKMgFyyNp8",
            finish_reason="stop",
            is_complete=True,
            metadata={"stop_reason": "STOP"},
        ),
    ]


def test_code_execution_parts_with_ids_pair_by_id() -> None:
    chunks = convert(
        [
            chunk(
                {"executableCode": {"language": "PYTHON", "code": "1", "id": "x1"}},
                {"executableCode": {"language": "PYTHON", "code": "2", "id": "x2"}},
                {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n", "id": "x1"}},
            )
        ]
    )
    assert [(delta.index, delta.call_id) for delta in chunks[0].tool_calls or []] == [(0, "x1"), (1, "x2")]
    assert [result.call_id for result in chunks[0].tool_results or []] == ["x1"]


def test_built_in_tool_calls_and_responses() -> None:
    chunks = convert(
        [
            chunk(
                {"toolCall": {"id": "t1", "toolType": "FILE_SEARCH", "args": {"query": "refund policy"}}},
                {"toolResponse": {"id": "t1", "toolType": "FILE_SEARCH", "response": {"chunks": 2}}},
            )
        ]
    )
    assert chunks == [
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, "t1", "file_search", '{"query":"refund policy"}', True, "server")],
            tool_results=[
                ToolResult(
                    call_id="t1", name="file_search", content={"chunks": 2}, result_type="tool_response"
                )
            ],
        )
    ]


def test_a_result_with_nothing_to_answer_raises() -> None:
    with pytest.raises(ConverterError, match=r"codeExecutionResult has no id and follows no executableCode"):
        convert([chunk({"codeExecutionResult": {"outcome": "OUTCOME_OK"}})])


# Shaped as Google Search grounding arrives: the text first, the metadata on the last chunk (and
# repeated by a later one), byte offsets into the whole text.
SUPPORT = {
    "segment": {"startIndex": 0, "endIndex": 17, "text": "The answer is 42."},
    "groundingChunkIndices": [1],
    "confidenceScores": [0.9],
}
GROUNDING = {
    "webSearchQueries": ["meaning of life"],
    "groundingChunks": [
        {"web": {"uri": "https://example.com/a", "title": "a.example"}},
        {"web": {"uri": "https://example.com/b", "title": "b.example"}},
    ],
    "groundingSupports": [SUPPORT],
}
GROUNDED = [
    chunk({"text": "The answer is 42."}),
    chunk({"text": ""}, finish="STOP", groundingMetadata=GROUNDING),
    {"candidates": [{"index": 0, "groundingMetadata": GROUNDING}]},
]
CITATION = {
    "type": "grounding_support",
    **SUPPORT,
    "sources": [{"web": {"uri": "https://example.com/b", "title": "b.example"}}],
}


def test_grounding_supports_become_citations_with_their_sources_once() -> None:
    assert convert(GROUNDED) == [
        ChunkResponse(content="The answer is 42."),
        ChunkResponse(
            citations=[CITATION], finish_reason="stop", is_complete=True, metadata={"stop_reason": "STOP"}
        ),
    ]


def test_citation_metadata_citations_become_citations() -> None:
    cited = {"startIndex": 3, "endIndex": 40, "uri": "https://example.org/poem", "license": "mit"}
    assert convert([chunk({"text": "abc"}, citationMetadata={"citations": [cited]})]) == [
        ChunkResponse(content="abc"),
        ChunkResponse(citations=[{"type": "citation", **cited}]),
    ]


@pytest.mark.anyio
async def test_code_execution_and_grounding_through_process_from_dicts_and_sdk_objects() -> None:
    from_dicts = await pipeline_events(items(CODE_EXECUTION))
    result_metadata = {
        "call_id": "gen_0",
        "provider_executed": True,
        "tool_name": "code_execution",
        "result_type": "code_execution_result",
    }
    assert [event for event in from_dicts if "delta" not in event.get("payload", {})][:8] == [
        {
            "type": "SEGMENT_START",
            "segment_id": "gen_0",
            "segment_type": "tool_call",
            "payload": {
                "metadata": {"tool_name": "code_execution", "call_id": "gen_0", "provider_executed": True}
            },
        },
        {
            "type": "SEGMENT_ARGUMENT",
            "segment_id": "gen_0",
            "payload": {"path": ["language"], "value": "PYTHON"},
        },
        {"type": "SEGMENT_ARGUMENT", "segment_id": "gen_0", "payload": {"path": ["code"], "value": CODE}},
        {
            "type": "SEGMENT_END",
            "segment_id": "gen_0",
            "payload": {
                "metadata": {
                    "tool_name": "code_execution",
                    "call_id": "gen_0",
                    "provider_executed": True,
                    "arguments": {"language": "PYTHON", "code": CODE},
                    "signature": "EjQKMgFy",
                }
            },
        },
        {
            "type": "TOOL_INVOCATION",
            "id": "gen_0",
            "name": "code_execution",
            "arguments": {"language": "PYTHON", "code": CODE},
            "error": None,
            "provider_executed": True,
        },
        {
            "type": "SEGMENT_START",
            "segment_id": "gen_0:result",
            "segment_type": "tool_result",
            "payload": {"metadata": result_metadata},
        },
        {
            "type": "SEGMENT_END",
            "segment_id": "gen_0:result",
            "payload": {
                "metadata": {**result_metadata, "result": {"outcome": "OUTCOME_OK", "output": "ok\n"}}
            },
        },
        {
            "type": "SEGMENT_START",
            "segment_id": "gen_0:result_2",
            "segment_type": "tool_result",
            "payload": {"metadata": result_metadata},
        },
    ]
    text_ends = [
        event for event in from_dicts if event["type"] == "SEGMENT_END" and event["segment_id"] == "text0"
    ]
    assert text_ends[0]["payload"] == {"metadata": {"signature": "EjQKMgFyyNp8"}}
    grounded = await pipeline_events(items(GROUNDED))
    assert [event["payload"] for event in grounded if event["type"] == "SEGMENT_END"] == [
        {"metadata": {"citations": [{"offset": 17, "citation": CITATION}]}}
    ]
    for events in (CODE_EXECUTION, GROUNDED):
        objects = [genai_types.GenerateContentResponse.model_validate(event) for event in events]
        from_sdk = await pipeline_events(items(objects))
        from_dicts = await pipeline_events(items(events))
        assert json.dumps(plain(from_sdk), sort_keys=True) == json.dumps(plain(from_dicts), sort_keys=True)


# --------------------------------------------------------------------------------------------------
# Item 29: a thoughtSignature on a text part


@pytest.mark.anyio
async def test_a_signature_on_an_empty_text_part_goes_to_the_text_segment_of_the_recording() -> None:
    path = FIXTURES / "vercel_gemini-3-pro_text_only.jsonl"
    [signature] = [
        part["thoughtSignature"]
        for event in load_events(path)
        for part in event["candidates"][0]["content"]["parts"]
        if "thoughtSignature" in part
    ]
    events = await pipeline_events(one_piece(await anyio.Path(path).read_bytes()))
    assert [(event["type"], event.get("segment_id")) for event in events] == [
        ("SEGMENT_START", "text0"),
        ("SEGMENT_CONTENT", "text0"),
        ("SEGMENT_CONTENT", "text0"),
        ("SEGMENT_END", "text0"),
        ("RESPONSE_END", None),
    ]
    assert events[3]["payload"] == {"metadata": {"signature": signature}}


@pytest.mark.anyio
async def test_a_signature_on_the_first_answer_part_goes_to_its_text_segment() -> None:
    path = FIXTURES / "pydantic-ai_gemini-2.5-pro_thought_summaries_then_text_signature.sse"
    events = await pipeline_events(one_piece(await anyio.Path(path).read_bytes()))
    ends = [event for event in events if event["type"] == "SEGMENT_END"]
    assert [(event["segment_id"], sorted(event["payload"].get("metadata", {}))) for event in ends] == [
        ("reasoning0", []),
        ("text0", ["signature"]),
    ]


# --------------------------------------------------------------------------------------------------
# Any re-chunking of the bytes gives the same events


def sse_body(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"data: {json.dumps(event)}\r\n\r\n" for event in events).encode()


async def pieces(data: bytes, sizes: list[int]) -> AsyncIterator[bytes]:
    start, turn = 0, 0
    while start < len(data):
        size = sizes[turn % len(sizes)]
        yield data[start : start + size]
        start, turn = start + size, turn + 1


@pytest.mark.anyio
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=1, max_value=48), min_size=1, max_size=6))
async def test_any_rechunking_of_server_calls_and_citations_gives_the_same_events(sizes: list[int]) -> None:
    for stream in (CODE_EXECUTION, GROUNDED):
        body = sse_body(stream)
        assert await pipeline_events(pieces(body, sizes)) == await pipeline_events(one_piece(body))
