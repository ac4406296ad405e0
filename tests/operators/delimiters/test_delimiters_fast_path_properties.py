"""The fast paths of the delimiter rewriter give exactly what its states give.

A channel's next chunk goes to the rule its lexer hands out (``operators/delimiters/_rules.py``), then
to the lexer's shortcut, then to the states. Each property below pins one side of "the same chunks":

- ``test_fast_paths_equal_the_states_*``: rules and shortcut against a rewriter whose every chunk is
  lexed (``_NoShortcut``), on Qwen3-Coder, GLM, MiniMax, harmony, Kimi-K2, pythonic and Gemma 4 text: at
  any chunking (hypothesis), at every two-piece cut and every small piece size, on either channel, with
  chunks that carry other fields, and with a guard of unknown tools (the call's tool offered or not).
- ``test_*_without_lexing`` / ``*_need_no_shortcut``: the chunks a rule must take itself (plain text,
  a header's piece, a held marker start growing, an XML value's piece, the tags around a Qwen3-Coder
  value, a harmony message's text on either channel) never reach the states: what keeps the
  benchmark's per-delta cost.
- ``test_*_same_object``: plain text goes on as the chunk that came in.
- ``test_*_goes_straight_into_the_arguments`` / ``*_at_any_chunking``: a piece of JSON arguments
  (string or not, Kimi-K2 and the wrapper formats) becomes its delta, the same as lexed.
- Helpers the rules stand on equal their general forms: ``Markers.find`` a reference search,
  ``json_escape`` msgspec's encoder, ``JsonArgs.take`` / ``take_in_string`` what ``scan`` does, and a
  chunk without a marker-start pair holds no marker (the rules' stop test implies the shortcut's).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import FORMATS, DelimiterRewriter
from operators.delimiters._lexer import FormatLexer
from operators.delimiters._rules import Rule
from operators.delimiters._scan import JsonArgs, Markers, XmlArguments, json_escape, space_end
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
from tests.delimiter_cases import Call, numbered_ids, pieces_at, run

_VALUE_TEXT = st.text(
    alphabet=st.sampled_from(
        ["a", "b", " ", "\n", "\t", '"', "\\", "<", "/", ">", "|", "=", "é", "🎉", "\x01", "p"]
    ),
    max_size=30,
)


def qwen3_coder(value: str, prose: str) -> str:
    return (
        f"{prose}<tool_call>\n<function=f>\n<parameter=a>\n{value}\n</parameter>\n"
        f"<parameter=b>\n{value}\n</parameter>\n</function>\n</tool_call>{prose}"
    )


def glm(value: str, prose: str) -> str:
    return f"{prose}<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>{prose}"


def minimax(value: str, prose: str) -> str:
    return (
        f'{prose}<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">{value}</parameter>\n'
        f"</invoke>\n</minimax:tool_call>{prose}"
    )


def harmony(value: str, prose: str) -> str:
    arguments = '{"a": "' + json_escape(value) + '"}'
    return (
        f"<|channel|>analysis<|message|>{prose}<|end|><|start|>assistant<|channel|>commentary "
        f"to=functions.f <|constrain|>json<|message|>{arguments}<|call|><|start|>assistant"
        f"<|channel|>final<|message|>{prose}{value}<|return|>"
    )


def kimi_k2(value: str, prose: str) -> str:
    arguments = '{"a": "' + json_escape(value) + '"}'
    return (
        f"{prose}<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        f"<|tool_call_argument_begin|>{arguments}<|tool_call_end|><|tool_calls_section_end|>{prose}"
    )


def pythonic(value: str, prose: str) -> str:
    return f"{prose}<|python_start|>[f(a={value!r}, b=[1, {value!r}])]<|python_end|>{prose}"


def gemma4(value: str, prose: str) -> str:
    return f'{prose}<|tool_call>call:f{{a:<|"|>{value}<|"|>,b:1}}<tool_call|>{prose}'


STREAMS = {
    "qwen3_coder": qwen3_coder,
    "glm45": glm,
    "minimax_m2": minimax,
    "harmony": harmony,
    "kimi_k2": kimi_k2,
    "pythonic": pythonic,
    "gemma4": gemma4,
}


class _NoShortcut(DelimiterRewriter):
    """The rewriter with every chunk lexed through the states (the slow path)."""

    def _reset(self) -> None:
        super()._reset()
        for lexer in (self._content, self._reasoning):
            lexer.shortcut = _never  # type: ignore[method-assign]
            lexer.make_rule = functools.partial(Rule, lexer)  # type: ignore[method-assign]
            lexer.rule = lexer.fallback = Rule(lexer)  # (takes nothing: every chunk is lexed)


def _never(text: str) -> bool:
    return False


def outputs(
    rewriter: DelimiterRewriter, pieces: list[str], channel: str, extras: Mapping[str, object] | None = None
) -> Iterator[ChunkResponse]:
    for piece in pieces:
        yield from rewriter.feed(ChunkResponse(**{channel: piece}, **(extras or {})))  # type: ignore[arg-type]
    yield from rewriter.finish()


def _lexed(self: FormatLexer, text: str, final: bool = False) -> None:
    raise AssertionError(f"feed({text!r}) called: the text was lexed")


@contextmanager
def not_lexed() -> Iterator[None]:
    """Within it, a chunk that reaches the lexer's states fails the test (a fast path must take it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FormatLexer, "feed", _lexed)
        yield


