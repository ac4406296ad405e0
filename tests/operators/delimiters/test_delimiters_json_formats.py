"""Properties every format added with ``operators/delimiters/_jsonblocks.py`` keeps (granite,
granite_20b_fc, internlm2, gigachat3, longcat, jamba, phi4_mini, xlam, cohere_command; and gigachat35):

- the same result at any chunking, and a clean end at every cut (``assert_chunking_invariant``);
- the fast paths (rules, shortcut) give exactly the chunks the states give, with and without a guard;
- with ``offered_tools``, a call to a tool not offered comes back as the text the model wrote, byte for
  byte, and offering every tool changes nothing;
- what is held while an opener is undecided is bounded: past the cap it goes out as text.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import get_format
from operators.delimiters._scan import HEADER_LIMIT
from tests.conftest import FIXTURES
from tests.delimiter_cases import assert_chunking_invariant, pieces_at, run
from tests.operators.delimiters.test_delimiters_fast_path_properties import assert_same_chunks

RAW = FIXTURES / "raw_model_output"

RECORDED = {
    "vllm-test_granite_parallel_tool_calls.txt": "granite",
    "vllm-test_granite_surrounding_text.txt": "granite",
    "vllm-test_granite_escaped_strings.txt": "granite",
    "vllm-test_granite-20b-fc_parallel_tool_calls.txt": "granite_20b_fc",
    "vllm-test_granite-20b-fc_surrounding_text.txt": "granite_20b_fc",
    "vllm-test_internlm2_surrounding_text.txt": "internlm2",
    "vllm-test_internlm2_various_data_types.txt": "internlm2",
    "vllm-test_gigachat3_mixed_content_eos.txt": "gigachat3",
    "vllm-test_gigachat31_mixed_content.txt": "gigachat3",
    "vllm-test_gigachat35_surrounding_text.txt": "gigachat35",
    "vllm-test_gigachat35_parallel_tool_calls.txt": "gigachat35",
    "vllm-test_gigachat35_various_data_types.txt": "gigachat35",
    "vllm-test_longcat_parallel_tool_calls.txt": "longcat",
    "vllm-test_longcat_surrounding_text.txt": "longcat",
    "vllm-test_jamba_parallel_tools.txt": "jamba",
    "vllm-test_jamba_single_tool_with_content.txt": "jamba",
    "vllm-test_phi4-mini_parallel_tool_calls.txt": "phi4_mini",
    "vllm-test_phi4-mini_surrounding_text.txt": "phi4_mini",
    "vllm-test_xlam_parallel_tool_calls.txt": "xlam",
    "vllm-test_xlam_think_tag_then_list.txt": "xlam",
    "vllm-test_xlam_json_code_block.txt": "xlam",
    "vllm-test_xlam_tool_calls_tag.txt": "xlam",
    "vllm-test_xlam_tool_call_xml_tags.txt": "xlam",
    "vllm-test_cohere-command_thinking_then_2_tool_calls.txt": "cohere_command",
}
SAMPLES = [(name, fmt, (RAW / name).read_text(encoding="utf-8")) for name, fmt in RECORDED.items()]
IDS = [name for name, _, _ in SAMPLES]

_CALL = '{{"name": "f", "arguments": {{"a": "{v}"}}}}'
_G = '{{"name": "g", "arguments": {{}}}}'
_PARAMETERS = _CALL.replace("arguments", "parameters")
STREAMS = {
    "granite": "Hi <b> | <|tool_call|>[" + _CALL + ", " + _G + "] ok",
    "granite_20b_fc": "Hi <b> | <function_call> " + _CALL + "\n<function_call>" + _G + " ok",
    "internlm2": "Hi <b> | <|action_start|><|plugin|>\n" + _PARAMETERS + "<|action_end|> ok",
    "gigachat3": "Hi <b> | <|message_sep|>\n\nfunction call<|role_sep|>\n" + _CALL + "</s>",
    "gigachat35": (
        'Hi <b> | <\uff5cGCML\uff5ctool_calls><\uff5cGCML\uff5cinvoke name="f">'
        '<\uff5cGCML\uff5cparameter name="a">{v}</\uff5cGCML\uff5cparameter>'
        "</\uff5cGCML\uff5cinvoke></\uff5cGCML\uff5ctool_calls> ok"
    ),
    "longcat": "Hi <b> | <longcat_tool_call>\n" + _CALL + "\n</longcat_tool_call> ok",
    "jamba": "Hi <b> | <tool_calls>[\n " + _CALL + "\n]</tool_calls> ok",
    "phi4_mini": "Hi <b> | functools[" + _CALL + "] ok",
    "xlam": "Hi <b> | ```json\n[" + _CALL + "]\n``` ok",
    "cohere_command": (
        '<|START_THINKING|>Hi <b> |<|END_THINKING|><|START_ACTION|>[{{"tool_call_id": "0", "tool_name": "f", '
        '"parameters": {{"a": "{v}"}}}}]<|END_ACTION|>'
    ),
}
"""One call to ``f`` (a string argument ``v``, JSON-escaped) after prose, per format."""

_VALUE = st.lists(
    st.sampled_from(["a", " ", "\\n", '\\"', "\\\\", "<", "/", ">", "|", "]", "}", "é", "```"]), max_size=12
).map("".join)
"""A JSON string's content, escapes written out."""


WRAPPED = sorted(set(STREAMS) - {"gigachat35"})
"""The formats whose calls are JSON objects (gigachat35's are XML-style)."""


def stream(fmt: str, value: str) -> str:
    return STREAMS[fmt].format(v=value)


