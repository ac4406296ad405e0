"""Seed-OSS ``<seed:tool_call><function=NAME><parameter=K>V</parameter></function></seed:tool_call>``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from pipeline.models import ChunkResponse
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

RAW = FIXTURES / "raw_model_output"
SCHEMA = {"get_weather": {"properties": {"location": {"type": "string"}, "unit": {"type": "string"}}}}


def block(name: str, **params: str) -> str:
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in params.items())
    return f"<seed:tool_call>\n<function={name}>\n{body}</function>\n</seed:tool_call>"


def test_fixture_single_call() -> None:
    text = (RAW / "vllm-test_seed-oss_single_tool.txt").read_text()
    result = assert_chunking_invariant("seed_oss", text, tool_schemas=SCHEMA)
    assert result.content == ""
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location": "Barcelona, Spain"}')]


def test_fixture_thinking_then_call() -> None:
    text = (RAW / "vllm-test_seed-oss_think_budget_then_tool.txt").read_text()
    result = assert_chunking_invariant("seed_oss", text)
    thinking = text[: text.index("<seed:tool_call>")]
    assert result.content == thinking
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location": "Barcelona, Spain"}')]


def test_several_calls_typed_without_a_schema_and_text_between() -> None:
    text = (
        "Let me check."
        + block("get_weather", location="Tokyo", days="3")
        + "\n"
        + block("search", query="\nramen\n", filters='{"open": true}')
        + " Done."
    )
    result = assert_chunking_invariant("seed_oss", text)
    assert result.content == "Let me check.\n Done."
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"location": "Tokyo", "days": 3}'),
        Call(1, "call_1", "search", '{"query": "ramen", "filters": {"open": true}}'),
    ]


def test_two_functions_in_one_block_and_missing_end_tags() -> None:
    text = (
        "<seed:tool_call><function=a><parameter=x>1</function>"
        "<function=b><parameter=y>two</seed:tool_call>after"
    )
    result = assert_chunking_invariant("seed_oss", text)
    assert result.content == "after"
    assert result.parsed() == [("a", {"x": 1}), ("b", {"y": "two"})]


def test_no_parameters_in_reasoning() -> None:
    text = "thinking <seed:tool_call>\n<function=now>\n</function>\n</seed:tool_call> more"
    result = assert_chunking_invariant("seed_oss", text, channel="reasoning")
    assert result.reasoning == "thinking  more"
    assert result.calls == [Call(0, "call_0", "now", "{}")]


def test_prose_mentions_outside_a_block_stay_text() -> None:
    for prose in ["Use <function=get_weather> with <parameter=location>.", "a </seed:tool_call> b"]:
        result = assert_chunking_invariant("seed_oss", prose)
        assert (result.content, result.calls) == (prose, [])


def test_a_block_with_only_text_is_text() -> None:
    text = "<seed:tool_call>not a call</seed:tool_call> ok"
    result = assert_chunking_invariant("seed_oss", text)
    assert (result.content, result.calls) == (text, [])


def test_string_values_stream_before_their_end() -> None:
    rewriter = DelimiterRewriter("seed_oss", id_factory=str, tool_schemas=SCHEMA)
    head = '<seed:tool_call><function=get_weather><parameter=location>Par"is'
    (chunk,) = rewriter.feed(ChunkResponse(content=head))
    assert chunk.tool_calls is not None
    assert "".join(d.arguments_delta or "" for d in chunk.tool_calls) == '{"location": "Par\\"is'


def test_cut_off_in_a_value_and_in_the_name() -> None:
    result = assert_chunking_invariant("seed_oss", "<seed:tool_call>\n<function=f>\n<parameter=s>abc")
    assert result.calls == [Call(0, "call_0", "f", '{"s": "abc', finished=False)]
    result = assert_chunking_invariant("seed_oss", "<seed:tool_call>\n<function=get_wea")
    assert (result.content, result.calls) == ("", [Call(0, "call_0", "get_wea", "", finished=False)])


def test_a_call_to_a_tool_not_offered_stays_text() -> None:
    text = "Hi " + block("delete_all", really="yes") + block("get_weather", location="Paris")
    for pieces in ([text], list(text)):
        result = run("seed_oss", pieces, offered_tools={"get_weather"})
        assert result.content == "Hi " + block("delete_all", really="yes")
        assert result.parsed() == [("get_weather", {"location": "Paris"})]


SAMPLE = "Hi " + block("f", a='x "</para\\ <b>', n="[1, 2]") + " | " + block("g")


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("seed_oss", [SAMPLE])
    assert expected.parsed() == [("f", {"a": 'x "</para\\ <b>', "n": [1, 2]}), ("g", {})]
    assert run("seed_oss", pieces_at(SAMPLE, cuts)) == expected


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_fast_paths_equal_the_states(cuts: set[int]) -> None:
    assert_same_chunks("seed_oss", pieces_at(SAMPLE, cuts))
    assert_same_chunks("seed_oss", pieces_at(SAMPLE, cuts), offered={"f"})