def assert_same_chunks(
    format: str,
    pieces: list[str],
    channel: str = "content",
    offered: set[str] | None = None,
    extras: Mapping[str, object] | None = None,
) -> None:
    rewriters = (DelimiterRewriter, _NoShortcut)
    fast, slow = (
        list(outputs(kind(format, id_factory=numbered_ids, offered_tools=offered), pieces, channel, extras))
        for kind in rewriters
    )
    assert fast == slow, f"{format} at {pieces!r}"


@pytest.mark.parametrize("format", sorted(STREAMS))
@given(value=_VALUE_TEXT, prose=st.sampled_from(["", "Hi <b> | ", "a\n"]), cuts=st.lists(st.integers(1, 200)))
@settings(max_examples=60, deadline=None)
def test_fast_paths_equal_the_states_at_any_chunking(
    format: str, value: str, prose: str, cuts: list[int]
) -> None:
    text = STREAMS[format](value, prose)
    assert_same_chunks(format, pieces_at(text, cuts))
    assert_same_chunks(format, pieces_at(text, range(4, len(text), 4)))  # the benchmark's 4-character deltas


@pytest.mark.parametrize("format", sorted(STREAMS))
@pytest.mark.parametrize("offered", [{"f"}, {"g"}])
@given(value=_VALUE_TEXT, cuts=st.lists(st.integers(1, 200)))
@settings(max_examples=40, deadline=None)
def test_fast_paths_equal_the_states_with_a_guard(
    format: str, offered: set[str], value: str, cuts: list[int]
) -> None:
    """With ``offered_tools`` (the call's tool offered, or not), the rules a guard allows give what the
    states give."""
    text = STREAMS[format](value, "Hi <b> | ") + STREAMS[format](value, "")
    assert_same_chunks(format, pieces_at(text, cuts), offered=offered)
    assert_same_chunks(format, pieces_at(text, range(4, len(text), 4)), offered=offered)


@pytest.mark.parametrize("format", sorted(STREAMS))
@pytest.mark.parametrize(
    "value", ['print("x")\n  y = "C:\\\\dir" ', "a\n\nb<c \t", "</para", " é 🎉\x01", "x\n", "\n"]
)
def test_fast_paths_equal_the_states_at_every_boundary(format: str, value: str) -> None:
    text = STREAMS[format](value, "Hi <b> | ")
    for cut in range(1, len(text)):  # two chunks, cut at every position
        assert_same_chunks(format, [text[:cut], text[cut:]])
    for size in (1, 2, 3, 4, 5):  # every piece small
        assert_same_chunks(format, pieces_at(text, range(size, len(text), size)))
        assert_same_chunks(format, pieces_at(text, range(size, len(text), size)), channel="reasoning")


