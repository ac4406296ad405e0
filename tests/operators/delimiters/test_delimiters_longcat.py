"""LongCat-Flash ``<longcat_tool_call>{...}</longcat_tool_call>`` tool calls."""

from __future__ import annotations

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"


def test_fixture_parallel_calls() -> None:
    result = assert_chunking_invariant(
        "longcat", (RAW / "vllm-test_longcat_parallel_tool_calls.txt").read_text()
    )
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_text_around_the_call() -> None:
    result = assert_chunking_invariant(
        "longcat", (RAW / "vllm-test_longcat_surrounding_text.txt").read_text()
    )
    assert result.content == "Let me check the weather for you.\n\nHere is the result."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


def test_prose_and_invalid_json_stay_text() -> None:
    text = "Some text with <longcat_tool_call>invalid json"
    assert assert_chunking_invariant("longcat", text).content == text
