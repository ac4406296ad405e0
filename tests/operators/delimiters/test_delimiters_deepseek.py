"""DeepSeek V3 / V3.1 / V3.2 DSML delimiter tool calls."""

# ruff: noqa: RUF001  (the test strings hold the real full-width delimiters)
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, SEP, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
D = "｜DSML｜"


def test_code_points() -> None:
    assert [hex(ord(char)) for char in CALL_BEGIN if ord(char) > 127] == [
        "0xff5c",
        "0x2581",
        "0x2581",
        "0xff5c",
    ]


# --- V3.1 -----------------------------------------------------------------------------------------


def test_v31_fixture_prefix_2_tools_suffix() -> None:
    text = (RAW / "vllm-test_deepseek-v3.1_prefix_2_tools_suffix.txt").read_text()
    result = assert_chunking_invariant("deepseek_v31", text)
    assert result.content == "some prefix text some suffix text"
    assert result.calls == [Call(0, "call_0", "foo", '{"x":1}'), Call(1, "call_1", "bar", '{"y":2}')]


def test_v31_fixture_truncated_block_is_kept_as_content() -> None:
    text = (RAW / "vllm-test_deepseek-v3.1_truncated_block.txt").read_text()
    result = assert_chunking_invariant("deepseek_v31", text)
    assert (result.content, result.calls) == (f"Let me look that up.{CALLS_BEGIN}get_weather", [])


def test_v31_in_reasoning_with_marker_in_string_and_cut_off() -> None:
    arguments = json.dumps({"note": f"ends with {CALL_END}{CALLS_END}"})
    text = f"think{CALLS_BEGIN}{CALL_BEGIN}a{SEP}{arguments}{CALL_END}\n{CALL_BEGIN}b{SEP}" + '{"k": [1, '
    result = assert_chunking_invariant("deepseek_v31", text, channel="reasoning")
    assert result.reasoning == "think"
    assert result.calls == [
        Call(0, "call_0", "a", arguments),
        Call(1, "call_1", "b", '{"k": [1,', finished=False),
    ]


def test_v31_cut_off_in_name() -> None:
    result = assert_chunking_invariant("deepseek_v31", f"{CALLS_BEGIN}{CALL_BEGIN}get_wea")
    assert result.calls == [Call(0, "call_0", "get_wea", "", finished=False)]


V31_SAMPLE = (
    f"a{CALLS_BEGIN}{CALL_BEGIN}f{SEP}"
    + '{"s": "<｜tool▁call▁end｜>\\"", "n": {}}'
    + f"{CALL_END}{CALL_BEGIN}g{SEP}[]{CALL_END}{CALLS_END}b"
)


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(V31_SAMPLE) - 1), max_size=30))
def test_v31_any_rechunking(cuts: set[int]) -> None:
    expected = run("deepseek_v31", [V31_SAMPLE])
    assert expected.content == "ab"
    assert expected.parsed() == [("f", {"s": f'{CALL_END}"', "n": {}}), ("g", [])]
    assert run("deepseek_v31", pieces_at(V31_SAMPLE, cuts)) == expected


# --- V3 -------------------------------------------------------------------------------------------


def test_v3_fixture_single_tool() -> None:
    text = (RAW / "vllm-test_deepseek-v3_single_tool_fenced_json.txt").read_text()
    result = assert_chunking_invariant("deepseek_v3", text)
    assert result.content == ""
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo", "unit": "celsius"}')]


def test_v3_fixture_parallel_tools() -> None:
    text = (RAW / "vllm-test_deepseek-v3_parallel_tools_fenced_json.txt").read_text()
    result = assert_chunking_invariant("deepseek_v3", text)
    assert result.content == ""
    assert result.parsed() == [
        ("get_weather", {"city": "Tokyo", "unit": "celsius"}),
        ("search_hotels", {"location": "Tokyo", "check_in": "2025-01-15"}),
    ]
    assert all(call.finished for call in result.calls)


def test_v3_fixture_text_then_tool() -> None:
    text = (RAW / "vllm-test_deepseek-v3_text_then_tool.txt").read_text()
    result = assert_chunking_invariant("deepseek_v3", text)
    assert result.content == "Let me check the weather for you."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Paris"}')]


def test_v3_fence_inside_a_json_string_is_content() -> None:
    arguments = json.dumps({"code": "```python\nprint(1)\n```"})
    text = f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}run\n```json\n{arguments}\n```{CALL_END}{CALLS_END}"
    result = assert_chunking_invariant("deepseek_v3", text)
    assert result.calls == [Call(0, "call_0", "run", arguments)]