@pytest.mark.parametrize("format", sorted(STREAMS))
@pytest.mark.parametrize(
    "extras",
    [
        {"usage": TokenUsage(total_tokens=3)},
        {"refusal": "no", "metadata": {"k": 1}},
        {"reasoning_signature": "sig", "citations": [{"url": "https://example.com/"}]},
    ],
)
@pytest.mark.parametrize("channel", ["content", "reasoning"])
def test_fast_paths_equal_the_states_when_every_chunk_carries_more(
    format: str, extras: dict[str, object], channel: str
) -> None:
    """Each chunk also carries fields the rewriter passes on: a piece of a call's arguments keeps them
    on its chunk, as the states keep them."""
    text = STREAMS[format]('print("x")\n  y = "C:\\\\dir" <b> ', "Hi <b> | ")
    for size in (1, 2, 3, 4, 5):
        assert_same_chunks(format, pieces_at(text, range(size, len(text), size)), channel, extras=extras)


def test_a_piece_of_an_xml_string_value_is_its_own_delta_without_the_value_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter=code>\nx"))

    def refuse(self: XmlArguments, text: str) -> None:
        raise AssertionError(f"value({text!r}) called: the piece was not taken on the fast path")

    monkeypatch.setattr(XmlArguments, "value", refuse)
    assert rewriter.feed(ChunkResponse(content='a "b')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, 'a \\"b')])
    ]
    assert rewriter.feed(ChunkResponse(content="c\\d ")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "c\\\\d ")])
    ]


def test_text_after_a_held_marker_start_goes_out_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="2 <")) == [ChunkResponse(content="2 ")]

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content=" 3 a")) == [ChunkResponse(content="< 3 a")]


def test_qwen3_coder_text_after_a_held_marker_start_needs_no_shortcut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="of <")) == [ChunkResponse(content="of ")]

    def refuse(self: FormatLexer, text: str) -> None:
        raise AssertionError(f"shortcut({text!r}) called")

    monkeypatch.setattr(FormatLexer, "shortcut", refuse)
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="item")) == [ChunkResponse(content="<item")]
        assert rewriter.feed(ChunkResponse(content="s> |")) == [ChunkResponse(content="s> |")]


@pytest.mark.parametrize(
    "pieces",
    [
        ["2 <", "function=f> here"],  # the held start became a marker (an orphan call's opening)
        ["2 <", "function=f>\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call> z"],
        ["2 <", "x <tool_call>\n<function=f>\n</function>\n</tool_call> z"],  # a marker after it
        ["2 <", "x <", "tool_call>\n<function=f>\n</function>\n</tool_call> z"],  # one's start at the end
        ["2 <", "x <t", "ool_call>\n<function=f>\n</function>\n</tool_call> z"],
    ],
)
def test_qwen3_coder_text_after_a_held_marker_start_with_a_marker_is_lexed(pieces: list[str]) -> None:
    assert_same_chunks("qwen3_coder", pieces)


@pytest.mark.parametrize(
    ("format", "pieces"),
    [
        ("qwen3_coder", ["<", "tool_call>\n<function=f>\n</function>\n</tool_call>"]),
        (
            "kimi_k2",
            ["Hi <", "|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argu", "x"],
        ),
        ("json", ["Hi {", '"name": "f", "arguments": {"a": 1}}']),  # a one-character marker, not its start
        ("json", ['{"name": "f", "arguments": {"a": 1}}']),
    ],
)
@pytest.mark.parametrize("channel", ["content", "reasoning"])
def test_text_ending_with_a_marker_start_is_held_as_the_states_hold_it(
    format: str, pieces: list[str], channel: str
) -> None:
    assert_same_chunks(format, pieces, channel)


