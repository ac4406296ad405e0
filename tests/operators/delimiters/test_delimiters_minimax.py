"""MiniMax-M2 ``<minimax:tool_call><invoke name=..><parameter name=..>`` tool calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

M2 = """Let me check. <minimax:tool_call>
<invoke name="get_weather">
<parameter name="city">東京</parameter>
<parameter name="count">7</parameter>
</invoke>
<invoke name="search">
<parameter name="query">ramen</parameter>
</invoke>
</minimax:tool_call>"""


def test_parallel_invokes_in_one_section() -> None:
    result = assert_chunking_invariant("minimax_m2", M2)
    assert result.content == "Let me check. "
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "東京", "count": 7}'),
        Call(1, "call_1", "search", '{"query": "ramen"}'),
    ]


def test_two_sections_with_text_between_and_schema_typing() -> None:
    text = (
        '<minimax:tool_call><invoke name="f"><parameter name="n">\n12\n</parameter></invoke>'
        "</minimax:tool_call>"
        ' between <minimax:tool_call><invoke name="g"></invoke></minimax:tool_call> after'
    )
    result = assert_chunking_invariant(
        "minimax_m2", text, tool_schemas={"f": {"properties": {"n": {"type": "string"}}}}
    )
    assert result.content == " between  after"
    assert result.parsed() == [("f", {"n": "12"}), ("g", {})]


def test_in_reasoning_null_and_empty_values() -> None:
    text = (
        '<minimax:tool_call><invoke name="f"><parameter name="a">null</parameter>'
        '<parameter name="b"></parameter></invoke></minimax:tool_call>'
    )
    result = assert_chunking_invariant("minimax_m2", text, channel="reasoning")
    assert (result.reasoning, result.parsed()) == ("", [("f", {"a": None, "b": ""})])


def test_missing_end_tags_and_junk_between_invokes() -> None:
    text = (
        '<minimax:tool_call><invoke name="a"><parameter name="x">1</invoke>junk'
        '<invoke name="b"><parameter name="y">two</minimax:tool_call>end'
    )
    result = assert_chunking_invariant("minimax_m2", text)
    assert result.content == "junkend"
    assert result.parsed() == [("a", {"x": 1}), ("b", {"y": "two"})]


def test_invoke_outside_a_section_is_text_and_cut_off_call() -> None:
    prose = 'Write <invoke name="x"> in XML.'
    assert assert_chunking_invariant("minimax_m2", prose).content == prose
    result = assert_chunking_invariant(
        "minimax_m2", '<minimax:tool_call><invoke name="f"><parameter name="p">ab'
    )
    assert result.calls == [Call(0, "call_0", "f", '{"p": "ab', finished=False)]


SAMPLE = M2.replace("ramen", 'ramen "</invoke>?" \\ and {not json').replace("7", "[7, 8]")


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("minimax_m2", [SAMPLE])
    assert expected.parsed()[0] == ("get_weather", {"city": "東京", "count": [7, 8]})
    assert run("minimax_m2", pieces_at(SAMPLE, cuts)) == expected
