"""Llama 3.x JSON tool calls, bare or after ``<|python_tag|>``, and the code-interpreter form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

TAG, EOM, EOT = "<|python_tag|>", "<|eom_id|>", "<|eot_id|>"


def test_tagged_parallel_calls() -> None:
    text = (
        f'{TAG}{{"name": "get_weather", "parameters": {{"city": "Tokyo"}}}}; '
        '{"name": "get_time", "parameters": {"tz": "JST"}}'
    )
    result = assert_chunking_invariant("llama3_json", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"tz": "JST"}'),
    ]


def test_bare_call_at_the_start_with_separators_and_stop_token() -> None:
    text = '\n {"name": "a", "parameters": {"x": [1, {"y": null}]}};\n{"name": "b", "parameters": {}}' + EOT
    result = assert_chunking_invariant("llama3_json", text)
    assert result.content == ""
    assert result.calls == [Call(0, "call_0", "a", '{"x": [1, {"y": null}]}'), Call(1, "call_1", "b", "{}")]


def test_type_key_first_and_arguments_key() -> None:
    text = '{"type": "function", "name": "f", "arguments": {"q": "x"}}'
    result = assert_chunking_invariant("llama3_json", text)
    assert result.calls == [Call(0, "call_0", "f", '{"q": "x"}')]


def test_stringified_parameters_are_decoded() -> None:
    inner = json.dumps({"q": 'say "hi" \\ ü'})
    result = assert_chunking_invariant("llama3_json", json.dumps({"name": "f", "parameters": inner}))
    assert result.calls == [Call(0, "call_0", "f", inner)]


def test_text_after_the_calls_is_content() -> None:
    text = f'{TAG}{{"name": "f", "parameters": {{"a": 1}}}}{EOM}Waiting for the result.'
    result = assert_chunking_invariant("llama3_json", text)
    assert result.content == "Waiting for the result."
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]
    bare = assert_chunking_invariant("llama3_json", '{"name": "f", "parameters": {}}; and then prose')
    assert bare.content == "; and then prose"


def test_tagged_call_after_prose() -> None:
    result = assert_chunking_invariant(
        "llama3_json", f'Let me search. {TAG} {{"name": "s", "parameters": {{}}}}'
    )
    assert result.content == "Let me search. "
    assert result.calls == [Call(0, "call_0", "s", "{}")]


@pytest.mark.parametrize(
    "prose",
    [
        'Here is JSON: {"name": "Bob", "parameters": {}} inline.',
        '{"nam": 1} is not a call',
        '{"title": "x"}',
        "{ name: 1 }",
        '{"name" missing colon',
        "{",
        f"no tag {EOM} here",
    ],
)
def test_json_in_prose_or_other_objects_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("llama3_json", prose)
    assert (result.content, result.calls) == (prose, [])


def test_leading_whitespace_is_kept_when_no_call_follows() -> None:
    result = assert_chunking_invariant("llama3_json", "  \n Hello")
    assert result.content == "  \n Hello"


def test_calls_inside_reasoning() -> None:
    result = assert_chunking_invariant(
        "llama3_json",
        f'I should look. {TAG}{{"name": "look", "parameters": {{"at": "x"}}}}',
        channel="reasoning",
    )
    assert (result.reasoning, result.content) == ("I should look. ", "")
    assert result.calls == [Call(0, "call_0", "look", '{"at": "x"}')]


def test_markers_inside_json_strings_are_arguments() -> None:
    arguments = json.dumps({"s": f"{EOM} {TAG} {EOT} }}; {{", "n": "\\"})
    text = f'{TAG}{{"name": "echo", "parameters": {arguments}}}{EOM}'
    result = assert_chunking_invariant("llama3_json", text)
    assert result.calls == [Call(0, "call_0", "echo", arguments)]


def test_code_after_the_tag_is_a_custom_python_call() -> None:
    code = 'import math\nprint(math.sqrt(2), "{}")'
    text = f"{TAG}{code}{EOM}"
    result = assert_chunking_invariant("llama3_json", text)
    assert result.calls == [Call(0, "call_0", "python", code)]
    rewriter = DelimiterRewriter("llama3_json", id_factory=str)
    chunks = [*rewriter.feed(ChunkResponse(content=text)), *rewriter.finish()]
    assert {delta.kind for chunk in chunks for delta in chunk.tool_calls or ()} == {"custom"}


def test_builtin_tool_call_without_stop_token() -> None:
    result = assert_chunking_invariant("llama3_json", f'{TAG}brave_search.call(query="weather")')
    assert result.calls == [Call(0, "call_0", "python", 'brave_search.call(query="weather")', finished=True)]


def test_lone_tag_at_the_end_is_text() -> None:
    result = assert_chunking_invariant("llama3_json", f"x {TAG} ")
    assert (result.content, result.calls) == (f"x {TAG} ", [])


def test_cut_off_inside_arguments_is_unfinished() -> None:
    result = assert_chunking_invariant("llama3_json", '{"name": "f", "parameters": {"a": [1')
    assert result.calls == [Call(0, "call_0", "f", '{"a": [1', finished=False)]


def test_cut_off_inside_the_name() -> None:
    result = assert_chunking_invariant("llama3_json", '{"name": "get_wea')
    assert result.calls == [Call(0, "call_0", "get_wea", "", finished=False)]


def test_marker_outside_a_string_cuts_the_call() -> None:
    result = assert_chunking_invariant("llama3_json", f'{TAG}{{"name": "f", "parameters": {{"a": 1{EOM}after')
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1', finished=False)]
    assert result.content == "after"


def test_malformed_wrapper_ends_the_call_and_the_rest_is_text() -> None:
    result = assert_chunking_invariant("llama3_json", '{"name": "f" "parameters": {}}')
    assert result.calls == [Call(0, "call_0", "f", "", finished=False)]
    assert result.content == '"parameters": {}}'


def test_arguments_stream_as_they_arrive() -> None:
    rewriter = DelimiterRewriter("llama3_json", id_factory=str)
    assert rewriter.feed(ChunkResponse(content='{"na')) == []
    (first,) = rewriter.feed(ChunkResponse(content='me": "f", "parameters": {"a": "x'))
    assert first.tool_calls == [ToolCallDelta(0, "0", "f", '{"a": "x')]
    (second,) = rewriter.feed(ChunkResponse(content='yz"}}'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='yz"}', finished=True)]
    assert rewriter.finish() == []


SAMPLE = (
    f'{{"type": "function", "name": "read", "parameters": {{"path": "a{EOM}b", "q": "\\"}}"}}}} ;\n'
    f'{{"name": "write", "parameters": "{{\\"n\\": [1, 2]}}"}}{EOT}Then {{"name": "x"}} text '
    f"{TAG}print('{{')\n{EOM}"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("llama3_json", [SAMPLE])
    assert expected.content == 'Then {"name": "x"} text '
    assert expected.calls == [
        Call(0, "call_0", "read", f'{{"path": "a{EOM}b", "q": "\\"}}"}}'),
        Call(1, "call_1", "write", '{"n": [1, 2]}'),
        Call(2, "call_2", "python", "print('{')\n"),
    ]
    assert run("llama3_json", pieces_at(SAMPLE, cuts)) == expected
