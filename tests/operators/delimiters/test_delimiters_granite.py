"""Granite tool calls: 3.x ``<|tool_call|>`` / ``<tool_call>`` + a JSON list (``granite``), 20B-FC
``<function_call>`` blocks (``granite_20b_fc``), 4 = Hermes (``granite4``)."""

from __future__ import annotations

import pytest

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, run

RAW = FIXTURES / "raw_model_output"


def test_fixture_granite3_parallel_calls() -> None:
    result = assert_chunking_invariant(
        "granite", (RAW / "vllm-test_granite_parallel_tool_calls.txt").read_text()
    )
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_granite3_text_around_the_calls() -> None:
    result = assert_chunking_invariant(
        "granite", (RAW / "vllm-test_granite_surrounding_text.txt").read_text()
    )
    assert result.content == "Let me check the weather for you.\n\nI'll get that information."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


def test_fixture_granite31_escaped_strings_stream_verbatim() -> None:
    result = assert_chunking_invariant("granite", (RAW / "vllm-test_granite_escaped_strings.txt").read_text())
    assert result.parsed() == [
        (
            "test_function",
            {
                "quoted": 'He said "hello"',
                "path": "C:\\Users\\file.txt",
                "newline": "line1\nline2",
                "unicode": "emoji: 🎉",
            },
        )
    ]


@pytest.mark.parametrize(
    "prose",
    [
        "Use the <tool_call> tag.",
        "<|tool_call|> not a list",
        "<tool_call>[1, 2]",
        'Hermes-style <tool_call>{"name": "f"}</tool_call>',
        'Some text [{"name": "func"}]',
    ],
)
def test_prose_and_other_layouts_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("granite", prose)
    assert (result.content, result.calls) == (prose, [])


def test_arguments_before_the_name_and_a_cut_list() -> None:
    text = (
        '<|tool_call|>[{"arguments": {"city": "Tokyo"}, "name": "get_weather"}, '
        '{"name": "b", "arguments": {"y'
    )
    result = assert_chunking_invariant("granite", text)
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "b", '{"y', finished=False),
    ]


def test_granite_detects_a_list_after_tool_call_and_hermes_an_object() -> None:
    granite, hermes = get_format("granite"), get_format("hermes")
    assert granite.detect_after("<tool_call>", " [{", False) is True
    assert hermes.detect_after("<tool_call>", " [{", False) is False
    assert granite.detect_after("<tool_call>", "\n{", False) is False
    assert hermes.detect_after("<tool_call>", "\n{", False) is True
    assert granite.detect_after("<tool_call>", "  ", False) is None


def test_granite4_is_hermes() -> None:
    assert get_format("granite4") is get_format("hermes")
    text = '<tool_call>\n{"name": "get_db_config", "arguments": {"param": "max_connections"}}\n</tool_call>'
    assert run("granite4", [text]).calls == [
        Call(0, "call_0", "get_db_config", '{"param": "max_connections"}')
    ]


def test_fixture_granite_20b_fc_parallel_calls() -> None:
    text = (RAW / "vllm-test_granite-20b-fc_parallel_tool_calls.txt").read_text()
    result = assert_chunking_invariant("granite_20b_fc", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_granite_20b_fc_text_then_call() -> None:
    text = (RAW / "vllm-test_granite-20b-fc_surrounding_text.txt").read_text()
    result = assert_chunking_invariant("granite_20b_fc", text)
    assert result.content == "Let me check the weather for you.\n"
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ("The <function_call> tag.", "The <function_call> tag.", []),
        (
            '<function_call> [{"name": "func", "arguments": {}}]',
            '<function_call> [{"name": "func", "arguments": {}}]',
            [],
        ),
        (
            '<function_call> {"name": "f", "arguments": {"a": 1}} done',
            " done",
            [Call(0, "call_0", "f", '{"a": 1}')],
        ),
        ('<function_call> {"name": "f", "arguments": {', "", [Call(0, "call_0", "f", "{", finished=False)]),
    ],
)
def test_granite_20b_fc_edges(text: str, content: str, calls: list[Call]) -> None:
    result = assert_chunking_invariant("granite_20b_fc", text)
    assert (result.content, result.calls) == (content, calls)
