"""Mistral ``[TOOL_CALLS]``: the pre-v11 JSON list and the v11 ``NAME[CALL_ID]ID[ARGS]{...}`` layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from operators.delimiters.formats.mistral import mistral_call_id
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

TC = "[TOOL_CALLS]"


def test_pre_v11_list_of_two_calls() -> None:
    text = (
        f'{TC} [{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}, '
        '{"name": "get_weather", "arguments": {"city": "Rome"}}]'
    )
    result = assert_chunking_invariant("mistral", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Paris"}'),
        Call(1, "call_1", "get_weather", '{"city": "Rome"}'),
    ]


def test_pre_v11_list_spread_over_lines_with_text_around() -> None:
    text = f'Let me check.\n{TC}[\n  {{"name": "f",\n   "arguments": {{"a": [1, {{"b": null}}]}}}}\n]\nDone.'
    result = assert_chunking_invariant("mistral", text)
    assert result.content == "Let me check.\n\nDone."
    assert result.calls == [Call(0, "call_0", "f", '{"a": [1, {"b": null}]}')]


def test_pre_v11_lone_object_and_empty_list() -> None:
    result = assert_chunking_invariant("mistral", f'a{TC} []b{TC}{{"name": "f", "arguments": {{}}}}')
    assert result.content == "ab"
    assert result.calls == [Call(0, "call_0", "f", "{}")]


def test_pre_v11_id_before_arguments_is_kept_later_one_is_not() -> None:
    text = (
        f'{TC}[{{"id": "a1B2c3D4e", "name": "f", "arguments": {{"x": 1}}}}, '
        '{"name": "g", "arguments": {"y": 2}, "id": "zzzzzzzzz"}]'
    )
    result = assert_chunking_invariant("mistral", text)
    assert result.calls == [Call(0, "a1B2c3D4e", "f", '{"x": 1}'), Call(1, "call_1", "g", '{"y": 2}')]


def test_pre_v11_stringified_arguments_are_decoded() -> None:
    inner = json.dumps({"q": 'a "b" \\ é'})
    text = TC + json.dumps([{"name": "f", "arguments": inner}])
    result = assert_chunking_invariant("mistral", text)
    assert result.calls == [Call(0, "call_0", "f", inner)]


@pytest.mark.parametrize("opening", [f"{TC} [", f"{TC}["])
def test_pre_v11_list_with_an_offered_and_an_unknown_call(opening: str) -> None:
    """With ``offered_tools``, an unknown call in a pre-v11 list goes out as text from its ``{`` on (as
    in the other JSON lists): after an offered call, and before one (with the list's opening)."""
    first, second = '{"name": "foo", "arguments": {"a": 1}}', '{"name": "bar", "arguments": {}}'
    text = f"{opening}{first}, {second}] done"
    for pieces in ([text], list(text), pieces_at(text, range(3, len(text), 5))):
        known_first = run("mistral", pieces, offered_tools={"foo"})
        assert known_first.content == f"{second}] done"
        assert [(call.name, call.arguments) for call in known_first.calls] == [("foo", '{"a": 1}')]
        known_second = run("mistral", pieces, offered_tools={"bar"})
        assert known_second.content == f"{opening}{first},  done"
        assert [(call.name, call.arguments) for call in known_second.calls] == [("bar", "{}")]


def test_v11_calls_with_an_offered_and_an_unknown_call() -> None:
    """The v11 layout's unknown call goes out from its ``[TOOL_CALLS]``, not from its arguments' ``{``."""
    text = f'{TC}foo[ARGS]{{"a": 1}} {TC}bar[ARGS]{{}} done'
    for pieces in ([text], list(text)):
        known_first = run("mistral", pieces, offered_tools={"foo"})
        assert known_first.content == f"{TC}bar[ARGS]{{}} done"
        assert [(call.name, call.arguments) for call in known_first.calls] == [("foo", '{"a": 1}')]
        known_second = run("mistral", pieces, offered_tools={"bar"})
        assert known_second.content == f'{TC}foo[ARGS]{{"a": 1}}  done'
        assert [(call.name, call.arguments) for call in known_second.calls] == [("bar", "{}")]


def test_v11_calls_one_marker_each() -> None:
    text = f'{TC}get_weather[ARGS]{{"city":"San Francisco"}}{TC}get_time[ARGS]{{"tz":"PST"}}'
    result = assert_chunking_invariant("mistral", text)
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city":"San Francisco"}'),
        Call(1, "call_1", "get_time", '{"tz":"PST"}'),
    ]


def test_v11_with_call_id() -> None:
    result = assert_chunking_invariant(
        "mistral", f'{TC}get_weather[CALL_ID]a1B2c3D4e[ARGS]{{"city":"Paris"}}'
    )
    assert result.calls == [Call(0, "a1B2c3D4e", "get_weather", '{"city":"Paris"}')]


def test_v11_text_after_the_arguments_is_content_and_whitespace_between_calls_is_dropped() -> None:
    text = f'Sure.{TC}a[ARGS]{{"x": {{"y": [1]}}}}\n \n{TC}b[ARGS] {{}} \nThat is all.'
    result = assert_chunking_invariant("mistral", text)
    assert result.content == "Sure. \nThat is all."
    assert result.calls == [Call(0, "call_0", "a", '{"x": {"y": [1]}}'), Call(1, "call_1", "b", "{}")]


def test_v11_dotted_and_hyphenated_names() -> None:
    result = assert_chunking_invariant("mistral", f"{TC}mcp.portal:search-docs[ARGS]{{}}")
    assert result.calls == [Call(0, "call_0", "mcp.portal:search-docs", "{}")]


def test_markers_inside_json_strings_are_arguments() -> None:
    arguments = json.dumps({"s": f"{TC}x[ARGS]{{}} and ] [ ARGS", "t": "\\"})
    text = f"{TC}echo[ARGS]{arguments}{TC}[{json.dumps({'name': 'e2', 'arguments': {'s': TC + ']'}})}]"
    result = assert_chunking_invariant("mistral", text)
    assert result.calls == [
        Call(0, "call_0", "echo", arguments),
        Call(1, "call_1", "e2", json.dumps({"s": TC + "]"})),
    ]


def test_calls_inside_reasoning() -> None:
    result = assert_chunking_invariant(
        "mistral", f'Thinking... {TC}search[ARGS]{{"q": "x"}} more thought', channel="reasoning"
    )
    assert (result.reasoning, result.content) == ("Thinking...  more thought", "")
    assert result.calls == [Call(0, "call_0", "search", '{"q": "x"}')]


@pytest.mark.parametrize(
    "prose",
    [
        f"The {TC} token marks tool calls.",
        f"Write {TC} [see the docs] for details.",
        f"{TC}name with spaces[ARGS]{{}}",
        f"{TC}name[ARG]{{}}",
        f"{TC}[1, 2]",
        f"{TC}",
        f"{TC} [",
        "[TOOL_CALL [TOOL_CALLS",
    ],
)
def test_prose_that_mentions_the_marker_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("mistral", prose)
    assert (result.content, result.calls) == (prose, [])


def test_cut_off_inside_v11_arguments_is_unfinished() -> None:
    result = assert_chunking_invariant("mistral", f'Go.{TC}f[ARGS]{{"a": "unfinish')
    assert result.content == "Go."
    assert result.calls == [Call(0, "call_0", "f", '{"a": "unfinish', finished=False)]


def test_cut_off_inside_the_list_is_unfinished() -> None:
    result = assert_chunking_invariant(
        "mistral", f'{TC}[{{"name": "f", "arguments": {{"a": 1}}}}, {{"name": "g", "argu'
    )
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}'), Call(1, "call_1", "g", "", finished=False)]


