"""Gemma tool calls (``gemma4``, ``functiongemma``): ``call:NAME{key:<|"|>text<|"|>}`` arguments become
JSON as they stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter, get_format
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
Q = '<|"|>'
START, END = "<|tool_call>", "<tool_call|>"


def fixture(name: str) -> str:
    return (RAW / name).read_text()


# --- real outputs ---------------------------------------------------------------------------------------


def test_gemma4_text_then_call() -> None:
    result = assert_chunking_invariant("gemma4", fixture("vllm-test_gemma4_text_then_tool.txt"))
    assert result.content == "Let me check the weather for you. "
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location": "Paris"}')]


def test_gemma4_calls_back_to_back() -> None:
    result = assert_chunking_invariant("gemma4", fixture("vllm-test_gemma4_2_calls_back_to_back.txt"))
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"location": "London"}'),
        Call(1, "call_1", "get_time", '{"location": "London"}'),
    ]


def test_gemma4_nested_object_and_array() -> None:
    result = assert_chunking_invariant("gemma4", fixture("vllm-test_gemma4_nested_object_and_array.txt"))
    assert result.calls == [
        Call(0, "call_0", "complex_function", '{"nested": {"inner": "value"}, "list": ["a", "b"]}')
    ]


def test_gemma4_bare_values() -> None:
    result = assert_chunking_invariant("gemma4", fixture("vllm-test_gemma4_bare_number_and_boolean.txt"))
    assert result.calls == [
        Call(0, "call_0", "set_status", '{"is_active": true, "count": 42, "score": 3.14}')
    ]


def test_functiongemma_two_calls() -> None:
    result = assert_chunking_invariant("functiongemma", fixture("vllm-test_functiongemma_2_calls.txt"))
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"location": "London"}'),
        Call(1, "call_1", "get_time", '{"timezone": "UTC"}'),
    ]


def test_functiongemma_text_then_call() -> None:
    result = assert_chunking_invariant("functiongemma", fixture("vllm-test_functiongemma_text_then_tool.txt"))
    assert result.content == "Let me check the weather for you. "
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location": "Paris"}')]


def test_functiongemma_arguments_without_a_comma_between_them() -> None:
    chunks = json.loads(fixture("vllm-test_functiongemma_stream_no_comma_between_keys.json"))
    result = run("functiongemma", chunks)
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "NYC", "unit": "celsius"}')]
    assert assert_chunking_invariant("functiongemma", "".join(chunks)) == result


# --- streaming ------------------------------------------------------------------------------------------


def test_a_string_streams_as_it_arrives_and_a_bare_value_when_it_ends() -> None:
    rewriter = DelimiterRewriter("gemma4", id_factory=str)
    assert rewriter.feed(ChunkResponse(content=f"{START}call:get_wea")) == []
    (first,) = rewriter.feed(ChunkResponse(content=f"ther{{city:{Q}Pa"))
    assert first.tool_calls == [ToolCallDelta(0, "0", "get_weather", '{"city": "Pa')]
    (second,) = rewriter.feed(ChunkResponse(content='ris "x"<|"'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='ris \\"x\\"')]
    (third,) = rewriter.feed(ChunkResponse(content="|>,days:1"))
    assert third.tool_calls == [ToolCallDelta(0, arguments_delta='", "days": ')]
    (fourth,) = rewriter.feed(ChunkResponse(content=f"0}}{END}"))
    assert fourth.tool_calls == [ToolCallDelta(0, arguments_delta="10}", finished=True)]
    assert rewriter.finish() == []


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        (f"k:{Q}{Q}", {"k": ""}),
        ("k:,j:NULL", {"k": "", "j": None}),
        (f"{Q}3{Q}:{Q}x{Q}", {"3": "x"}),
        ("a:[1,[true,false],{b:-2.5e3}],c:None", {"a": [1, [True, False], {"b": -2500.0}], "c": None}),
        ("word:hello world , n:007", {"word": "hello world", "n": 7}),
        (f"s:{Q}}}{END}{{[{Q}", {"s": f"}}{END}{{["}),
        ("a:[1,2,],", {"a": [1, 2]}),
    ],
)
def test_gemma_argument_syntax(text: str, arguments: dict[str, Any]) -> None:
    result = assert_chunking_invariant("gemma4", f"{START}call:f{{{text}}}{END}")
    assert result.arguments(0) == arguments


# --- prose, truncation, malformed calls -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "prose"),
    [
        ("gemma4", f"the {START} token and {END} end"),
        ("gemma4", f"{START}call: f{{}}"),
        ("gemma4", f"{START}callback"),
        ("gemma4", f"{START}call:f g"),
        ("functiongemma", "<start_function_call> is how a call starts"),
    ],
)
def test_an_opener_without_a_call_is_text(name: str, prose: str) -> None:
    result = assert_chunking_invariant(name, prose)
    assert (result.content, result.calls) == (prose, [])


def test_cut_inside_a_string_and_inside_a_bare_value() -> None:
    assert assert_chunking_invariant("gemma4", f"{START}call:f{{a:{Q}hel").calls == [
        Call(0, "call_0", "f", '{"a": "hel', False)
    ]
    assert assert_chunking_invariant("gemma4", f"{START}call:f{{a:12").calls == [
        Call(0, "call_0", "f", '{"a": 12', False)
    ]


def test_malformed_arguments_end_the_call_and_drop_the_rest_of_it() -> None:
    result = assert_chunking_invariant("gemma4", f"{START}call:f{{a:1]}}{END}after")
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1', False)]
    assert result.content == "after"


def test_a_call_to_a_tool_not_offered_stays_text() -> None:
    secret = f"{START}call:secret{{k:{Q}v{Q}}}{END}"
    text = f"a {secret} b {START}call:weather{{c:1}}{END}"
    result = assert_chunking_invariant("gemma4", text, offered_tools={"weather"})
    assert result.content == f"a {secret} b "
    assert result.calls == [Call(0, "call_0", "weather", '{"c": 1}')]


def test_calls_inside_reasoning() -> None:
    text = f"thinking {START}call:look{{at:{Q}x{Q}}}{END}"
    result = assert_chunking_invariant("gemma4", text, channel="reasoning")
    assert (result.reasoning, result.calls) == ("thinking ", [Call(0, "call_0", "look", '{"at": "x"}')])


# --- values round-tripped at any chunking ---------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=10).filter(lambda text: Q not in text)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.from_regex(r"[a-z_]{1,5}", fullmatch=True), inner, max_size=3)
    ),
    max_leaves=10,
)


def gemma(value: Any) -> str:
    """``value`` written as Gemma writes an argument value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return Q + value + Q
    if isinstance(value, list):
        return "[" + ",".join(gemma(item) for item in value) + "]"
    return "{" + ",".join(f"{key}:{gemma(item)}" for key, item in value.items()) + "}"


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), _VALUES, max_size=4),
    data=st.data(),
)
def test_random_values_become_their_json_at_any_chunking(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    text = f"{START}call:f{gemma(arguments)}{END}{START}call:g{{}}{END}"
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=30))
    result = run("gemma4", pieces_at(text, cuts))
    assert result.arguments(0) == arguments
    assert result.calls[1] == Call(1, "call_1", "g", "{}")
    assert run("gemma4", list(text)) == result


FRAGMENTS: tuple[str, ...] = (
    "call:",
    "f",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    " ",
    "\n",
    "a",
    "1",
    "true",
    "null",
    "<",
    "|",
)
FRAGMENTS += ("-2.5", "city:", "x y", '"', "\\")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_text_of_markers_and_fragments_is_chunking_invariant(data: st.DataObject) -> None:
    """Random mixtures of a format's markers and argument fragments: no exception, the delta protocol
    holds (``collect`` checks it), and the result does not depend on the chunking."""
    name = data.draw(st.sampled_from(["gemma4", "functiongemma"]))
    markers = get_format(name).markers
    text = "".join(data.draw(st.lists(st.sampled_from(markers + FRAGMENTS), min_size=1, max_size=30)))
    cuts = data.draw(st.sets(st.integers(min_value=1, max_value=max(1, len(text) - 1)), max_size=12))
    whole = run(name, [text])
    assert run(name, pieces_at(text, cuts)) == whole
    assert run(name, list(text)) == whole