def test_harmony_analysis_text_in_content_goes_to_reasoning_without_lexing() -> None:
    rewriter = DelimiterRewriter("harmony")
    rewriter.feed(ChunkResponse(content="<|channel|>analysis<|message|>"))

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="Need x")) == [ChunkResponse(reasoning="Need x")]


def test_harmony_header_words_are_collected_without_lexing() -> None:
    rewriter = DelimiterRewriter("harmony", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<|start|>assistant<|channel|>"))

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="commentary to=functions.f ")) == []
    assert rewriter.feed(ChunkResponse(content='<|message|>{"a": 1}<|call|>')) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", '{"a": 1}', True)])
    ]


def test_qwen3_coder_parameter_key_after_its_tag_is_collected_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter="))

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="cont")) == []
    assert rewriter.feed(ChunkResponse(content="ent>\nx\n</parameter>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '{"content": "x"}', True)])
    ]


def _reference_find(markers: Markers, buf: str, pos: int, final: bool) -> tuple[int, int, str | None]:
    """:meth:`Markers.find` as it was written first: the first marker, else the start of the longest
    suffix that is a proper prefix of one (a regex search, then a scan of the end of ``buf``)."""
    ordered = sorted(markers.markers, key=len, reverse=True)
    prefixes = {marker[:size] for marker in ordered for size in range(1, len(marker))}
    best: tuple[int, str] | None = None
    for start in range(pos, len(buf)):
        for marker in ordered:
            if buf.startswith(marker, start):
                best = (start, marker)
                break
        if best is not None:
            break
    if best is not None:
        start, marker = best
        if not final and buf[start:] in prefixes:
            return start, start, None
        return start, start + len(marker), marker
    if final:
        return len(buf), len(buf), None
    for start in range(max(pos, len(buf) - len(ordered[0]) + 1), len(buf)):
        if buf[start:] in prefixes:
            return start, start, None
    return len(buf), len(buf), None


_MARKER_SETS = [
    Markers("</parameter>", "\n<parameter=", "\n</function>", "\n</tool_call>"),
    Markers("</parameter>", "\n</parameter>", "\n<parameter=", "\n</function>", "\n</tool_call>"),
    Markers("<|end|>", "<|return|>", "<|call|>", "<|start|>", "<|channel|>"),
    Markers("<tool_call>", "<function="),
    Markers("<", "<|a|>", ">"),
    Markers("[TOOL_CALLS]", "]"),
]


def test_qwen3_coder_closing_tag_after_a_value_newline_is_held_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter=a>\nab\n\n<")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", '{"a": "ab', False)])
    ]

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="/par")) == []
        assert rewriter.feed(ChunkResponse(content="amet")) == []
    # The newline before the closing tag is the value's trailing one: stripped; the one before it stays.
    assert rewriter.feed(ChunkResponse(content="er>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '\\n"}', True)])
    ]


def test_qwen3_coder_tags_expected_after_a_tag_grow_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)

    assert rewriter.feed(ChunkResponse(content="Hi <tool_call>\n<f")) == [ChunkResponse(content="Hi ")]
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="unct")) == []  # <function= after <tool_call>
    assert rewriter.feed(ChunkResponse(content="ion=f>\n</function>\n</to")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", "{}", True)])
    ]
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="ol_c")) == []  # </tool_call> after </function>
    assert rewriter.feed(ChunkResponse(content="all> bye")) == [ChunkResponse(content=" bye")]
    # What stops being the expected tag is lexed: it was text.
    rewriter.feed(ChunkResponse(content="<tool_call> <fun"))
    assert rewriter.feed(ChunkResponse(content="ny")) == [ChunkResponse(content="<tool_call> <funny")]


