"""Hermes / Qwen2.5 / Qwen3 ``<tool_call>{json}</tool_call>`` tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"


def test_fixture_text_then_tool_call() -> None:
    result = assert_chunking_invariant(
        "hermes", (RAW / "vllm-test_hermes_qwen_text_then_tool_call.txt").read_text()
    )
    assert result.content == "Sure, let me check the weather."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "NYC"}')]


def test_fixture_2_sequential_tool_calls() -> None:
    text = (RAW / "vllm-test_hermes_qwen_2_sequential_tool_calls.txt").read_text()
    result = assert_chunking_invariant("hermes", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "search", '{"q": "cats"}'),
        Call(1, "call_1", "search", '{"q": "dogs"}'),
    ]


def test_fixture_newline_wrapped_tool_call() -> None:
    text = (RAW / "vllm-test_hermes_qwen_newline_wrapped_tool_call.txt").read_text()
    result = assert_chunking_invariant("hermes", text)
    assert result.content == ""
    assert result.calls == [Call(0, "call_0", "final_answer", '{"trigger": true}')]


def test_fixture_stringified_arguments_are_not_double_encoded() -> None:
    text = (RAW / "vllm-test_hermes_granite_stringified_arguments.txt").read_text()
    result = assert_chunking_invariant("hermes", text)
    assert result.calls == [Call(0, "call_0", "get_db_config", '{"param": "max_connections"}')]


def test_stringified_arguments_with_escapes_split_anywhere() -> None:
    inner = json.dumps({"text": 'a "quoted" \\ 😀 é \n tab\t'}, ensure_ascii=True)
    text = "<tool_call>" + json.dumps({"name": "f", "arguments": inner}) + "</tool_call>"
    result = assert_chunking_invariant("hermes", text)
    assert result.calls == [Call(0, "call_0", "f", inner)]


@pytest.mark.parametrize(
    "prose",
    [
        "Use the <tool_call> tag to call a tool.",
        "<tool_call>\nnot json</tool_call>",
        "Tags: <tool_call></tool_call> and <tool_call",
        "a < b <tool_ call> </tool_call>",
    ],
)
def test_prose_mentioning_the_tag_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("hermes", prose)
    assert (result.content, result.calls) == (prose, [])


def test_end_tag_inside_a_json_string_is_content() -> None:
    arguments = json.dumps({"html": "</tool_call><tool_call>{}", "n": [{"}": "{"}]})
    text = f'x<tool_call>\n{{"name": "render", "arguments": {arguments}}}\n</tool_call>\ny'
    result = assert_chunking_invariant("hermes", text)
    assert result.content == "x\ny"
    assert result.calls == [Call(0, "call_0", "render", arguments)]


def test_arguments_before_name_and_extra_keys() -> None:
    text = '<tool_call>{"id": "abc", "arguments": {"q": 1}, "type": {"x": [1]}, "name": "s"}</tool_call>'
    result = assert_chunking_invariant("hermes", text)
    assert result.calls == [Call(0, "abc", "s", '{"q": 1}')]


def test_calls_inside_reasoning() -> None:
    text = 'thinking <tool_call>{"name": "f", "arguments": {}}</tool_call> done'
    result = assert_chunking_invariant("hermes", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("thinking  done", "")
    assert result.calls == [Call(0, "call_0", "f", "{}")]


def test_cut_off_inside_arguments_and_inside_the_name() -> None:
    result = assert_chunking_invariant("hermes", '<tool_call>{"name": "f", "arguments": {"a": "x')
    assert result.calls == [Call(0, "call_0", "f", '{"a": "x', finished=False)]
    result = assert_chunking_invariant("hermes", '<tool_call>\n{"name": "get_we')
    assert result.calls == [Call(0, "call_0", "get_we", "", finished=False)]


def test_complete_object_without_end_tag() -> None:
    result = assert_chunking_invariant("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}}\n')
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]
    result = assert_chunking_invariant("hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}} then text')
    assert (result.content, result.calls) == (" then text", [Call(0, "call_0", "f", '{"a": 1}')])


def test_end_tag_inside_an_unclosed_object_ends_the_call() -> None:
    result = assert_chunking_invariant(
        "hermes", '<tool_call>{"name": "f", "arguments": {"a": 1}</tool_call>ok'
    )
    assert result.content == "ok"
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_malformed_object_is_dropped_up_to_the_end_tag() -> None:
    result = assert_chunking_invariant("hermes", '<tool_call>{"name": "f" oops}</tool_call>after')
    assert result.content == "after"
    assert result.calls == [Call(0, "call_0", "f", "{}")]


SAMPLE = (
    'Plan.<tool_call>\n{"name": "a", "arguments": {"s": "</tool_call> \\" {", "l": [1, {"k": null}]}}\n'
    '</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": \\"\\u00e9\\"}"}</tool_call>'
    " <tool_call> end"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("hermes", [SAMPLE])
    assert expected.content == "Plan. <tool_call> end"
    assert expected.parsed() == [("a", {"s": '</tool_call> " {', "l": [1, {"k": None}]}), ("b", {"x": "é"})]
    assert run("hermes", pieces_at(SAMPLE, cuts)) == expected


# --- lone surrogates never leave the rewriter as characters ------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('"{\\"a\\": \\"\\ud800\\"}"', '{"a": "\\ud800"}'),
        ('"{\\"a\\": \\"x\\udc00y\\"}"', '{"a": "x\\udc00y"}'),
        ('"{\\"a\\": \\"\\ud83d\\ude00\\"}"', '{"a": "\U0001f600"}'),
        ('"{\\"a\\": \\"\\ud83d\\u0041\\"}"', '{"a": "\\ud83dA"}'),
    ],
)
def test_a_lone_surrogate_in_string_arguments_stays_an_escape(arguments: str, expected: str) -> None:
    """Arguments written as a JSON string are decoded, but a lone surrogate is kept as its escape: no
    encoder downstream could write the character, and the argument parser reports the escape."""
    result = assert_chunking_invariant(
        "hermes", f'<tool_call>{{"name": "f", "arguments": {arguments}}}</tool_call>'
    )
    assert result.calls == [Call(0, "call_0", "f", expected)]


def test_a_lone_surrogate_in_a_name_keeps_the_escape() -> None:
    result = assert_chunking_invariant(
        "hermes", '<tool_call>{"name": "f\\udc00", "arguments": {}}</tool_call>'
    )
    assert result.calls == [Call(0, "call_0", "f\\udc00", "{}")]


@pytest.mark.parametrize("output", ["jsonl", "openai-sse"])
def test_lone_surrogate_in_string_arguments_through_replay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    from pipeline.cli.main import main

    path = tmp_path / "hermes.txt"
    path.write_text('<tool_call>{"name": "f", "arguments": "{\\"a\\": \\"\\ud800\\"}"}</tool_call>')
    assert (
        main(["replay", str(path), "--provider", "text", "--tool-format", "hermes", "--output", output]) == 0
    )
    out = capsys.readouterr().out
    if output == "jsonl":
        lines = [json.loads(line) for line in out.splitlines()]
        (invocation,) = [line for line in lines if line["type"] == "TOOL_INVOCATION"]
        assert invocation["error"]["kind"] == "invalid_json"
        assert invocation["error"]["offset"] == 7
    else:
        events = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("data: {")]
        arguments = "".join(
            call["function"].get("arguments", "")
            for event in events
            for choice in event["choices"]
            for call in choice["delta"].get("tool_calls", ())
        )
        assert arguments == '{"a": "\\ud800"}'