def test_v3_separate_fence_tokens_do_not_leak() -> None:
    """tenstorrent#3683: "```" and "json" as separate deltas leaked ``json\\n`` into the arguments."""
    pieces = [
        CALLS_BEGIN,
        CALL_BEGIN,
        "function",
        SEP,
        "f",
        "\n",
        "```",
        "json",
        "\n",
        '{"a"',
        ": 1}",
        "\n",
        "```",
    ]
    result = run("deepseek_v3", [*pieces, CALL_END, CALLS_END])
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_v3_cut_off_after_the_fence_is_not_finished() -> None:
    result = assert_chunking_invariant(
        "deepseek_v3", f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n```json\n" + '{"a": 1}'
    )
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}', finished=False)]


# --- V3.2 DSML ------------------------------------------------------------------------------------

DSML_SAMPLE = f"""Checking.<{D}function_calls>
<{D}invoke name="get_weather">
<{D}parameter name="location" string="true">杭州 "center"</{D}parameter>
<{D}parameter name="days" string="false">3</{D}parameter>
<{D}parameter name="options" string="false">{{"unit": "c", "hours": [1, 2]}}</{D}parameter>
</{D}invoke>
<{D}invoke name="get_weather">
<{D}parameter name="location" string="true">北京</{D}parameter>
<{D}parameter name="date" string="true">2024-01-16</{D}parameter>
</{D}invoke>
</{D}function_calls>"""


def test_dsml_two_invokes_typed_parameters() -> None:
    result = assert_chunking_invariant("deepseek_v32", DSML_SAMPLE)
    assert result.content == "Checking."
    assert result.calls[0].arguments == (
        '{"location": "杭州 \\"center\\"", "days": 3, "options": {"unit": "c", "hours": [1, 2]}}'
    )
    assert result.parsed() == [
        ("get_weather", {"location": '杭州 "center"', "days": 3, "options": {"unit": "c", "hours": [1, 2]}}),
        ("get_weather", {"location": "北京", "date": "2024-01-16"}),
    ]
    assert all(call.finished for call in result.calls)


def test_dsml_string_value_streams_before_its_end() -> None:
    from operators.delimiters import DelimiterRewriter
    from pipeline.models import ChunkResponse

    rewriter = DelimiterRewriter("deepseek_v32", id_factory=str)
    head = f'<{D}function_calls><{D}invoke name="w"><{D}parameter name="path" string="true">/tmp/a'
    (chunk,) = rewriter.feed(ChunkResponse(content=head))
    assert chunk.tool_calls is not None
    assert "".join(d.arguments_delta or "" for d in chunk.tool_calls) == '{"path": "/tmp/a'


def test_dsml_in_reasoning_v4_wrapper_and_unparsable_false_value() -> None:
    text = (
        f'[tool call]\n\n<{D}tool_calls><{D}invoke name="f"><{D}parameter name="n" string="false">'
        f"not json</{D}parameter></{D}invoke></{D}tool_calls>"
    )
    result = assert_chunking_invariant("deepseek_v32", text, channel="reasoning")
    assert result.reasoning == "[tool call]\n\n"
    assert result.parsed() == [("f", {"n": "not json"})]


def test_dsml_no_parameters_and_missing_parameter_end() -> None:
    text = (
        f'<{D}function_calls><{D}invoke name="now"></{D}invoke>'
        f'<{D}invoke name="g"><{D}parameter name="a" string="true">x</{D}invoke></{D}function_calls>'
    )
    result = assert_chunking_invariant("deepseek_v32", text)
    assert result.parsed() == [("now", {}), ("g", {"a": "x"})]


def test_dsml_untyped_value_uses_the_schema() -> None:
    text = f'<{D}function_calls><{D}invoke name="f"><{D}parameter name="n">42</{D}parameter></{D}invoke>'
    schemas = {"f": {"type": "object", "properties": {"n": {"type": "string"}}}}
    assert assert_chunking_invariant("deepseek_v32", text, tool_schemas=schemas).parsed() == [
        ("f", {"n": "42"})
    ]
    assert assert_chunking_invariant("deepseek_v32", text).parsed() == [("f", {"n": 42})]


def test_dsml_cut_off_in_a_value() -> None:
    text = f'<{D}function_calls><{D}invoke name="f"><{D}parameter name="s" string="true">abc'
    result = assert_chunking_invariant("deepseek_v32", text)
    assert result.calls == [Call(0, "call_0", "f", '{"s": "abc', finished=False)]


# --- V4 -----------------------------------------------------------------------------------------------


def test_v4_is_v32_dsml_in_the_tool_calls_wrapper() -> None:
    """DeepSeek V4 keeps V3.2's DSML grammar; only the wrapper is the ``tool_calls`` one (vLLM's
    ``DeepSeekV4ToolParser`` subclasses the V3.2 one): ``deepseek_v4`` is an alias of ``deepseek_v32``."""
    assert get_format("deepseek_v4") is get_format("deepseek_v32")
    text = (RAW / "vllm-test_deepseek-v4_text_then_tool_calls_dsml.txt").read_text()
    result = assert_chunking_invariant("deepseek_v4", text)
    assert result.content == "Let me check. "
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location": "Beijing", "unit": "celsius"}')]