def test_qwen3_coder_a_marker_start_ending_a_value_or_a_gap_is_held_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter=a>\nab")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", '{"a": "ab', False)])
    ]

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="c\n<")) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "c", False)])
        ]
        assert rewriter.feed(ChunkResponse(content="/par")) == []
    assert rewriter.feed(ChunkResponse(content="ameter>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"', False)])
    ]
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content=" \n<p")) == []  # between parameters: dropped, "<p" held
        assert rewriter.feed(ChunkResponse(content="aram")) == []
    assert rewriter.feed(ChunkResponse(content="eter=b>\nx\n</parameter>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, ', "b": "x"}', True)])
    ]


def test_a_held_marker_start_completed_goes_to_the_states_without_the_shortcut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    opening = "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argu"
    assert rewriter.feed(ChunkResponse(content=opening)) == []

    def refuse(self: FormatLexer, text: str) -> None:
        raise AssertionError(f"shortcut({text!r}) called: it could not have taken the text")

    monkeypatch.setattr(FormatLexer, "shortcut", refuse)
    assert rewriter.feed(ChunkResponse(content="ment_begin|>{}")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "functions.f:0", "f", "{}", False)])
    ]


def test_qwen3_coder_tags_around_a_value_are_taken_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter=a>\nab\n</par")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "f", '{"a": "ab', False)])
    ]

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="amet")) == []
        assert rewriter.feed(ChunkResponse(content="er>\n")) == [  # </parameter>: the value ends
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"', False)])
        ]
        assert rewriter.feed(ChunkResponse(content="<par")) == []
        assert rewriter.feed(ChunkResponse(content="ameter=k")) == []  # <parameter=, the key begins
        assert rewriter.feed(ChunkResponse(content="ey>\nx\n")) == [  # the key ends, the value begins
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, ', "key": "x', False)])
        ]
    # (two tags in one chunk: lexed)
    assert rewriter.feed(ChunkResponse(content="</parameter>\n<parameter=n>7\n<")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '", "n": ', False)])
    ]
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="/parameter>\n")) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "7", False)])
        ]
        assert rewriter.feed(ChunkResponse(content="</function>\n")) == [  # </function>: the call ends
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "}", True)])
        ]
        assert rewriter.feed(ChunkResponse(content="</tool_call>")) == []
    assert rewriter.finish() == []


def test_qwen3_coder_text_between_values_is_dropped_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content="<tool_call>\n<function=f>\n<parameter=a>\nx\n"))
    with not_lexed():  # what is not a tag between two values is dropped, as the states drop it
        assert rewriter.feed(ChunkResponse(content="</parameter> stray words <")) == [
            ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '"', False)])
        ]
        assert rewriter.feed(ChunkResponse(content="b> more <param")) == []
    assert rewriter.feed(ChunkResponse(content="eter=b>\n1\n</parameter>\n</function>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, ', "b": 1}', True)])
    ]


def test_qwen3_coder_a_call_opening_is_held_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="Hi <to")) == [ChunkResponse(content="Hi ")]

    with not_lexed():
        for piece in ("ol_c", "all>", "\n <f", "unct", "ion=", "fi"):
            assert rewriter.feed(ChunkResponse(content=piece)) == []
    assert rewriter.feed(ChunkResponse(content="nd>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "find", "{}", True)])
    ]
    with not_lexed():
        for piece in ("\n\n<", "tool_call>", "\n<function=", "g"):  # the next call's opening
            assert rewriter.feed(ChunkResponse(content=piece)) == []
        assert rewriter.feed(ChunkResponse(content="o>\n<")) == [  # the name ends: the call starts
            ChunkResponse(tool_calls=[ToolCallDelta(1, "call_1", "go", None, False)])
        ]
        assert rewriter.feed(ChunkResponse(content="param")) == []


@pytest.mark.parametrize(
    "text",
    [
        "A <tool_call>\n<function=f>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n"
        "<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\nB",
        "<tool_call><function=f></function></tool_call><tool_call> x",
        "<tool_call>\n<function=f>\n</function>\n</tool_call>\n</tool_call> <tool <function=",
        "<tool_call>\n<function=f>\n</function>\n \n</tool_call>\n<tool_call>\n<function=a b>",
        "A <tool <tool_call> x <function=f> y\n<function=g>\n<parameter=a>\n1\n</parameter>\n</function>\n"
        "</tool_call> z",
        "<tool_call>\n<function=f>\n<parameter= a b >\n\n\nv\n\n</parameter>\n junk <parameter=c>\n1\n"
        "</parameter>\n</function></tool_call>\n</tool_call>",
    ],
)
@pytest.mark.parametrize("offered", [None, {"f"}, set()])
def test_qwen3_coder_calls_in_a_row_at_every_boundary(text: str, offered: set[str] | None) -> None:
    """Calls one after another, and what only looks like one, with and without a guard (``f``
    offered or not)."""
    for cut in range(1, len(text)):
        assert_same_chunks("qwen3_coder", [text[:cut], text[cut:]], offered=offered)
    for size in (1, 2, 3, 4, 5):
        assert_same_chunks("qwen3_coder", pieces_at(text, range(size, len(text), size)), offered=offered)


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>" + " " * 5000 + "<function=f></function></tool_call>",
        "<tool_call>\n<function=" + "f" * 5000 + "></function></tool_call>",
        "<tool_call><function=f></function></tool_call>" + "\n" * 5000 + "<tool_call><function=g>",
        "<tool_call><function=f></function>" + " " * 5000 + "</tool_call> after",
    ],
)
def test_qwen3_coder_a_long_opening_is_given_up_as_the_states_give_it_up(text: str) -> None:
    for size in (3, 4, 64):
        assert_same_chunks("qwen3_coder", pieces_at(text, range(size, len(text), size)))


