"""Pythonic tool calls (Llama 3.2 / 4 ``pythonic``, Olmo 3 ``olmo3``, LFM2 ``lfm2``): Python literals
become JSON arguments as they stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter, get_format
from operators.delimiters._pyliteral import DONE, MALFORMED, PythonLiteral
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
SIMPLE = '{"city": "San Francisco", "metric": "celsius"}'
MORE_TYPES = (
    '{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, '
    '"role": null, "passed_test": true, "aliases": ["John", "Johnny"]}'
)


def fixture(name: str) -> str:
    return (RAW / name).read_text()


# --- real outputs ---------------------------------------------------------------------------------------


def test_llama32_list_of_calls_with_every_literal() -> None:
    result = assert_chunking_invariant("pythonic", fixture("vllm-test_pythonic_llama3.2_parallel_calls.txt"))
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", SIMPLE),
        Call(1, "call_1", "register_user", MORE_TYPES),
    ]


def test_escaped_quotes_become_json_escapes() -> None:
    result = assert_chunking_invariant("pythonic", fixture("vllm-test_pythonic_escaped_strings.txt"))
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Martha\'s Vineyard", "metric": "\\"cool units\\""}')
    ]


@pytest.mark.parametrize("name", ["pythonic", "llama4_pythonic"])
def test_llama4_python_start_without_end(name: str) -> None:
    result = assert_chunking_invariant(name, fixture("vllm-test_llama4-pythonic_python_start_2_calls.txt"))
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "LA", "metric": "C"}'),
        Call(1, "call_1", "register_user", '{"name": "Doe", "age": 9}'),
    ]


def test_llama4_python_start_and_end() -> None:
    text = "Sure. " + fixture("vllm-test_llama4-pythonic_python_start_end_3_calls.txt") + " Done."
    result = assert_chunking_invariant("pythonic", text)
    assert result.content == "Sure.  Done."
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "LA", "metric": "C"}'),
        Call(1, "call_1", "get_weather", "{}"),
        Call(2, "call_2", "do_something_cool", '{"steps": []}'),
    ]


def test_olmo3_one_call_per_line() -> None:
    result = assert_chunking_invariant(
        "olmo3", "I'll check. " + fixture("vllm-test_olmo3_parallel_calls.txt")
    )
    assert result.content == "I'll check. "
    assert result.calls == [
        Call(0, "call_0", "get_weather", SIMPLE),
        Call(1, "call_1", "register_user", MORE_TYPES),
    ]


def test_olmo3_json_literals() -> None:
    result = assert_chunking_invariant("olmo3", fixture("vllm-test_olmo3_json_literals.txt"))
    assert result.calls == [Call(0, "call_0", "register_user", MORE_TYPES)]


def test_lfm2_text_after_the_call() -> None:
    result = assert_chunking_invariant("lfm2", fixture("vllm-test_lfm2_text_after_call.txt"))
    assert result.content == "\nChecking the current status of candidate ID 12345."
    assert result.calls == [Call(0, "call_0", "get_candidate_status", '{"candidate_id": "12345"}')]


def test_lfm2_dotted_name_and_nested_arguments() -> None:
    result = assert_chunking_invariant("lfm2", fixture("vllm-test_lfm2_dotted_name_nested_args.txt"))
    assert result.calls == [
        Call(
            0,
            "call_0",
            "grocery.orderIngredients",
            '{"ingredientList": [{"name": "Lasagna noodles", "amount": 250, "unit": "g"}], '
            '"deliveryAddress": "845 Willow Lane, Springfield, IL 62704"}',
        )
    ]


def test_lfm2_raw_newlines_in_a_string() -> None:
    result = assert_chunking_invariant("lfm2", fixture("vllm-test_lfm2_multiline_string_arg.txt"))
    assert result.calls == [
        Call(0, "call_0", "exec", '{"command": "cat > f.py << EOF\\nimport csv\\nprint(1)\\nEOF"}')
    ]


# --- streaming ------------------------------------------------------------------------------------------


def test_a_string_argument_streams_as_it_arrives() -> None:
    rewriter = DelimiterRewriter("pythonic", id_factory=str)
    assert rewriter.feed(ChunkResponse(content="[get_weather(ci")) == []
    (first,) = rewriter.feed(ChunkResponse(content="ty='Par"))
    assert first.tool_calls == [ToolCallDelta(0, "0", "get_weather", '{"city": "Par')]
    (second,) = rewriter.feed(ChunkResponse(content="is\\n"))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta="is\\n")]
    (third,) = rewriter.feed(ChunkResponse(content="', n=1"))
    assert third.tool_calls == [ToolCallDelta(0, arguments_delta='", "n": ')]
    (fourth,) = rewriter.feed(ChunkResponse(content="0), g()]"))
    assert fourth.tool_calls == [
        ToolCallDelta(0, arguments_delta="10}", finished=True),
        ToolCallDelta(1, "1", "g", "{}", finished=True),
    ]
    assert rewriter.finish() == []


def test_an_escape_split_across_chunks_is_held_until_whole() -> None:
    result = run("lfm2", ["<|tool_call_start|>[f(s='a\\", "u00", "e9\\", "x4", "1')]<|tool_call_end|>"])
    assert result.calls == [Call(0, "call_0", "f", '{"s": "aéA"}')]


# --- prose, truncation, malformed calls -----------------------------------------------------------------


@pytest.mark.parametrize(
    "prose",
    [
        "Hello [world](https://example.com)",
        "[1, 2, 3] are numbers",
        "[]",
        "[Note] see [f(a=1)]",
        "[print(x)]",
        "[f x]",
        "Here: [get_weather(city='Paris')]",
        "<function_calls> is a tag",
    ],
)
def test_prose_with_brackets_stays_text(prose: str) -> None:
    for name in ("pythonic", "olmo3", "lfm2"):
        result = assert_chunking_invariant(name, prose)
        assert (result.content, result.calls) == (prose, []), name


def test_a_list_after_text_stays_text_but_a_marker_opens_calls() -> None:
    result = assert_chunking_invariant("pythonic", "Hi [f(a=1)] <|python_start|>[g(b=2)]<|python_end|>")
    assert result.content == "Hi [f(a=1)] "
    assert result.calls == [Call(0, "call_0", "g", '{"b": 2}')]


def test_cut_inside_a_string() -> None:
    result = assert_chunking_invariant("pythonic", "[f(a=1), g(s='hel")
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}'), Call(1, "call_1", "g", '{"s": "hel', False)]


def test_cut_inside_a_number_keeps_its_digits() -> None:
    result = assert_chunking_invariant("lfm2", "<|tool_call_start|>[f(n=12")
    assert result.calls == [Call(0, "call_0", "f", '{"n": 12', False)]


def test_cut_before_the_call_is_confirmed_is_text() -> None:
    result = assert_chunking_invariant("lfm2", "x <|tool_call_start|>[get_wea")
    assert (result.content, result.calls) == ("x <|tool_call_start|>[get_wea", [])


def test_a_positional_argument_is_text() -> None:
    result = assert_chunking_invariant("lfm2", "<|tool_call_start|>[f('x')]<|tool_call_end|>")
    assert (result.content, result.calls) == ("<|tool_call_start|>[f('x')]<|tool_call_end|>", [])


def test_a_value_that_is_not_a_literal_ends_the_call_unfinished() -> None:
    result = assert_chunking_invariant("pythonic", "[f(a=1, b=x + 1)]")
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1, "b": x', False)]
    assert result.content == " + 1)]"


def test_trailing_commas_leading_zeros_and_underscores() -> None:
    result = assert_chunking_invariant("olmo3", "<function_calls>f(a=[1, 2,], b={'k': 007,}, c=1_000, d=.5,)")
    assert result.calls == [Call(0, "call_0", "f", '{"a": [1, 2], "b": {"k": 7}, "c": 1000, "d": 0.5}')]


def test_calls_inside_reasoning() -> None:
    result = assert_chunking_invariant(
        "olmo3", "Let me look.<function_calls>look(at='x')</function_calls>", channel="reasoning"
    )
    assert (result.reasoning, result.content) == ("Let me look.", "")
    assert result.calls == [Call(0, "call_0", "look", '{"at": "x"}')]


@pytest.mark.parametrize(
    ("name", "text", "kept"),
    [
        ("pythonic", "[weather(c='P'), secret(k=1)]", ", secret(k=1)]"),
        ("lfm2", "<|tool_call_start|>[secret(k=1), weather(c='P')]<|tool_call_end|>", None),
        (
            "olmo3",
            "<function_calls>weather(c='P')\nsecret(k=1)</function_calls>",
            "\nsecret(k=1)</function_calls>",
        ),
    ],
)
def test_a_call_to_a_tool_not_offered_stays_text(name: str, text: str, kept: str | None) -> None:
    result = assert_chunking_invariant(name, text, offered_tools={"weather"})
    assert [call.name for call in result.calls] == ["weather"]
    assert result.arguments(0) == {"c": "P"}
    assert "secret(k=1)" in result.content
    if kept is not None:
        assert result.content == kept


def test_the_detector_sees_calls_after_the_opener() -> None:
    from operators.delimiters.formats.pythonic import OlmoLexer

    assert OlmoLexer.detect_after("<function_calls>", "\nget_weather(", False) is True
    assert OlmoLexer.detect_after("<function_calls>", "[f (", False) is True
    assert OlmoLexer.detect_after("<function_calls>", " is a tag", False) is False
    assert OlmoLexer.detect_after("<function_calls>", "get_wea", False) is None
    assert OlmoLexer.detect_after("<function_calls>", "get_wea", True) is False


# --- Python literals round-tripped to JSON at any chunking ---------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_LITERALS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _as_json(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    return value


@settings(max_examples=150, deadline=None)
@given(values=st.lists(_LITERALS, min_size=1, max_size=3), data=st.data())
def test_random_python_literals_become_their_json_at_any_chunking(
    values: list[Any], data: st.DataObject
) -> None:
    arguments = ", ".join(f"k{index}={value!r}" for index, value in enumerate(values))
    text = f"<|tool_call_start|>[f({arguments}), g()]<|tool_call_end|>"
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=30))
    result = run("lfm2", pieces_at(text, cuts))
    assert result.calls[1] == Call(1, "call_1", "g", "{}")
    assert result.arguments(0) == {f"k{index}": _as_json(value) for index, value in enumerate(values)}
    assert run("lfm2", list(text)) == result


@settings(max_examples=200, deadline=None)
@given(value=_LITERALS)
def test_the_literal_reader_stops_right_after_the_value(value: Any) -> None:
    out: list[str] = []
    literal = PythonLiteral(out.append)
    text = repr(value) + ")"
    assert literal.feed(text, 0, False) == len(text) - 1
    assert literal.status == DONE
    assert json.loads("".join(out)) == _as_json(value)


@pytest.mark.parametrize("text", ["{'a', 'b'}", "b'x'", "f(1)", "-", "1.2.3", "{1: 2", "[1 2]"])
def test_what_is_not_a_literal_is_malformed(text: str) -> None:
    literal = PythonLiteral(lambda piece: None)
    literal.feed(text + ")", 0, True)
    assert literal.status == MALFORMED


SAMPLE = (
    "<|python_start|>[search(q='a \\'b\\' \"c\"', opts={'n': [1, 2.5e3, None], 't': (True,)}),"
    "\n  noop()]<|python_end|> Then [not(a=1)] text <|python_start|>x"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("pythonic", [SAMPLE])
    assert expected.content == " Then [not(a=1)] text <|python_start|>x"
    assert expected.calls == [
        Call(0, "call_0", "search", '{"q": "a \'b\' \\"c\\"", "opts": {"n": [1, 2.5e3, null], "t": [true]}}'),
        Call(1, "call_1", "noop", "{}"),
    ]
    assert run("pythonic", pieces_at(SAMPLE, cuts)) == expected


FRAGMENTS: tuple[str, ...] = (
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "'",
    '"',
    "\\",
    ",",
    "=",
    ":",
    " ",
    "\n",
    "f",
    "a",
    "1",
    "-",
)
FRAGMENTS += ("get_weather(", "city=", "'Paris'", "True", "None", "null", ".5e3", "[1, 2,]", "\\x4", "\\u00")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_text_of_markers_and_fragments_is_chunking_invariant(data: st.DataObject) -> None:
    """Random mixtures of a format's markers and pythonic fragments: no exception, the delta protocol
    holds (``collect`` checks it), and the result does not depend on the chunking."""
    name = data.draw(st.sampled_from(["pythonic", "olmo3", "lfm2"]))
    markers = get_format(name).markers
    text = "".join(data.draw(st.lists(st.sampled_from(markers + FRAGMENTS), min_size=1, max_size=30)))
    cuts = data.draw(st.sets(st.integers(min_value=1, max_value=max(1, len(text) - 1)), max_size=12))
    whole = run(name, [text])
    assert run(name, pieces_at(text, cuts)) == whole
    assert run(name, list(text)) == whole