def test_cut_off_inside_the_name() -> None:
    result = assert_chunking_invariant("mistral", f"{TC}get_wea")
    assert result.calls == [Call(0, "call_0", "get_wea", "", finished=False)]


def test_marker_outside_a_string_cuts_the_call_it_interrupts() -> None:
    result = assert_chunking_invariant("mistral", f'{TC}f[ARGS]{{"a": [1, 2{TC}g[ARGS]{{"b": 3}}')
    assert result.calls == [
        Call(0, "call_0", "f", '{"a": [1, 2', finished=False),
        Call(1, "call_1", "g", '{"b": 3}'),
    ]


def test_malformed_list_object_is_cut_and_the_rest_is_text() -> None:
    result = assert_chunking_invariant("mistral", f'{TC}[{{"name": "f" "arguments": {{}}}}]')
    assert result.calls == [Call(0, "call_0", "f", "", finished=False)]
    assert result.content == '"arguments": {}}]'


def test_arguments_stream_as_they_arrive() -> None:
    rewriter = DelimiterRewriter("mistral", id_factory=str)
    (first,) = rewriter.feed(ChunkResponse(content=f'Hi{TC}f[ARGS]{{"a": "x'))
    assert first.content == "Hi"
    assert first.tool_calls == [ToolCallDelta(0, "0", "f", '{"a": "x')]
    (second,) = rewriter.feed(ChunkResponse(content='yz"}'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='yz"}', finished=True)]
    assert rewriter.finish() == []


def test_mistral_call_id_is_nine_alphanumerics() -> None:
    ids = {mistral_call_id(index) for index in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch("[A-Za-z0-9]{9}", call_id) for call_id in ids)
    result = run("mistral", [f"{TC}f[ARGS]{{}}"], id_factory=mistral_call_id)
    assert re.fullmatch("[A-Za-z0-9]{9}", result.calls[0].call_id or "")