def test_qwen3_coder_function_name_pieces_are_held_without_lexing() -> None:
    rewriter = DelimiterRewriter("qwen3_coder", id_factory=numbered_ids)
    assert rewriter.feed(ChunkResponse(content="Hi <tool_call>\n<function=wr")) == [
        ChunkResponse(content="Hi ")
    ]

    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="ite_")) == []
    assert rewriter.feed(ChunkResponse(content="file>\n</function>\n</tool_call>")) == [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "call_0", "write_file", "{}", True)])
    ]
    # A name that turns out not to be one goes out as the text it was, the held pieces included.
    rewriter.feed(ChunkResponse(content="<tool_call><function=a"))
    with not_lexed():
        assert rewriter.feed(ChunkResponse(content="bc")) == []
    assert rewriter.feed(ChunkResponse(content=" x")) == [ChunkResponse(content="<tool_call><function=abc x")]


@pytest.mark.parametrize(
    ("format", "before", "pieces"),
    [
        ("qwen3_coder", "Hi <t", ["ool_", "call"]),  # the text state's marker
        ("qwen3_coder", "<tool_call>\n<f", ["unct", "ion"]),  # a literal expected after a tag
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=a>\nx\n</p", ["aram", "eter"]),  # a value's
        ("kimi_k2", "Hi <|tool_calls_sec", ["tion_", "begin"]),
        ("harmony", "<|start|>assistant<|chan", ["nel|"]),
    ],
)
def test_a_held_marker_start_that_grows_needs_no_shortcut(
    monkeypatch: pytest.MonkeyPatch, format: str, before: str, pieces: list[str]
) -> None:
    rewriter = DelimiterRewriter(format, id_factory=numbered_ids)
    got = rewriter.feed(ChunkResponse(content=before))
    shortcut = FormatLexer.shortcut

    def refuse(self: FormatLexer, text: str) -> None:
        raise AssertionError(f"shortcut({text!r}) called")

    monkeypatch.setattr(FormatLexer, "shortcut", refuse)
    for piece in pieces:
        assert rewriter.feed(ChunkResponse(content=piece)) == []
    monkeypatch.setattr(FormatLexer, "shortcut", shortcut)
    got += [*rewriter.feed(ChunkResponse(content=" z")), *rewriter.finish()]
    whole = DelimiterRewriter(format, id_factory=numbered_ids)
    expected = [*whole.feed(ChunkResponse(content=before + "".join(pieces) + " z")), *whole.finish()]
    assert _folded(got) == _folded(expected)


