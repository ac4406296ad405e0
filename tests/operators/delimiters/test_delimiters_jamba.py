"""Jamba ``<tool_calls>[...]</tool_calls>`` tool calls."""

from __future__ import annotations

import pytest

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"
DALLAS = '{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}'


def test_fixture_parallel_tools() -> None:
    result = assert_chunking_invariant("jamba", (RAW / "vllm-test_jamba_parallel_tools.txt").read_text())
    assert result.content == " "
    assert result.calls == [
        Call(0, "call_0", "get_current_weather", DALLAS),
        Call(1, "call_1", "get_current_weather", '{"city": "Orlando", "state": "FL", "unit": "fahrenheit"}'),
    ]


def test_fixture_text_then_tool() -> None:
    result = assert_chunking_invariant(
        "jamba", (RAW / "vllm-test_jamba_single_tool_with_content.txt").read_text()
    )
    assert result.content == " Sure! let me call the tool for you."
    assert result.calls == [Call(0, "call_0", "get_current_weather", DALLAS)]


@pytest.mark.parametrize(
    "prose",
    [
        "The <tool_calls> tag.",
        '<tool_calls>\n{"name": "f", "arguments": {}}\n</tool_calls>',
        "<tool_calls>[1]",
    ],
)
def test_prose_and_minimax_m1_lines_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("jamba", prose)
    assert (result.content, result.calls) == (prose, [])


def test_closing_tag_inside_a_string_and_text_after() -> None:
    text = '<tool_calls>[{"name": "f", "arguments": {"s": "</tool_calls>]"}}]</tool_calls> after'
    result = assert_chunking_invariant("jamba", text)
    assert (result.content, result.calls) == (" after", [Call(0, "call_0", "f", '{"s": "</tool_calls>]"}')])


def test_empty_list_and_cut_off_call() -> None:
    assert assert_chunking_invariant("jamba", "a<tool_calls>[]</tool_calls>b").content == "ab"
    result = assert_chunking_invariant("jamba", '<tool_calls>[{"name": "f", "arguments": {"a": "x')
    assert result.calls == [Call(0, "call_0", "f", '{"a": "x', finished=False)]


def test_detected_only_before_a_list() -> None:
    jamba = get_format("jamba")
    assert jamba.detect_after("<tool_calls>", "[", False) is True
    assert jamba.detect_after("<tool_calls>", "\n{", False) is False
