"""Hunyuan: A13B's ``<tool_calls>[{json}, ...]</tool_calls>`` and HY-V3 / V4's ``<arg_key>`` calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

RAW = FIXTURES / "raw_model_output"

# --- Hunyuan-A13B -----------------------------------------------------------------------------------


def test_a13b_fixture_two_calls_with_nested_arguments() -> None:
    text = (RAW / "vllm-test_hunyuan-a13b_2_tools_nested_args.txt").read_text()
    result = assert_chunking_invariant("hunyuan_a13b", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "San Francisco", "metric": "celsius"}'),
        Call(
            1,
            "call_1",
            "register_user",
            '{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, '
            '"role": null, "passed_test": true, "aliases": ["John", "Johnny"]}',
        ),
    ]


def test_a13b_fixtures_text_before_and_after() -> None:
    result = assert_chunking_invariant(
        "hunyuan_a13b", (RAW / "vllm-test_hunyuan-a13b_text_then_tool.txt").read_text()
    )
    assert (result.content, result.parsed()) == (
        "I will call the tool now. ",
        [("get_weather", {"city": "Boston"})],
    )
    result = assert_chunking_invariant(
        "hunyuan_a13b", (RAW / "vllm-test_hunyuan-a13b_tool_then_text.txt").read_text()
    )
    assert (result.content, result.parsed()) == ("\nThank you!", [("get_weather", {"city": "Seattle"})])


def test_a13b_prose_mentions_and_other_lists_stay_text() -> None:
    for prose in ["Wrap calls in <tool_calls> tags.", "<tool_calls>[1, 2]</tool_calls>", "<tool_calls> [ x"]:
        result = assert_chunking_invariant("hunyuan_a13b", prose)
        assert (result.content, result.calls) == (prose, [])


def test_a13b_marker_in_a_string_cut_off_and_missing_end() -> None:
    text = '<tool_calls>[{"name": "f", "arguments": {"s": "</tool_calls>]"}}, '
    text += '{"name": "g", "arguments": {"k": [1,'
    result = assert_chunking_invariant("hunyuan_a13b", text)
    assert result.calls == [
        Call(0, "call_0", "f", '{"s": "</tool_calls>]"}'),
        Call(1, "call_1", "g", '{"k": [1,', finished=False),
    ]
    text = '<tool_calls>[{"name": "f", "arguments": {}}] ok'
    assert run("hunyuan_a13b", [text]).content == " ok"


def test_a13b_a_call_to_a_tool_not_offered_stays_text() -> None:
    text = '<tool_calls>[{"name": "f", "arguments": {"a": 1}}]</tool_calls>'
    for pieces in ([text], list(text)):
        result = run("hunyuan_a13b", pieces, offered_tools={"g"})
        assert (result.content, result.calls) == (text, [])


A13B = (
    'Hi <b> <tool_calls>\n[{"name": "f", "arguments": {"a": "x \\" ]}"}}, '
    '{"name": "g", "arguments": {}}]\n</tool_calls> bye'
)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(A13B) - 1), max_size=40))
def test_a13b_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("hunyuan_a13b", [A13B])
    assert (expected.content, expected.parsed()) == ("Hi <b>  bye", [("f", {"a": 'x " ]}'}), ("g", {})])
    assert run("hunyuan_a13b", pieces_at(A13B, cuts)) == expected
    assert_same_chunks("hunyuan_a13b", pieces_at(A13B, cuts))
    assert_same_chunks("hunyuan_a13b", pieces_at(A13B, cuts), offered={"f"})


# --- HY-V3 / HY-V4 ---------------------------------------------------------------------------------------


def test_hy_fixture_two_calls_with_newlines() -> None:
    text = (RAW / "vllm-test_hy-v3_2_tools_newlines.txt").read_text()
    result = assert_chunking_invariant("hunyuan", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Beijing", "date": "2026-03-30"}'),
        Call(1, "call_1", "get_weather", '{"city": "Hangzhou", "date": "2026-03-30"}'),
    ]


def test_hy_fixture_text_then_a_call_without_arguments() -> None:
    text = (RAW / "vllm-test_hy-v3_text_then_no_args_tool.txt").read_text()
    result = assert_chunking_invariant("hy_v3", text)
    assert result.content == "Checking."
    assert result.calls == [Call(0, "call_0", "get_current_date", "{}")]


def test_hy_v4_without_tool_sep_typed_by_schema() -> None:
    assert get_format("hy_v4") is get_format("hunyuan")
    text = (
        "<tool_calls><tool_call>f<arg_key>n</arg_key><arg_value>7</arg_value>"
        "<arg_key>s</arg_key><arg_value> 7 </arg_value></tool_call></tool_calls>"
    )
    schema = {"f": {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}}
    result = assert_chunking_invariant("hunyuan", text, tool_schemas=schema)
    assert result.calls == [Call(0, "call_0", "f", '{"n": 7, "s": " 7 "}')]


def test_hy_missing_end_tags_in_reasoning_and_cut_off() -> None:
    text = "think<tool_calls><tool_call>a<tool_sep><arg_key>x</arg_key><arg_value>1<tool_call>b</tool_calls>"
    result = assert_chunking_invariant("hunyuan", text, channel="reasoning")
    assert result.reasoning == "think"
    assert result.parsed() == [("a", {"x": 1}), ("b", {})]
    result = assert_chunking_invariant(
        "hunyuan", "<tool_calls><tool_call>f<tool_sep><arg_key>s</arg_key><arg_value>ab"
    )
    assert result.calls == [Call(0, "call_0", "f", '{"s": "ab', finished=False)]


def test_hy_prose_and_a_section_without_calls_stay_text() -> None:
    for prose in ["Use <tool_call>f</tool_call> here.", "<tool_calls> none </tool_calls> after"]:
        result = assert_chunking_invariant("hunyuan", prose)
        assert (result.content, result.calls) == (prose, [])


def test_detection_tells_the_two_apart() -> None:
    a13b, hy = get_format("hunyuan_a13b"), get_format("hunyuan")
    assert (
        a13b.detect_after("<tool_calls>", "\n[{", False),
        hy.detect_after("<tool_calls>", "\n[{", False),
    ) == (True, False)
    assert (
        a13b.detect_after("<tool_calls>", "<tool_call>f", False),
        hy.detect_after("<tool_calls>", "<tool_call>f", False),
    ) == (False, True)
    assert (
        a13b.detect_after("<tool_calls>", " ", False),
        hy.detect_after("<tool_calls>", "<tool_", False),
    ) == (None, None)
    assert hy.detect_after("<tool_calls>", "<tool_", True) is False


HY = (
    "Hi <b> <tool_calls>\n<tool_call>f<tool_sep>\n<arg_key>a</arg_key>\n"
    '<arg_value>x "</arg_val\\ </arg_value>\n<arg_key>n</arg_key>\n<arg_value>[1, 2]</arg_value>\n'
    "</tool_call>\n<tool_call>g<tool_sep>\n</tool_call>\n"
    "</tool_calls> bye"
)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(HY) - 1), max_size=40))
def test_hy_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("hunyuan", [HY])
    assert (expected.content, expected.parsed()) == (
        "Hi <b>  bye",
        [("f", {"a": 'x "</arg_val\\ ', "n": [1, 2]}), ("g", {})],
    )
    assert run("hunyuan", pieces_at(HY, cuts)) == expected
    assert_same_chunks("hunyuan", pieces_at(HY, cuts))
    assert_same_chunks("hunyuan", pieces_at(HY, cuts), offered={"f"})
