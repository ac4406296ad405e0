"""Kimi-K2 delimiter tool calls: fixtures, chunking invariance, reasoning, cut-off streams, id variants."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters.formats.kimi import kimi_tool_name
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

RAW = FIXTURES / "raw_model_output"
SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def kimi_call(call_id: str, arguments: str) -> str:
    return f"{CB}{call_id}{AB}{arguments}{CE}"


def test_fixture_text_then_single_tool() -> None:
    result = assert_chunking_invariant(
        "kimi_k2", (RAW / "vllm-test_kimi-k2_text_then_single_tool.txt").read_text()
    )
    assert result.content == "I'll check. "
    assert result.calls == [Call(0, "functions.get_weather:0", "get_weather", '{"city": "Beijing"}')]


def test_fixture_text_then_3_parallel_tools() -> None:
    text = (RAW / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt").read_text()
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "Multiple tasks. "
    assert [(call.call_id, call.finished) for call in result.calls] == [
        ("functions.get_weather:0", True),
        ("functions.get_news:1", True),
        ("functions.send_email:2", True),
    ]
    assert result.parsed() == [
        ("get_weather", {"city": "New York"}),
        ("get_news", {"topic": "technology"}),
        ("send_email", {"to": "user@example.com", "subject": "Daily Update"}),
    ]


def test_fixture_multiline_json_args() -> None:
    result = assert_chunking_invariant(
        "kimi_k2", (RAW / "vllm-test_kimi-k2_multiline_json_args.txt").read_text()
    )
    assert result.content == "Formatted. "
    assert result.calls == [
        Call(0, "functions.process_data:0", "process_data", '{\n  "name": "test",\n  "value": 123\n}')
    ]


def test_fixture_stream_deltas_2_tools() -> None:
    deltas = json.loads((RAW / "vllm-test_kimi-k2_stream_deltas_2_tools.json").read_text())
    result = run("kimi_k2", deltas)
    assert result == run("kimi_k2", ["".join(deltas)])
    assert result.content == "Compare weather. "
    assert result.calls == [
        Call(0, "functions.get_weather:0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "functions.get_weather:1", "get_weather", '{"city": "NYC"}'),
    ]


def test_arguments_stream_as_they_arrive() -> None:
    """Each argument piece is emitted in the chunk that brings it, not at the end of the call."""
    from operators.delimiters import DelimiterRewriter
    from pipeline.models import ChunkResponse, ToolCallDelta

    rewriter = DelimiterRewriter("kimi_k2", id_factory=str)
    (first,) = rewriter.feed(ChunkResponse(content=f"Hi{SB}{CB}functions.f:0{AB}" + '{"a": "x'))
    assert first.content == "Hi"
    (delta,) = first.tool_calls or []
    assert (delta.index, delta.call_id, delta.name, delta.arguments_delta, delta.finished) == (
        0,
        "functions.f:0",
        "f",
        '{"a": "x',
        False,
    )
    (second,) = rewriter.feed(ChunkResponse(content='yz"}'))
    assert second.tool_calls is not None
    assert [(d.arguments_delta, d.finished) for d in second.tool_calls] == [('yz"}', False)]
    third, fourth = rewriter.feed(ChunkResponse(content=f"{CE}{SE}Bye"))
    assert (third.content, third.tool_calls) == ("", [ToolCallDelta(0, finished=True)])
    assert (fourth.content, fourth.tool_calls) == ("Bye", None)
    assert rewriter.finish() == []


def test_spaces_and_newlines_between_markers() -> None:
    text = f'Sure.{SB} {CB}\nfunctions.get_weather:0 {AB} {{"city": "Beijing"}} {CE} {SE} Done.'
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "Sure. Done."
    assert result.calls == [Call(0, "functions.get_weather:0", "get_weather", '{"city": "Beijing"}')]


def test_calls_inside_reasoning() -> None:
    """K2.5 opens its tool section inside the reasoning (before ``</think>``)."""
    call = kimi_call("functions.search:0", '{"q": "x"}')
    text = f"Let me look.{SB}{call}{SE}"
    result = assert_chunking_invariant("kimi_k2", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("Let me look.", "")
    assert result.calls == [Call(0, "functions.search:0", "search", '{"q": "x"}')]


def test_reasoning_and_content_lex_independently() -> None:
    from pipeline.models import ChunkResponse

    chunks = [
        ChunkResponse(reasoning=f"think {SB}{CB}functions.a:0{AB}" + '{"x"'),
        ChunkResponse(content="visible <|tool_calls_sec"),
        ChunkResponse(
            reasoning=f": 1}}{CE}{SE} more", content=f"tion_begin|>{kimi_call('functions.b:1', '{}')}"
        ),
    ]
    result = run("kimi_k2", chunks)
    assert (result.reasoning, result.content) == ("think  more", "visible ")
    assert result.calls == [
        Call(0, "functions.a:0", "a", '{"x": 1}'),
        Call(1, "functions.b:1", "b", "{}", finished=True),
    ]


def test_several_calls_in_one_chunk_keep_order_with_text() -> None:
    from operators.delimiters import DelimiterRewriter
    from pipeline.models import ChunkResponse

    text = f"A{SB}{kimi_call('functions.f:0', '{}')}{SE}B{SB}{kimi_call('functions.g:1', '[1]')}{SE}C"
    chunks = DelimiterRewriter("kimi_k2", id_factory=str).feed(ChunkResponse(content=text))
    assert [(chunk.content, [(d.index, d.name) for d in chunk.tool_calls or ()]) for chunk in chunks] == [
        ("A", [(0, "f")]),
        ("B", [(1, "g")]),
        ("C", []),
    ]


def test_markers_inside_json_strings_are_arguments() -> None:
    arguments = json.dumps({"text": f"write {CE} and {SE} and {CB} here", "n": [1, {"k": "}"}]})
    text = f"x{SB}{kimi_call('functions.echo:0', arguments)}{SE}y"
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "xy"
    assert result.calls == [Call(0, "functions.echo:0", "echo", arguments)]


def test_escaped_quote_and_backslash_in_arguments() -> None:
    arguments = json.dumps({"path": "C:\\dir\\", "quote": f'say "{CE}"'})
    result = assert_chunking_invariant("kimi_k2", f"{SB}{kimi_call('functions.f:0', arguments)}{SE}")
    assert result.calls[0].arguments == arguments
    assert result.arguments(0) == {"path": "C:\\dir\\", "quote": f'say "{CE}"'}


def test_prose_with_angle_brackets_and_partial_markers_is_text() -> None:
    text = "a <| b <|tool_call x <|tool_calls_section_beg <tool_call> 1 < 2 |>"
    result = assert_chunking_invariant("kimi_k2", text)
    assert result == run("kimi_k2", [text])
    assert (result.content, result.calls) == (text, [])


def test_cut_off_inside_arguments_is_not_finished() -> None:
    result = assert_chunking_invariant("kimi_k2", f"Go.{SB}{CB}functions.f:0{AB}" + '{"a": "unfinish')
    assert result.content == "Go."
    assert result.calls == [Call(0, "functions.f:0", "f", '{"a": "unfinish', finished=False)]


def test_section_that_never_closes_finishes_complete_json() -> None:
    """The end marker is optional (max_tokens right after the call): complete JSON counts as finished."""
    result = assert_chunking_invariant("kimi_k2", f"{SB}{CB}functions.f:0{AB}" + '{"a": 1} ')
    assert result.calls == [Call(0, "functions.f:0", "f", '{"a": 1}', finished=True)]


def test_cut_off_in_header_gives_an_unfinished_call() -> None:
    result = assert_chunking_invariant("kimi_k2", f"x{SB}{CB}functions.get_wea")
    assert result.content == "x"
    assert result.calls == [Call(0, "functions.get_wea", "get_wea", "", finished=False)]


def test_cut_off_right_after_section_begin_keeps_the_text() -> None:
    result = assert_chunking_invariant("kimi_k2", f"Let me look.{SB}get_weather")
    assert (result.content, result.calls) == (f"Let me look.{SB}get_weather", [])


def test_empty_section_is_dropped() -> None:
    result = assert_chunking_invariant("kimi_k2", f"a{SB} \n{SE}b")
    assert (result.content, result.calls) == ("ab", [])


def test_missing_call_end_before_next_call() -> None:
    """Speculative decoding bundles: the next call begins without ``<|tool_call_end|>``."""
    text = f"{SB}{CB}functions.a:0{AB}{{}}{CB}functions.b:1{AB}" + '{"x": [1]}' + f"{CE}{SE}"
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.calls == [
        Call(0, "functions.a:0", "a", "{}", finished=True),
        Call(1, "functions.b:1", "b", '{"x": [1]}', finished=True),
    ]


def test_empty_arguments_become_an_empty_object() -> None:
    result = assert_chunking_invariant("kimi_k2", f"{SB}{CB}functions.now:0{AB}  {CE}{SE}")
    assert result.calls == [Call(0, "functions.now:0", "now", "{}")]


def test_singular_section_markers_and_call_without_section() -> None:
    text = f"<|tool_call_section_begin|>{kimi_call('functions.a:0', '{}')}<|tool_call_section_end|>t"
    text += kimi_call("functions.b:1", "{}")
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "t"
    assert [call.name for call in result.calls] == ["a", "b"]


def test_text_between_calls_passes_through() -> None:
    text = f"{SB}{kimi_call('functions.a:0', '{}')} note {kimi_call('functions.b:1', '{}')}{SE}"
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "note "
    assert [call.name for call in result.calls] == ["a", "b"]


def test_newline_inside_id_region_and_hyphenated_name() -> None:
    text = f"{SB}{CB}\nfunctions.mcp__portal__search-documents:0\n{AB}{{}}{CE}{SE}"
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.calls == [
        Call(0, "functions.mcp__portal__search-documents:0", "mcp__portal__search-documents", "{}")
    ]


def test_header_longer_than_the_limit_is_text() -> None:
    header = "x" * 5000
    result = run("kimi_k2", [f"{SB}{CB}{header}{AB}{{}}{CE}{SE}"])
    assert result.calls == []
    assert result.content == f"{CB}{header}{AB}{{}}{CE}"


@pytest.mark.parametrize(
    ("call_id", "name"),
    [
        ("functions.get_weather:0", "get_weather"),
        ("get_weather:0", "get_weather"),
        ("functions_get_weather_1", "get_weather"),
        ("functionsexec5", "exec"),
        ("functions.bash30", "bash"),
        ("functions(file_read):2.0", "file_read"),
        ("functions.browser.search:0", "browser.search"),
        ("functions.get_v2:3", "get_v2"),
        ("functions.mcp__portal__search-documents:0", "mcp__portal__search-documents"),
        ("call_abc123", "call_abc123"),
        ("3", "3"),
    ],
)
def test_tool_name_from_call_id(call_id: str, name: str) -> None:
    assert kimi_tool_name(call_id) == name


def test_tool_name_prefers_known_tools() -> None:
    assert kimi_tool_name("functions.bash30") == "bash"
    assert kimi_tool_name("functions.bash30", frozenset({"bash30"})) == "bash30"


def test_index_counts_after_api_calls_and_finish_reason_is_rewritten() -> None:
    from pipeline.models import ChunkResponse, ToolCallDelta

    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "api_0", "api", "{}", True)]),
        ChunkResponse(content=f"{SB}{kimi_call('functions.f:7', '{}')}{SE}", finish_reason="stop"),
    ]
    result = run("kimi_k2", chunks)
    assert [(call.index, call.call_id) for call in result.calls] == [(0, "api_0"), (1, "functions.f:7")]
    assert result.finish_reasons == ["tool_calls"]


SAMPLE = (
    f'Plan: call two tools.{SB} {CB}functions.read:0 {AB} {{"path": "a<|b|>.txt", "q": "\\"{CE}\\""}} {CE}'
    f"{CB}functions.write:1{AB}" + '{"n": [1, 2, {"k": null}]}' + f"{CE}{SE} Done <| ok."
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    assert run("kimi_k2", pieces_at(SAMPLE, cuts)) == run("kimi_k2", [SAMPLE])


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_in_reasoning_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("kimi_k2", [SAMPLE], channel="reasoning")
    assert expected.reasoning == "Plan: call two tools. Done <| ok."
    assert run("kimi_k2", pieces_at(SAMPLE, cuts), channel="reasoning") == expected


# --- K2.5: fenced JSON without <|tool_call_argument_begin|> ---------------------------------------------


def test_k25_fenced_json_calls_fixture() -> None:
    text = (RAW / "kimi-tool-parser-test_kimi-k2.5_2_fenced_json_calls.txt").read_text()
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "Let me search for that.\n"
    assert result.calls == [
        Call(0, "functions.web_search", "web_search", '{"query": "first query"}'),
        Call(1, "functions.web_browse", "web_browse", '{"url": "https://example.com"}'),
    ]


def test_k25_argument_end_marker_fixture() -> None:
    text = (RAW / "kimi-tool-parser-test_kimi-k2.5_argument_end_marker.txt").read_text()
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.content == "\n"
    assert result.calls == [Call(0, "functions.web_search:0", "web_search", '{"query": "weather today"}')]


def test_k25_fence_inside_a_string_indexed_id_cut_off_and_unfinished() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.run:3\n```json\n"
        '{"code": "```python\\nx```"}\n```\n<|tool_call_end|>'
        '<|tool_call_begin|>functions.ls\n```\n{"a": [1, '
    )
    result = assert_chunking_invariant("kimi_k2", text)
    assert result.calls == [
        Call(0, "functions.run:3", "run", '{"code": "```python\\nx```"}'),
        Call(1, "functions.ls", "ls", '{"a": [1,', finished=False),
    ]


FENCED = (
    "Hi <b> | <|tool_calls_section_begin|>\n<|tool_call_begin|>functions.f\n```json\n"
    '{"a": "x ``` \\" <|tool_call_end|>"}\n```\n<|tool_call_end|>\n<|tool_calls_section_end|> bye'
)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(FENCED) - 1), max_size=40))
def test_k25_fenced_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("kimi_k2", [FENCED])
    assert (expected.content, expected.parsed()) == (
        "Hi <b> |  bye",
        [("f", {"a": 'x ``` " <|tool_call_end|>'})],
    )
    assert run("kimi_k2", pieces_at(FENCED, cuts)) == expected
    assert_same_chunks("kimi_k2", pieces_at(FENCED, cuts))
    assert_same_chunks("kimi_k2", pieces_at(FENCED, cuts), offered={"f"})


# --- Kimi-K3 XTML ---------------------------------------------------------------------------------------

K3_RESPONSE = "<|open|>response<|sep|>Let me run it.<|close|>response<|sep|>"


def k3_call(tool: str, **arguments: tuple[str, str]) -> str:
    body = "".join(
        f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'
        for key, (kind, value) in arguments.items()
    )
    return f'<|open|>call tool="{tool}" index="1"<|sep|>{body}<|close|>call<|sep|>'


def test_k3_fixture_tools_channel() -> None:
    text = (RAW / "vllm-docstring_kimi-k3_xtml_tools_channel.txt").read_text()
    result = assert_chunking_invariant("kimi_k3", K3_RESPONSE + text + "<|close|>message<|sep|>")
    assert result.content == "Let me run it."
    assert result.calls == [Call(0, "call_0", "python", '{"code": "print(1)", "opts": {"a":1}}')]


def test_k3_types_escaped_attributes_and_several_calls() -> None:
    text = (
        "Hi<|open|>tools<|sep|>"
        + k3_call("a&amp;b", s=("string", ' 7 "x"\n'), n=("integer", "7"), bad=("object", "{oops"))
        + "\n"
        + k3_call("now")
        + "<|close|>tools<|sep|>"
    )
    result = assert_chunking_invariant("kimi_k3", text)
    assert result.content == "Hi"
    assert result.calls == [
        Call(0, "call_0", "a&b", '{"s": " 7 \\"x\\"\\n", "n": 7, "bad": "{oops"}'),
        Call(1, "call_1", "now", "{}"),
    ]


def test_k3_in_reasoning_cut_off_and_prose() -> None:
    text = '<|open|>tools<|sep|><|open|>call tool="f"<|sep|><|open|>argument key="s" type="string"<|sep|>ab'
    result = assert_chunking_invariant("kimi_k3", text, channel="reasoning")
    assert result.calls == [Call(0, "call_0", "f", '{"s": "ab', finished=False)]
    prose = 'Call tools with <|open|>call tool="x"<|sep|> inside a tools channel.'
    assert assert_chunking_invariant("kimi_k3", prose).content == prose


def test_k3_a_call_to_a_tool_not_offered_stays_text() -> None:
    text = "<|open|>tools<|sep|>" + k3_call("rm", p=("string", "/")) + k3_call("f") + "<|close|>tools<|sep|>"
    result = run("kimi_k3", list(text), offered_tools={"f"})
    assert result.parsed() == [("f", {})]
    assert 'tool="rm"' in result.content


K3 = (
    "Hi <b> | <|open|>tools<|sep|>\n"
    + k3_call("f", a=("string", 'x "<|close|>argum\\ '), n=("array", "[1, 2]"))
    + "\n<|close|>tools<|sep|> bye<|close|>message<|sep|>"
)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(K3) - 1), max_size=40))
def test_k3_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("kimi_k3", [K3])
    assert (expected.content, expected.parsed()) == (
        "Hi <b> |  bye",
        [("f", {"a": 'x "<|close|>argum\\ ', "n": [1, 2]})],
    )
    assert run("kimi_k3", pieces_at(K3, cuts)) == expected
    assert_same_chunks("kimi_k3", pieces_at(K3, cuts))
    assert_same_chunks("kimi_k3", pieces_at(K3, cuts), offered={"f"})