SAMPLE = (
    f'Plan [x]: {TC}read[CALL_ID]abcDEF123[ARGS]{{"path": "a[ARGS]b", "q": "\\"{TC}"}} '
    f'{TC} [{{"name": "write", "arguments": {{"n": [1, 2, {{"k": null}}]}}}}, '
    '{"name": "ls", "arguments": {}}]'
    " Done [TOOL ok."
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("mistral", [SAMPLE])
    assert expected.content == "Plan [x]:  Done [TOOL ok."
    assert expected.calls == [
        Call(0, "abcDEF123", "read", f'{{"path": "a[ARGS]b", "q": "\\"{TC}"}}'),
        Call(1, "call_1", "write", '{"n": [1, 2, {"k": null}]}'),
        Call(2, "call_2", "ls", "{}"),
    ]
    assert run("mistral", pieces_at(SAMPLE, cuts)) == expected


# --- v11 without [ARGS]: [TOOL_CALLS]NAME{...} ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # vLLM tests/tool_parsers/test_mistral_tool_parser.py (test_extract_tool_calls), v11 tokenizer
        (f'{TC}add_this_and_that{{"a": 3.5, "b": 4}}', "", [("add_this_and_that", '{"a": 3.5, "b": 4}')]),
        (
            f'{TC}add{{"a": 3.5, "b": 4}}{TC}multiply{{"a": 3, "b": 6}}',
            "",
            [("add", '{"a": 3.5, "b": 4}'), ("multiply", '{"a": 3, "b": 6}')],
        ),
        (
            f'bla{TC}add_this_and_that{{"a": 3.5, "b": 4}}',
            "bla",
            [("add_this_and_that", '{"a": 3.5, "b": 4}')],
        ),
        (
            f'hi{{hi{TC}bash{{"command": "print(\\"hello world!\\")\\nre.compile(r\'{{}}\')"}}',
            "hi{hi",
            [("bash", '{"command": "print(\\"hello world!\\")\\nre.compile(r\'{}\')"}')],
        ),
        # mixed with the [ARGS] layout, an id, text after the call, a dotted name
        (
            f'{TC}a.b{{"x": [1, {{"y": "}}"}}]}} then {TC}c[CALL_ID]abc123XYZ{{}}',
            " then ",
            [("a.b", '{"x": [1, {"y": "}"}]}'), ("c", "{}")],
        ),
    ],
)
def test_v11_without_args_token(text: str, content: str, calls: list[tuple[str, str]]) -> None:
    result = assert_chunking_invariant("mistral", text)
    assert result.content == content
    assert [(call.name, call.arguments, call.finished) for call in result.calls] == [
        (name, arguments, True) for name, arguments in calls
    ]
    assert all(json.loads(call.arguments) is not None for call in result.calls)


def test_v11_without_args_token_keeps_the_models_id_and_streams() -> None:
    result = assert_chunking_invariant("mistral", f'{TC}f[CALL_ID]a1B2c3D4e{{"q": 1}}')
    assert result.calls == [Call(0, "a1B2c3D4e", "f", '{"q": 1}')]
    rewriter = DelimiterRewriter("mistral", id_factory=str)
    (first,) = rewriter.feed(ChunkResponse(content=f'Hi{TC}f{{"a": "x'))
    assert first.content == "Hi"
    assert first.tool_calls == [ToolCallDelta(0, "0", "f", '{"a": "x')]
    (second,) = rewriter.feed(ChunkResponse(content='yz"}'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='yz"}', finished=True)]


@pytest.mark.parametrize("prose", [f"{TC}name {{}}", f"{TC}name({{}})", f"{TC}name, {{x}}", f"{TC}name{TC}"])
def test_v11_without_args_token_needs_the_brace_right_after_the_name(prose: str) -> None:
    result = assert_chunking_invariant("mistral", prose)
    assert (result.content, result.calls) == (prose, [])


def test_v11_without_args_token_cut_off_is_unfinished() -> None:
    result = assert_chunking_invariant("mistral", f'{TC}f{{"a": [1')
    assert result.calls == [Call(0, "call_0", "f", '{"a": [1', finished=False)]


def test_v11_without_args_token_through_replay(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pipeline.cli.main import main

    path = tmp_path / "mistral.txt"
    path.write_text(f'Sure.{TC}add{{"a": 3.5, "b": 4}}{TC}multiply{{"a": 3, "b": 6}}', encoding="utf-8")
    argv = ["replay", str(path), "--provider", "text", "--tool-format", "mistral", "--output", "jsonl"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    invocations = [(line["name"], line["arguments"]) for line in lines if line["type"] == "TOOL_INVOCATION"]
    assert invocations == [("add", {"a": 3.5, "b": 4}), ("multiply", {"a": 3, "b": 6})]
    assert lines[-1]["finish_reason"] == "tool_calls"
