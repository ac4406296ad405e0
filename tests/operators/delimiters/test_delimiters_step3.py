"""StepFun: Step-3 sections of ``<steptml:invoke>`` calls, and Step-3.5's Qwen3-Coder XML."""

# ruff: noqa: RUF001  (the test strings hold the real full-width delimiters)
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

RAW = FIXTURES / "raw_model_output"
BEGIN, END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CALL, CALL_END, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"


def call(name: str, kind: str = "function", **params: str) -> str:
    body = "".join(
        f'<steptml:parameter name="{key}">{value}</steptml:parameter>\n' for key, value in params.items()
    )
    return f'{CALL}{kind}{SEP}<steptml:invoke name="{name}">\n{body}</steptml:invoke>{CALL_END}\n'


def test_code_points() -> None:
    assert [hex(ord(char)) for char in CALL if ord(char) > 127] == ["0xff5c", "0xff5c"]


def test_fixture_parallel_calls_with_a_stray_separator() -> None:
    result = assert_chunking_invariant("step3", (RAW / "vllm-test_step3_parallel_tools.txt").read_text())
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_values_typed_without_a_schema() -> None:
    result = assert_chunking_invariant("step3", (RAW / "vllm-test_step3_various_data_types.txt").read_text())
    assert result.parsed() == [
        (
            "test_function",
            {
                "string_field": "hello",
                "int_field": 42,
                "float_field": 3.14,
                "bool_field": True,
                "null_field": None,
                "array_field": ["a", "b", "c"],
                "object_field": {"nested": "value"},
            },
        )
    ]


def test_fixture_text_around_the_section() -> None:
    result = assert_chunking_invariant("step3", (RAW / "vllm-test_step3_surrounding_text.txt").read_text())
    assert result.content == "Let me check the weather for you.\n\n\n\nI'll get that information."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


def test_fixture_whitespace_of_strings_is_kept_and_typed_values_are_stripped() -> None:
    text = (RAW / "vllm-test_step3_whitespace_kept_in_strings.txt").read_text()
    schema = {
        "properties": {
            "old_string": {"type": "string"},
            "indent": {"type": "integer"},
            "enabled": {"type": "boolean"},
        }
    }
    for schemas in ({"edit_file": schema}, None):
        result = assert_chunking_invariant("step3", text, tool_schemas=schemas)
        assert result.parsed() == [
            ("edit_file", {"old_string": "    if x:\n        return 1\n", "indent": 4, "enabled": True})
        ]


def test_an_entry_that_is_not_a_function_is_skipped() -> None:
    text = f"{BEGIN}\n{CALL}thought{SEP}hmm{CALL_END}\n" + call("get_weather", city="Paris") + END + " ok"
    result = assert_chunking_invariant("step3", text)
    assert result.content == " ok"
    assert result.parsed() == [("get_weather", {"city": "Paris"})]


def test_missing_invoke_end_and_calls_in_reasoning() -> None:
    text = f'think{BEGIN}{CALL}function{SEP}<steptml:invoke name="a"><steptml:parameter name="x">1{CALL_END}'
    text += call("now") + END
    result = assert_chunking_invariant("step3", text, channel="reasoning")
    assert result.reasoning == "think"
    assert result.calls == [Call(0, "call_0", "a", '{"x": 1}'), Call(1, "call_1", "now", "{}")]


def test_prose_and_a_section_without_calls_are_text() -> None:
    for prose in ['Use <steptml:invoke name="x"> here.', f"{BEGIN} nothing {END} after"]:
        result = assert_chunking_invariant("step3", prose)
        assert (result.content, result.calls) == (prose, [])


def test_cut_off_calls() -> None:
    result = assert_chunking_invariant(
        "step3", f'{BEGIN}{CALL}function{SEP}<steptml:invoke name="f"><steptml:parameter name="s">ab'
    )
    assert result.calls == [Call(0, "call_0", "f", '{"s": "ab', finished=False)]


def test_a_call_to_a_tool_not_offered_stays_text() -> None:
    text = BEGIN + call("rm", path="/") + call("get_weather", city="Paris") + END
    for pieces in ([text], list(text)):
        result = run("step3", pieces, offered_tools={"get_weather"})
        assert result.parsed() == [("get_weather", {"city": "Paris"})]
        assert 'name="rm"' in result.content


SAMPLE = "Hi <b> " + BEGIN + call("f", a=' x "</steptml:para\\ ', n="[1, 2]") + call("g") + END + " bye"


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("step3", [SAMPLE])
    assert expected.parsed() == [("f", {"a": ' x "</steptml:para\\ ', "n": [1, 2]}), ("g", {})]
    assert expected.content == "Hi <b>  bye"
    assert run("step3", pieces_at(SAMPLE, cuts)) == expected
    assert_same_chunks("step3", pieces_at(SAMPLE, cuts))
    assert_same_chunks("step3", pieces_at(SAMPLE, cuts), offered={"f"})


# --- Step-3.5 -----------------------------------------------------------------------------------------


def test_step3p5_fixture_reads_as_qwen3_coder() -> None:
    text = (RAW / "vllm-test_step3p5_text_then_typed_tool.txt").read_text()
    schema = {
        "properties": {
            "shape": {"type": "string"},
            "dimensions": {"type": "object"},
            "precision": {"type": "integer"},
        }
    }
    result = assert_chunking_invariant("step3p5", text, tool_schemas={"calculate_area": schema})
    assert result.content == "Let me calculate that area for you."
    assert result.parsed() == [
        ("calculate_area", {"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3})
    ]
