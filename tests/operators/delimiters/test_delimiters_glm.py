"""GLM-4.5 / GLM-4.7 ``<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>`` calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
BEIJING = '{"city": "Beijing", "date": "2025-08-01"}'


def test_fixture_no_args_tool() -> None:
    result = assert_chunking_invariant("glm45", (RAW / "vllm-test_glm-4.5_no_args_tool.txt").read_text())
    assert result.content == ""
    assert result.calls == [Call(0, "call_0", "get_current_time", "{}")]


def test_fixture_text_tool_text_tool() -> None:
    result = assert_chunking_invariant(
        "glm45", (RAW / "vllm-test_glm-4.5_text_tool_text_tool.txt").read_text()
    )
    assert result.content == (
        "I will help you get the weather info.\n\n"
        "\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n"
    )
    assert result.calls == [
        Call(0, "call_0", "get_weather", BEIJING),
        Call(1, "call_1", "get_weather", '{"city": "Shanghai", "date": "2025-08-01"}'),
    ]


def test_fixture_think_text_then_tool() -> None:
    text = (RAW / "vllm-test_glm-4.5_think_text_then_tool_arg_key_value.txt").read_text()
    result = assert_chunking_invariant("glm45", text)
    assert result.content == "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n"
    assert result.calls == [Call(0, "call_0", "get_weather", BEIJING)]


def test_glm47_without_newlines() -> None:
    text = (
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>北京</arg_value>"
        "<arg_key>date</arg_key><arg_value>2024-06-27</arg_value></tool_call>"
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>上海</arg_value></tool_call>"
    )
    result = assert_chunking_invariant("glm47", text)
    assert result.content == ""
    assert result.parsed() == [
        ("get_weather", {"city": "北京", "date": "2024-06-27"}),
        ("get_weather", {"city": "上海"}),
    ]


def test_values_are_stripped_and_typed() -> None:
    text = (
        "<tool_call>f\n<arg_key> n </arg_key>\n<arg_value>\n 5 \n</arg_value>\n"
        "<arg_key>s</arg_key><arg_value>  two words \n</arg_value>"
        '<arg_key>l</arg_key><arg_value>[1, {"a": false}]</arg_value></tool_call>'
    )
    result = assert_chunking_invariant("glm45", text)
    assert result.parsed() == [("f", {"n": 5, "s": "two words", "l": [1, {"a": False}]})]
    schema = {"properties": {"n": {"type": "string"}}}
    result = assert_chunking_invariant("glm45", text, tool_schemas={"f": schema})
    assert result.arguments(0) == {"n": "5", "s": "two words", "l": '[1, {"a": false}]'}


def test_prose_mentioning_the_tag_stays_text() -> None:
    for prose in [
        "Use the <tool_call> tag.",
        "<tool_call>name and more",
        "<tool_call>a>b</tool_call>",
        "<tool_call>x\ny",
    ]:
        result = assert_chunking_invariant("glm45", prose)
        assert (result.content, result.calls) == (prose, [])


def test_calls_inside_reasoning_and_cut_off() -> None:
    text = "hmm <tool_call>search<arg_key>q</arg_key><arg_value>cats and do"
    result = assert_chunking_invariant("glm47", text, channel="reasoning")
    assert result.reasoning == "hmm "
    assert result.calls == [Call(0, "call_0", "search", '{"q": "cats and do', finished=False)]


def test_key_without_value_is_skipped() -> None:
    text = "<tool_call>f<arg_key>a</arg_key><arg_key>b</arg_key><arg_value>1</arg_value></tool_call>"
    assert assert_chunking_invariant("glm47", text).parsed() == [("f", {"b": 1})]


SAMPLE = (
    'Text <tool_call>a\n<arg_key>s</arg_key>\n<arg_value>x </tool_call> "y" \\</arg_value>\n'
    "<arg_key>n</arg_key>\n<arg_value>-3</arg_value>\n</tool_call>\n\n<tool_call>b</tool_call> tail"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("glm45", [SAMPLE])
    assert expected.content == "Text  tail"
    assert expected.parsed() == [("a", {"s": 'x </tool_call> "y" \\', "n": -3}), ("b", {})]
    assert run("glm45", pieces_at(SAMPLE, cuts)) == expected