@pytest.mark.parametrize(("name", "fmt", "text"), SAMPLES, ids=IDS)
def test_recorded_output_gives_the_same_result_at_any_chunking(name: str, fmt: str, text: str) -> None:
    result = assert_chunking_invariant(fmt, text)
    assert result.calls
    assert all(call.finished for call in result.calls)


@pytest.mark.parametrize(("name", "fmt", "text"), SAMPLES, ids=IDS)
def test_every_call_unknown_gives_the_text_back_byte_for_byte(name: str, fmt: str, text: str) -> None:
    reasoning = run(fmt, [text]).reasoning  # (Cohere's thinking block is reasoning either way)
    calls_text = text.partition("<|END_THINKING|>")[2] if reasoning else text
    for pieces in ([text], list(text), pieces_at(text, range(3, len(text), 7))):
        result = run(fmt, pieces, offered_tools=set())
        assert (result.content, result.reasoning, result.calls) == (calls_text, reasoning, [])


@pytest.mark.parametrize(("name", "fmt", "text"), SAMPLES, ids=IDS)
def test_every_call_offered_gives_the_same_result(name: str, fmt: str, text: str) -> None:
    plain = run(fmt, [text])
    names = {call.name for call in plain.calls if call.name is not None}
    for pieces in ([text], list(text)):
        assert run(fmt, pieces, offered_tools=names) == plain


@pytest.mark.parametrize("fmt", sorted(STREAMS))
@given(value=_VALUE, cuts=st.lists(st.integers(1, 200)))
@settings(max_examples=40, deadline=None)
def test_fast_paths_equal_the_states_at_any_chunking(fmt: str, value: str, cuts: list[int]) -> None:
    text = stream(fmt, value)
    assert_same_chunks(fmt, pieces_at(text, cuts))
    assert_same_chunks(fmt, pieces_at(text, cuts), channel="reasoning")
    assert_same_chunks(fmt, pieces_at(text, cuts), offered={"f"})
    assert_same_chunks(fmt, pieces_at(text, cuts), offered={"g"})
    assert run(fmt, pieces_at(text, cuts)) == run(fmt, [text])


@pytest.mark.parametrize("fmt", sorted(STREAMS))
def test_fast_paths_equal_the_states_at_every_boundary(fmt: str) -> None:
    text = stream(fmt, 'x \\" y')
    for cut in range(1, len(text)):
        assert_same_chunks(fmt, [text[:cut], text[cut:]])
    for size in (1, 2, 3, 4):
        assert_same_chunks(fmt, pieces_at(text, range(size, len(text), size)))


@pytest.mark.parametrize("fmt", WRAPPED)
def test_the_call_streams_its_arguments_verbatim(fmt: str) -> None:
    result = assert_chunking_invariant(fmt, stream(fmt, "a\\nb"))
    first = result.calls[0]
    assert (first.name, first.arguments, first.finished) == ("f", '{"a": "a\\nb"}', True)


@pytest.mark.parametrize("fmt", sorted(STREAMS))
def test_an_opener_followed_by_whitespace_past_the_cap_is_text(fmt: str) -> None:
    opener = get_format(fmt).detect_openers[0]
    text = "a " + opener + " " * (HEADER_LIMIT + 10) + "b"
    result = run(fmt, [*text[:200], text[200:]])
    assert (result.content, result.calls) == (text, [])


@pytest.mark.parametrize("fmt", WRAPPED)
def test_arguments_before_the_name_are_held_up_to_max_buffered_chars(fmt: str) -> None:
    """A call object whose arguments come before its name opens the call (unnamed) once they pass the
    cap: nothing grows without bound."""
    text = stream(fmt, "x" * 300).replace('"name": "f", ', "").replace('"tool_name": "f", ', "")
    text = text.replace('"arguments": {"a"', '"arguments": {"a"').replace("}}", '}, "name": "f"}', 1)
    text = text.replace('"parameters": {"a"', '"parameters": {"a"')
    small = run(fmt, [text], max_buffered_chars=100)
    large = run(fmt, [text])
    assert large.calls[0].name == "f"
    assert small.calls[0].name == ""
    assert small.calls[0].arguments == large.calls[0].arguments


LISTS = {
    "granite": ("<|tool_call|>[", "] done"),
    "jamba": ("<tool_calls>[", "]</tool_calls> done"),
    "phi4_mini": ("functools[", "] done"),
    "xlam": ("[TOOL_CALLS][", "] done"),
}


@pytest.mark.parametrize("fmt", sorted(LISTS))
def test_a_list_with_an_offered_and_an_unknown_call(fmt: str) -> None:
    """In a list, the unknown call goes out from its ``{`` on; the list's opening goes out with an
    unknown first call, and its closing after the unknown last call."""
    opening, closing = LISTS[fmt]
    first, second = '{"name": "foo", "arguments": {"a": 1}}', '{"name": "bar", "arguments": {}}'
    text = f"{opening}{first}, {second}{closing}"
    for pieces in ([text], list(text), pieces_at(text, range(3, len(text), 5))):
        known_first = run(fmt, pieces, offered_tools={"foo"})
        assert known_first.content == f"{second}{closing}"
        assert [(call.name, call.arguments) for call in known_first.calls] == [("foo", '{"a": 1}')]
        known_second = run(fmt, pieces, offered_tools={"bar"})
        assert known_second.content == f"{opening}{first}, " + closing.lstrip("]").removeprefix(
            "</tool_calls>"
        )
        assert [(call.name, call.arguments) for call in known_second.calls] == [("bar", "{}")]
