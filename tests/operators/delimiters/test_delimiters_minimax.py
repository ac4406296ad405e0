"""MiniMax-M2 ``<minimax:tool_call><invoke name=..><parameter name=..>`` tool calls, and MiniMax-M3's
namespaced XML elements."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

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


# --- MiniMax-M3 -----------------------------------------------------------------------------------------

RAW = FIXTURES / "raw_model_output"
NS = "]<]minimax[>["
ORDER_SCHEMA = {
    "create_order": {
        "type": "object",
        "properties": {
            "user_id": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "note": {"type": "string"},
            "shipping": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
            },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
                },
            },
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "duplicate_demo": {"type": "object"},
        },
    }
}
ORDER = {
    "user_id": 42,
    "urgent": True,
    "note": "Please leave at front desk.",
    "shipping": {"city": "Singapore", "zip": 18956},
    "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
    "metadata": {"source": "mobile", "campaign": "may-launch"},
    "duplicate_demo": {"tag": ["a", "b"]},
}


def test_m3_fixture_nested_call_typed_by_the_schema() -> None:
    text = (RAW / "vllm-test_minimax-m3_text_then_nested_call.txt").read_text()
    result = assert_chunking_invariant("minimax_m3", text, tool_schemas=ORDER_SCHEMA)
    assert result.content == "I will create it.\n"
    assert result.parsed() == [("create_order", ORDER)]


def test_m3_fixture_nested_call_without_a_schema() -> None:
    text = (RAW / "vllm-test_minimax-m3_text_then_nested_call.txt").read_text()
    result = assert_chunking_invariant("minimax_m3", text)
    assert result.parsed() == [
        ("create_order", {**ORDER, "shipping": {"city": "Singapore", "zip": "018956"}})
    ]


def test_m3_fixture_two_invokes() -> None:
    result = assert_chunking_invariant("minimax_m3", (RAW / "vllm-test_minimax-m3_2_invokes.txt").read_text())
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "create_order", '{"user_id": 1}'),
        Call(1, "call_1", "create_order", '{"user_id": 2}'),
    ]


def test_m3_string_values_stream_and_keep_their_whitespace() -> None:
    text = f'{NS}<tool_call>{NS}<invoke name="f">{NS}<s> a "b"\n{NS}</s>{NS}<e>{NS}</e>'
    text += f"{NS}</invoke>{NS}</tool_call>"
    result = assert_chunking_invariant("minimax_m3", text)
    assert result.calls == [Call(0, "call_0", "f", '{"s": " a \\"b\\"\\n", "e": ""}')]


def test_m3_cut_off_stray_closing_tag_and_prose() -> None:
    text = f'{NS}<tool_call>\n{NS}<invoke name="f">{NS}</x>{NS}<a>1{NS}</a>\n{NS}<invoke name="g">{NS}<b>tw'
    result = assert_chunking_invariant("minimax_m3", text)
    assert result.calls == [
        Call(0, "call_0", "f", '{"a": 1}'),
        Call(1, "call_1", "g", '{"b": "tw', finished=False),
    ]
    text = f'{NS}<tool_call>{NS}<invoke name="f">{NS}<o>{NS}<k>v{NS}</k>'
    result = assert_chunking_invariant("minimax_m3", text)
    assert result.calls == [Call(0, "call_0", "f", f'{{"o": {NS}<k>v{NS}</k>', finished=False)]
    prose = "Use <tool_call> and <invoke name=x> as tags."
    assert assert_chunking_invariant("minimax_m3", prose).content == prose


def test_m3_a_call_to_a_tool_not_offered_stays_text() -> None:
    text = (RAW / "vllm-test_minimax-m3_2_invokes.txt").read_text()
    result = run("minimax_m3", list(text), offered_tools={"other"})
    assert (result.content, result.calls) == (text, [])


M3 = (
    f'Hi <b> | {NS}<tool_call>\n{NS}<invoke name="f">{NS}<a>x "]<]mini\\ {NS}</a>'
    f"{NS}<o>{NS}<item>1{NS}</item>{NS}<item>{NS}<k>v{NS}</k>{NS}</item>{NS}</o>{NS}</invoke>\n"
    f'{NS}<invoke name="g">{NS}</invoke>\n{NS}</tool_call> bye'
)


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(M3) - 1), max_size=40))
def test_m3_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("minimax_m3", [M3])
    assert (expected.content, expected.parsed()) == (
        "Hi <b> |  bye",
        [("f", {"a": 'x "]<]mini\\ ', "o": [1, {"k": "v"}]}), ("g", {})],
    )
    assert run("minimax_m3", pieces_at(M3, cuts)) == expected
    assert_same_chunks("minimax_m3", pieces_at(M3, cuts))
    assert_same_chunks("minimax_m3", pieces_at(M3, cuts), offered={"f"})