def _folded(chunks: list[ChunkResponse]) -> tuple[str, str | None, dict[int, str]]:
    arguments: dict[int, str] = {}
    for chunk in chunks:
        for delta in chunk.tool_calls or ():
            arguments[delta.index] = arguments.get(delta.index, "") + (delta.arguments_delta or "")
    reasoning = "".join(chunk.reasoning or "" for chunk in chunks) or None
    return "".join(chunk.content for chunk in chunks), reasoning, arguments


@given(
    markers=st.sampled_from(_MARKER_SETS),
    buf=st.text(alphabet=st.sampled_from(list("<|/>\n=[]TOLCSaceprmtnd_ ")), max_size=30),
    pos=st.integers(0, 5),
    final=st.booleans(),
)
@settings(max_examples=500, deadline=None)
def test_markers_find_equals_the_reference(markers: Markers, buf: str, pos: int, final: bool) -> None:
    pos = min(pos, len(buf))
    assert markers.find(buf, pos, final) == _reference_find(markers, buf, pos, final)


@given(st.text())
def test_json_escape_equals_msgspec(text: str) -> None:
    if not any("\ud800" <= char <= "\udfff" for char in text):
        assert json_escape(text) == msgspec.json.encode(text).decode()[1:-1]


_EXTRAS = st.sampled_from(
    [
        {},
        {"usage": TokenUsage(total_tokens=3)},
        {"metadata": {"k": 1}},
        {"finish_reason": "stop"},
        {"finish_reason": "length"},
        {"tool_calls": []},
        {"tool_calls": [ToolCallDelta(0, "srv", "g", "{}", True)]},
        {"reasoning_done": True},
        {"refusal": "no"},
        {"reasoning_signature": "sig", "reasoning_id": "rs_1"},
        {"citations": [{"url": "https://example.com/"}]},
        {"image_urls": ["https://example.com/a.png"]},
    ]
)


@pytest.mark.parametrize("format", sorted(STREAMS))
@given(
    value=_VALUE_TEXT,
    prose=st.sampled_from(["", "Hi <b> | ", "a\n"]),
    cuts=st.lists(st.integers(1, 200)),
    extras=st.lists(_EXTRAS, min_size=1, max_size=8),
    channel=st.sampled_from(["content", "reasoning"]),
)
@settings(max_examples=40, deadline=None)
def test_fast_paths_equal_the_states_with_other_fields_on_the_chunks(
    format: str, value: str, prose: str, cuts: list[int], extras: list[dict[str, object]], channel: str
) -> None:
    text = STREAMS[format](value, prose)
    pieces = pieces_at(text, cuts)
    chunks = [
        ChunkResponse(**{channel: piece}, **extras[number % len(extras)])  # type: ignore[arg-type]
        for number, piece in enumerate(pieces)
    ]

    def run(rewriter: DelimiterRewriter) -> list[ChunkResponse]:
        out = [chunk for item in chunks for chunk in rewriter.feed(item)]
        return out + rewriter.finish()

    fast = run(DelimiterRewriter(format, id_factory=numbered_ids))
    slow = run(_NoShortcut(format, id_factory=numbered_ids))
    assert fast == slow, f"{format} at {chunks!r}"
    assert [id(chunk) in {id(item) for item in chunks} for chunk in fast] == [
        id(chunk) in {id(item) for item in chunks} for chunk in slow
    ]  # a chunk that goes on as it is, goes on as the same object on both paths


