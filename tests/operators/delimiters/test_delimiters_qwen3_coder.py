"""Qwen3-Coder XML tool calls: XML parameters become JSON as they stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
WEATHER = '{"city": "%s", "state": "%s", "unit": "fahrenheit"}'


def call(name: str, **params: str) -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_fixture_text_then_tool() -> None:
    text = (RAW / "vllm-test_qwen3-coder_text_then_tool_xml_params.txt").read_text()
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.content == "Sure! Let me check the weather for you."
    assert result.calls == [Call(0, "call_0", "get_current_weather", WEATHER % ("Dallas", "TX"))]


def test_fixture_2_parallel_tools() -> None:
    result = assert_chunking_invariant(
        "qwen3_coder", (RAW / "vllm-test_qwen3-coder_2_parallel_tools.txt").read_text()
    )
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_current_weather", WEATHER % ("Dallas", "TX")),
        Call(1, "call_1", "get_current_weather", WEATHER % ("Orlando", "FL")),
    ]


def test_fixture_multiline_object_param_without_schema() -> None:
    text = (RAW / "vllm-test_qwen3-coder_multiline_object_param.txt").read_text()
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.calls == [
        Call(
            0,
            "call_0",
            "calculate_area",
            '{"shape": "rectangle", "dimensions": {"width": 10, \n "height": 20}, "precision": 2}',
        )
    ]


def test_fixture_multiline_object_param_with_schema() -> None:
    text = (RAW / "vllm-test_qwen3-coder_multiline_object_param.txt").read_text()
    schema = {
        "properties": {
            "shape": {"type": "string"},
            "dimensions": {"type": "object"},
            "precision": {"type": "string"},
        }
    }
    result = assert_chunking_invariant("qwen3_coder", text, tool_schemas={"calculate_area": schema})
    assert result.parsed() == [
        (
            "calculate_area",
            {"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": "2"},
        )
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7),
        ("-1.5e3", -1500.0),
        ("true", True),
        ("null", None),
        ('["a", 1]', ["a", 1]),
        ("tomorrow", "tomorrow"),
        ("truex", "truex"),
        ("007", "007"),
        ("1.2.3", "1.2.3"),
        ("{not json", "{not json"),
        ('"quoted"', '"quoted"'),
        ("  spaced  ", "  spaced  "),
        ("", ""),
        ("line1\n\nline3", "line1\n\nline3"),
    ],
)
def test_value_typing_without_schema(value: str, expected: object) -> None:
    result = assert_chunking_invariant("qwen3_coder", call("f", v=value))
    assert result.arguments(0) == {"v": expected}


def test_value_typing_with_schema() -> None:
    schema = {
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "s": {"type": "string"},
            "o": {"type": ["object", "null"]},
            "bad": {"type": "integer"},
        }
    }
    text = call("f", n="3.0", x="2", b="True", s="42", o="{'a': 1}", bad="many", extra="5")
    result = assert_chunking_invariant("qwen3_coder", text, tool_schemas={"f": schema})
    assert result.arguments(0) == {
        "n": 3,
        "x": 2,
        "b": True,
        "s": "42",
        "o": {"a": 1},
        "bad": "many",
        "extra": "5",
    }


@pytest.mark.parametrize(
    "value", ["1e999", "[1e999, 2]", "{'x': -1e999}", "{'x': float('inf')}", '["\\ud800"]']
)
def test_values_json_cannot_hold_stay_strings(value: str) -> None:
    """I-JSON: a typed value that would become ``inf`` (written ``null``) or a lone surrogate is not
    converted; it stays the text the model wrote, like any value that does not fit its type."""
    schema = {"properties": {"v": {"type": ["number", "array", "object"]}}}
    for schemas in ({"f": schema}, None):
        result = assert_chunking_invariant("qwen3_coder", call("f", v=value), tool_schemas=schemas)
        assert result.arguments(0) == {"v": value}


def test_exactly_one_newline_is_stripped() -> None:
    text = "<tool_call><function=f><parameter=code>\n\n  def f():\n    pass\n\n</parameter></function>"
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.arguments(0) == {"code": "\n  def f():\n    pass\n"}


def test_string_values_stream_before_their_end() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=str)
    head = '<tool_call>\n<function=write>\n<parameter=content>\nline "one"\nline'
    (chunk,) = rewriter.feed(ChunkResponse(content=head))
    assert chunk.tool_calls is not None
    assert "".join(d.arguments_delta or "" for d in chunk.tool_calls) == '{"content": "line \\"one\\"\\nline'


def test_literal_tags_inside_values() -> None:
    code = "x = '<tool_call>' + '</function>' + '<parameter=y>'"
    result = assert_chunking_invariant("qwen3_coder", call("run", code=code))
    assert result.parsed() == [("run", {"code": code})]


def test_missing_parameter_and_function_ends() -> None:
    text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n<parameter=b>\nx\n</tool_call>after"
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.content == "after"
    assert result.parsed() == [("f", {"a": 1, "b": "x"})]


@pytest.mark.parametrize("after", ["", "\n", "  \n\n"])
def test_a_call_ending_at_function_end_and_whitespace_without_tool_call_end(after: str) -> None:
    """The input ends after ``</function>`` and whitespace, ``</tool_call>`` never comes: the call is
    whole and finished, and the whitespace held for the missing tag is not shown."""
    text = "Sure.<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>" + after
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.content == "Sure."
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_prose_mentions_stay_text() -> None:
    for prose in [
        "Use <tool_call> then <function=name>.",
        "<tool_call>\n<function=>x",
        "<tool_call><function=a b>",
    ]:
        result = assert_chunking_invariant("qwen3_coder", prose)
        assert (result.content, result.calls) == (prose, [])


def test_no_parameters_and_calls_in_reasoning() -> None:
    text = "thinking <tool_call><function=now></function></tool_call> more"
    result = assert_chunking_invariant("qwen3_coder", text, channel="reasoning")
    assert result.reasoning == "thinking  more"
    assert result.calls == [Call(0, "call_0", "now", "{}")]


def test_cut_off_in_a_value_and_in_a_held_value() -> None:
    result = assert_chunking_invariant("qwen3_coder", "<tool_call><function=f><parameter=s>\nabc")
    assert result.calls == [Call(0, "call_0", "f", '{"s": "abc', finished=False)]
    result = assert_chunking_invariant("qwen3_coder", '<tool_call><function=f><parameter=o>\n{"a": [1')
    assert result.calls == [Call(0, "call_0", "f", '{"o": {"a": [1', finished=False)]


def test_held_value_over_the_cap_is_released_raw() -> None:
    big = '{"k": "' + "x" * 100 + '"}'
    text = call("f", o=big)
    result = assert_chunking_invariant("qwen3_coder", text, max_buffered_chars=50)
    assert result.arguments(0) == {"o": {"k": "x" * 100}}
    broken = call("f", o="{" + "y" * 100)
    result = assert_chunking_invariant("qwen3_coder", broken, max_buffered_chars=50)
    assert result.calls[0].arguments == '{"o": {' + "y" * 100 + "}"
    assert result.calls[0].finished


SAMPLE = (
    'Plan.<tool_call>\n<function=a>\n<parameter=s>\nsay "</tool_call>" \\ é\n</parameter>\n'
    '<parameter=n>\n-12.5\n</parameter>\n<parameter=o>\n{"k": [true, null]}\n</parameter>\n</function>\n'
    "</tool_call>\n<tool_call>\n<function=b>\n</function>\n</tool_call> <tool_call> end"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("qwen3_coder", [SAMPLE])
    assert expected.content == "Plan. <tool_call> end"
    assert expected.parsed() == [
        ("a", {"s": 'say "</tool_call>" \\ é', "n": -12.5, "o": {"k": [True, None]}}),
        ("b", {}),
    ]
    assert run("qwen3_coder", pieces_at(SAMPLE, cuts)) == expected


# --- a call whose <tool_call> the model skipped -------------------------------------------------------------

ORPHAN = (
    "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
    "</function>"
)


def test_call_without_its_opening_tag_is_read_when_the_closing_tag_confirms() -> None:
    result = assert_chunking_invariant("qwen3_coder", f"Let me check.\n{ORPHAN}\n</tool_call>\nDone.")
    assert result.content == "Let me check.\n\nDone."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Paris", "days": 3}')]


def test_calls_without_opening_tags_in_a_row_and_mixed_with_normal_ones() -> None:
    text = (
        f"{ORPHAN}\n</tool_call>\n<function=now>\n</function>\n</tool_call>\n"
        f"<tool_call>\n{ORPHAN}\n</tool_call>"
    )
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.parsed() == [
        ("get_weather", {"city": "Paris", "days": 3}),
        ("now", {}),
        ("get_weather", {"city": "Paris", "days": 3}),
    ]
    assert result.content == "\n"


def test_call_without_opening_tag_is_held_back_until_confirmed() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=lambda index: f"call_{index}")
    (first,) = rewriter.feed(ChunkResponse(content="Hi <function=f>\n<parameter=a>\nx y"))
    assert (first.content, first.tool_calls) == ("Hi ", None)
    assert rewriter.feed(ChunkResponse(content=" z\n</parameter>\n</function>\n</tool_")) == []
    assert rewriter.feed(ChunkResponse(content="call> ok")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", '{"a": "x y z"}', finished=True)]),
        ChunkResponse(content=" ok"),
    ]
    assert rewriter.finish() == []


@pytest.mark.parametrize(
    "prose",
    [
        "Use <function=name> to call a tool.",
        "<function=f> <parameter=a>",
        "Write <function=f>\n then text",
        "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\nand no closing tag",
        "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>",
        "<function=a b>\n</function>\n</tool_call>",
        "<function=>\n</function>\n</tool_call>",
        "the <function=f>\n<parameter=a>\nstill open",
    ],
)
def test_prose_that_mentions_function_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("qwen3_coder", prose)
    assert (result.content, result.calls) == (prose, [])


def test_a_real_call_after_a_mention_releases_the_mention() -> None:
    text = f"Like <function=x>\n<parameter=y>\nthis: <tool_call>\n{ORPHAN}\n</tool_call>"
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.content == "Like <function=x>\n<parameter=y>\nthis: "
    assert result.parsed() == [("get_weather", {"city": "Paris", "days": 3})]


def test_function_end_inside_a_value_does_not_confirm() -> None:
    text = "<function=f>\n<parameter=a>\nx</function> y\n</parameter>\n</function>\n</tool_call>"
    result = assert_chunking_invariant("qwen3_coder", text)
    assert result.parsed() == [("f", {"a": "x</function> y"})]


def test_call_without_opening_tag_past_the_cap_is_text() -> None:
    body = "<function=f>\n<parameter=a>\n" + "x" * 100 + "\n</parameter>\n</function>\n</tool_call>"
    result = assert_chunking_invariant("qwen3_coder", body, max_buffered_chars=80)
    assert (result.content, result.calls) == (body, [])
    result = assert_chunking_invariant("qwen3_coder", body, max_buffered_chars=200)
    assert result.parsed() == [("f", {"a": "x" * 100})]


MIXED = f"A <function=x> b\n{ORPHAN}\n</tool_call> c <tool_call>\n{ORPHAN}\n</tool_call>\n{ORPHAN} end"


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(MIXED) - 1), max_size=40))
def test_calls_without_opening_tags_at_any_chunking(cuts: set[int]) -> None:
    expected = run("qwen3_coder", [MIXED])
    assert expected.content == f"A <function=x> b\n c \n{ORPHAN} end"
    assert expected.parsed() == [("get_weather", {"city": "Paris", "days": 3})] * 2
    assert run("qwen3_coder", pieces_at(MIXED, cuts)) == expected


def test_call_without_opening_tag_through_replay(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pipeline.cli.main import main

    path = tmp_path / "qwen.txt"
    path.write_text(f"Checking.\n{ORPHAN}\n</tool_call>", encoding="utf-8")
    argv = ["replay", str(path), "--provider", "text", "--tool-format", "qwen3_coder", "--output", "jsonl"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    invocations = [(line["name"], line["arguments"]) for line in lines if line["type"] == "TOOL_INVOCATION"]
    assert invocations == [("get_weather", {"city": "Paris", "days": 3})]
    assert lines[-1]["finish_reason"] == "tool_calls"


def test_a_lone_surrogate_character_in_a_value_is_written_as_its_escape() -> None:
    """Only a Python-object source can carry one; JSON-escaping it must not raise."""
    result = assert_chunking_invariant("qwen3_coder", call("f", s="a\ud800b", o="[1, 2]"))
    assert result.calls == [Call(0, "call_0", "f", '{"s": "a\\ud800b", "o": [1, 2]}')]
