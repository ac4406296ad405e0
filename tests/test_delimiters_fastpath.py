"""The rewriter's fast paths and the framework helpers behind them: a chunk of plain text goes on as the
same object, the next piece of a JSON string goes straight into the arguments, and both give exactly what
lexing gives."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.delimiters import FORMATS, DelimiterRewriter
from operators.delimiters._scan import JsonArgs, Markers, json_escape, space_end
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
from tests.delimiter_cases import Call, numbered_ids, pieces_at, run

FORMAT_NAMES = sorted({lexer.name for lexer in FORMATS.values()})


@pytest.mark.parametrize("name", FORMAT_NAMES)
def test_plain_text_chunk_goes_on_as_the_same_object(name: str) -> None:
    rewriter = DelimiterRewriter(name)
    rewriter.feed(ChunkResponse(content="Hello"))  # llama3 decides on its first text
    content = ChunkResponse(content="plain words")
    reasoning = ChunkResponse(reasoning="more words")
    assert rewriter.feed(content)[0] is content
    assert rewriter.feed(reasoning)[0] is reasoning
    assert rewriter.feed(ChunkResponse()) == []


def test_plain_text_with_other_fields_is_not_taken_as_is() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"))
    rewriter.feed(ChunkResponse(content="<|tool_call_end|>"))
    last = ChunkResponse(content=" done", finish_reason="stop", usage=TokenUsage(total_tokens=3))
    (chunk,) = rewriter.feed(last)
    assert chunk.content == " done"
    assert chunk.finish_reason == "tool_calls"
    assert chunk.metadata == {"stop_reason": "stop"}


def test_text_with_a_marker_start_character_but_no_marker_goes_on_as_the_same_object() -> None:
    rewriter = DelimiterRewriter("kimi_k2")
    chunk = ChunkResponse(content="2 < 3 <|x|>")
    assert rewriter.feed(chunk)[0] is chunk
    assert rewriter.feed(ChunkResponse(content="x <|tool")) == [ChunkResponse(content="x ")]  # may be one
    assert rewriter.feed(ChunkResponse(content="s and")) == [ChunkResponse(content="<|tools and")]


def test_string_piece_goes_straight_into_the_arguments() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    rewriter.feed(
        ChunkResponse(content='<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": "')
    )
    assert rewriter.feed(ChunkResponse(content="C:\\")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "C:\\")])
    ]
    assert rewriter.feed(ChunkResponse(content='"x')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"x')])
    ]
    assert rewriter.feed(ChunkResponse(content='"}<|tool_call_end|>')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"}', True)])
    ]


@given(st.text(alphabet='ab\\"u<|', max_size=40), st.lists(st.integers(1, 120), max_size=12))
def test_json_string_arguments_at_any_chunking(value: str, cuts: list[int]) -> None:
    arguments = f'{{"v": "{value}"}}'
    text = f"<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"
    whole = run("kimi_k2", [text])
    assert run("kimi_k2", pieces_at(text, cuts)) == whole
    assert run("kimi_k2", list(text)) == whole
    if value.count('"') % 2 == 0 and not value.endswith("\\"):
        assert whole.calls[0].arguments.startswith(arguments)


def scan_state(scanner: JsonArgs) -> tuple[bool, bool, int, bool]:
    return scanner.in_string, scanner.escape, scanner.depth, scanner.complete


@given(st.text(alphabet='a\\"{}', max_size=30), st.lists(st.integers(1, 30), max_size=6))
def test_take_in_string_follows_the_string_as_scan_does(text: str, cuts: list[int]) -> None:
    markers = Markers("<end>")
    taken, scanned = JsonArgs(), JsonArgs()
    taken.scan('{"k": "', 0, markers, False)
    scanned.scan('{"k": "', 0, markers, False)
    for piece in pieces_at(text, cuts):
        if not taken.take_in_string(piece):
            taken.scan(piece, 0, markers, False)
        scanned.scan(piece, 0, markers, False)
        assert scan_state(taken) == scan_state(scanned)


def test_take_in_string_refuses_a_quote_and_text_outside_a_string() -> None:
    scanner = JsonArgs()
    assert not scanner.take_in_string("abc")  # not in a string yet
    scanner.scan('{"k": "', 0, Markers("<end>"), False)
    assert not scanner.take_in_string('a"')
    assert scan_state(scanner) == (True, False, 1, False)
    assert scanner.take_in_string("a\\")
    assert scanner.escape
    assert scanner.take_in_string("\\\\")
    assert scanner.escape
    assert scanner.take_in_string("n")
    assert not scanner.escape


def test_markers_first_chars() -> None:
    assert Markers("<a>", "[b]", "<c>").first_chars == ("<", "[")


def test_space_end() -> None:
    assert space_end("  \n x", 0) == 4
    assert space_end("x  ", 1) == 3
    assert space_end("x", 0) == 0
    assert space_end("x", 1) == 1


def test_harmony_message_text_on_its_own_channel_goes_on_as_the_same_object() -> None:
    rewriter = DelimiterRewriter("harmony")
    rewriter.feed(ChunkResponse(content="<|channel|>final<|message|>"))
    chunk = ChunkResponse(content="It is sunny.")
    assert rewriter.feed(chunk)[0] is chunk
    rewriter.feed(ChunkResponse(content="<|end|><|start|>assistant<|channel|>analysis<|message|>"))
    assert rewriter.feed(ChunkResponse(content="Think.")) == [ChunkResponse(reasoning="Think.")]


def test_wrapped_arguments_string_goes_straight_into_the_arguments() -> None:
    rewriter = DelimiterRewriter("hermes", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content='<tool_call>{"name": "f", "arguments": {"a": "'))
    assert rewriter.feed(ChunkResponse(content="x\\y")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "x\\y")])
    ]


def test_strings_of_other_wrapper_keys_are_not_arguments() -> None:
    rewriter = DelimiterRewriter("hermes", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content='<tool_call>{"name": "f", "meta": {"note": "'))
    assert rewriter.feed(ChunkResponse(content="skipped")) == []
    result = run(
        "hermes", ['<tool_call>{"name": "f", "meta": {"note": "', "skipped", '"}, "arguments": {"a": 1}}']
    )
    assert result.calls[0].arguments == '{"a": 1}'


def test_arguments_without_a_marker_start_go_straight_into_the_arguments() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    rewriter.feed(
        ChunkResponse(content='<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": [')
    )
    assert rewriter.feed(ChunkResponse(content='1, "')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '1, "')])
    ]
    assert rewriter.feed(ChunkResponse(content='x"')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, 'x"')])
    ]
    assert rewriter.feed(ChunkResponse(content="  ")) == []  # whitespace outside a string waits
    assert rewriter.feed(ChunkResponse(content="]}")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "  ]}")])
    ]
    assert rewriter.feed(ChunkResponse(content=" ")) == []
    assert rewriter.feed(ChunkResponse(content="<|tool_call_end|>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, None, True)])
    ]


def test_text_after_the_closing_fence_is_not_arguments() -> None:
    calls_begin = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
    call_begin = "<\uff5ctool\u2581call\u2581begin\uff5c>"
    sep = "<\uff5ctool\u2581sep\uff5c>"
    call_end = "<\uff5ctool\u2581call\u2581end\uff5c>"
    opening = f'{calls_begin}{call_begin}function{sep}f\n```json\n{{"a": 1}}\n```'
    result = run("deepseek_v3", [opening, "zz", "\n", call_end])
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_header_pieces_are_collected_without_lexing() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="<|tool_call_begin|>functions.")) == []
    assert rewriter.feed(ChunkResponse(content="get_wea")) == []
    assert rewriter.feed(ChunkResponse(content="ther:0")) == []
    assert rewriter.feed(ChunkResponse(content="<|tool_call_argument_begin|>{}")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "functions.get_weather:0", "get_weather", "{}")])
    ]


def test_header_pieces_past_the_cap_are_text() -> None:
    opener = "<|tool_call_begin|>"
    pieces = [opener, *["x" * 100] * 50, " more"]
    result = run("kimi_k2", pieces)
    assert result.calls == []
    assert result.content == "".join(pieces)
    assert run("kimi_k2", ["".join(pieces)]) == result


def test_xml_value_pieces_stream_without_lexing() -> None:
    schemas = {"write": {"properties": {"text": {"type": "string"}}}}
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids, tool_schemas=schemas)
    rewriter.feed(ChunkResponse(content="<tool_call>\n<function=write>\n<parameter=text>\n"))
    assert rewriter.feed(ChunkResponse(content='say "hi"')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, 'say \\"hi\\"')])
    ]
    assert rewriter.feed(ChunkResponse(content="\n")) == []  # may be the newline before </parameter>
    assert rewriter.feed(ChunkResponse(content="a\nb")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "\\na\\nb")])
    ]
    assert rewriter.feed(ChunkResponse(content="\n</parameter>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"}', True)])
    ]


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_json_escape_is_the_body_of_the_json_string(text: str) -> None:
    assert json_escape(text) == msgspec.json.encode(text).decode()[1:-1]


def test_json_escape_writes_a_lone_surrogate_as_its_escape() -> None:
    """Not a UnicodeEncodeError: the argument parser reports the escape as invalid_json (I-JSON)."""
    assert json_escape('a\ud800"\n\U0001f600') == 'a\\ud800\\"\\n\\ud83d\\ude00'


def test_free_text_input_pieces_go_straight_into_the_call() -> None:
    rewriter = DelimiterRewriter("llama3_json", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<|python_tag|>import math\n"))
    assert rewriter.feed(ChunkResponse(content='print("<")')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, 'print("<")', kind="custom")])
    ]
    assert rewriter.feed(ChunkResponse(content="\n<|eo")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "\n", kind="custom")])
    ]
    assert rewriter.feed(ChunkResponse(content="m_id|>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, None, True, kind="custom")])
    ]


def test_a_held_start_of_a_marker_grows_until_it_is_one_or_is_text() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="Hi <|tool")) == [ChunkResponse(content="Hi ")]
    assert rewriter.feed(ChunkResponse(content="_call")) == []
    assert rewriter.feed(ChunkResponse(content="_be")) == []
    assert rewriter.feed(ChunkResponse(content="gin|>f:0<|tool_call_argument_begin|>{}")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "f:0", "f", "{}")])
    ]
    assert rewriter.feed(ChunkResponse(content="<|tool_call_e")) == []
    assert rewriter.feed(ChunkResponse(content="nd|> <|tool")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, None, True)]),
        ChunkResponse(content=" "),
    ]
    assert rewriter.feed(ChunkResponse(content="box")) == [ChunkResponse(content="<|toolbox")]