@pytest.mark.parametrize(
    ("format", "opening", "pieces", "expected"),
    [
        (
            "kimi_k2",
            "Hi ",
            ["plain", " text"],
            [ChunkResponse(content="plain"), ChunkResponse(content=" text")],
        ),
        (
            "kimi_k2",
            '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": "x',
            ["abcd", "é 🎉"],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "abcd")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "é 🎉")]),
            ],
        ),
        (
            "qwen3_coder",
            "<tool_call>\n<function=f>\n<parameter=code>\nx",
            ["abcd", "e f "],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "abcd")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "e f ")]),
            ],
        ),
        (
            "kimi_k2",
            '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": "x',
            ["C:\\", "\\dir", "\\", "ny"],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "C:\\")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "\\dir")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "\\")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "ny")]),  # (\\n)
            ],
        ),
        (
            "qwen3_coder",
            "<tool_call>\n<function=f>\n<parameter=code>\nx",
            ['say "hi', '" \\ ok'],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, 'say \\"hi')]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '\\" \\\\ ok')]),
            ],
        ),
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=o>\n{", ['"a": ', "1, ", '"b'], []),
        ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>fu", ["ncti", "ons."], []),
        (
            "kimi_k2",
            '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": 1',
            [', "b', '": [2', "]   "],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, ', "b')]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, '": [2')]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "]")]),  # (the space held)
            ],
        ),
        ("harmony", "<|start|>assistant<|channel|>comm", ["enta", "ry t"], []),
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=co", ["nten", "t_2"], []),
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=a>\nx</parameter>\n", ["  \n ", " \t"], []),
        ("kimi_k2", "Hi", [" a <b>", "|c"], [ChunkResponse(content=" a <b>"), ChunkResponse(content="|c")]),
        (
            "qwen3_coder",
            "<tool_call>\n<function=f>\n<parameter=code>\nx",
            ["a <b", "c\nd"],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "a <b")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "c\\nd")]),
            ],
        ),
        (
            "harmony",
            "<|channel|>analysis<|message|>Need",
            [" x, ", "y"],
            [ChunkResponse(reasoning=" x, "), ChunkResponse(reasoning="y")],
        ),
        (
            "harmony",
            '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": "b',
            ["cdef", "gh"],
            [
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "cdef")]),
                ChunkResponse(tool_calls=[ToolCallDelta(0, None, None, "gh")]),
            ],
        ),
    ],
)
def test_plain_pieces_after_the_first_need_no_shortcut(
    monkeypatch: pytest.MonkeyPatch,
    format: str,
    opening: str,
    pieces: list[str],
    expected: list[ChunkResponse],
) -> None:
    """Once a piece left the lexer where plain text is decided by a few characters, the next plain
    pieces go out without the lexer (the per-delta cost of the benchmark's 4-character deltas)."""
    rewriter = DelimiterRewriter(format, id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content=opening))

    def refuse(self: FormatLexer, text: str) -> bool:
        raise AssertionError(f"shortcut({text!r}) called")

    monkeypatch.setattr(FormatLexer, "shortcut", refuse)
    for cls in type(rewriter._content).__mro__:
        if "shortcut" in cls.__dict__ and cls is not FormatLexer:
            monkeypatch.setattr(cls, "shortcut", refuse)
    got = [chunk for piece in pieces for chunk in rewriter.feed(ChunkResponse(content=piece))]
    assert got == expected


_MARKER_TEXT = st.text(
    alphabet=st.sampled_from(["<", "|", "/", "\n", "t", "o", "a", "=", ">", "x"]), max_size=12
)


@pytest.mark.parametrize("format", sorted(STREAMS))
@given(text=_MARKER_TEXT)
def test_text_without_a_marker_start_pair_holds_no_marker(format: str, text: str) -> None:
    """The fast path's test (none of ``Markers.starts``, no ``tail`` character at the end) implies
    what the shortcut tests (``absent_from``), for every set of markers of the format."""
    lexer_type = type(DelimiterRewriter(format)._content)
    sets = {value for cls in lexer_type.__mro__ for value in vars(cls).values() if isinstance(value, Markers)}
    module = __import__(lexer_type.__module__, fromlist=["_"])
    sets |= {value for value in vars(module).values() if isinstance(value, Markers)}
    for markers in sets:
        clear = not any(start in text for start in markers.starts) and (
            markers.tail is None or not text or text[-1] not in markers.tail
        )
        if clear:
            assert markers.absent_from(text), (markers.markers, text)


# --- JSON arguments, plain text and the helpers the rules stand on ---

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
