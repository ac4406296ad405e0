"""The framework helpers the formats share: whitespace held before an expected literal, headers held
while a call is unconfirmed, and the wrapper reader's lists and cut-off calls."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar

import pytest

import operators.delimiters._lexer as lexer_module
from operators.delimiters import FORMATS, DelimiterRewriter, FormatLexer
from operators.delimiters._scan import HEADER_LIMIT, Markers
from operators.delimiters.rewriter import _Output
from tests.delimiter_cases import Call, run


class _Probe(FormatLexer):
    """A bare lexer, to call the helpers directly."""

    text_markers: ClassVar[Markers] = Markers("<x>")


def probe() -> _Probe:
    rewriter = DelimiterRewriter(_Probe)
    return rewriter._content  # type: ignore[return-value]


def test_expect_after_space_finds_the_literal_after_whitespace() -> None:
    lexer = probe()
    assert lexer.expect_after_space(" \n</a>rest", 0, False, ("</b>", "</a>")) == (2, "</a>")
    assert lexer.take_tentative() == " \n"


def test_expect_after_space_waits_for_a_partial_literal_or_more_input() -> None:
    lexer = probe()
    assert lexer.expect_after_space("  </", 0, False, ("</a>",)) == (2, None)
    assert lexer.expect_after_space("   ", 0, False, ("</a>",)) == (3, None)
    assert lexer.expect_after_space("</", 0, True, ("</a>",)) == (0, "")  # at the end nothing comes


def test_expect_after_space_reports_anything_else() -> None:
    lexer = probe()
    assert lexer.expect_after_space(" x", 0, False, ("</a>",)) == (1, "")
    assert lexer.expect_after_space("</b>", 0, False, ("</a>",)) == (0, "")


def test_expect_after_space_gives_up_past_the_cap() -> None:
    lexer = probe()
    spaces = " " * (HEADER_LIMIT + 1)
    assert lexer.expect_after_space(spaces + "</a>", 0, False, ("</a>",)) == (len(spaces), "")


def test_char_after_space() -> None:
    lexer = probe()
    assert lexer.char_after_space(" \n{x", 0) == (2, "{")
    assert lexer.char_after_space("  ", 0) == (2, "")
    assert lexer.take_tentative() == " \n  "
    lexer.hold_tentative("<x>")
    lexer.state = lexer.finish  # type: ignore[assignment]
    spaces = " " * (HEADER_LIMIT + 1)
    assert lexer.char_after_space(spaces + "{", 0) == (len(spaces), "")
    assert lexer.state == lexer.start  # not a call: released
    assert lexer.tentative is None


def test_hold_header_collects_and_holds_until_the_cap() -> None:
    lexer = probe()
    assert lexer.hold_header("get_")
    assert lexer.hold_header("weather")
    assert lexer.take_header() == "get_weather"
    assert lexer.take_tentative() == "get_weather"
    assert not lexer.hold_header("x" * (HEADER_LIMIT + 1))
    assert lexer.take_header() == ""  # dropped


def test_not_a_call_releases_what_was_held() -> None:
    output = _Output(str)
    lexer = _Probe(output, "content", DelimiterRewriter(_Probe)._options)
    lexer.hold_tentative("<x>")
    lexer.state = lexer.finish  # type: ignore[assignment]
    lexer.not_a_call()
    assert lexer.state == lexer.start
    assert output.ops == [("content", ["<x>"])]


# --- the wrapper reader -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("format", "text"),
    [
        ("hermes", '<tool_call>{"arguments": {"a": 1}, "name": "get_we'),
        ("mistral", '[TOOL_CALLS][{"arguments": {"a": 1}, "name": "get_we'),
        ("mistral", '[TOOL_CALLS]{"arguments": {"a": 1}, "name": "get_we'),
        ("llama3_json", '<|python_tag|>{"parameters": {"a": 1}, "name": "get_we'),
        ("json", '{"tool": {"parameters": {"a": 1}, "function": "get_we'),
        ("json", '{"tools": [{"parameters": {"a": 1}, "function": "get_we'),
    ],
)
def test_cut_off_wrapper_keeps_the_name_so_far_and_the_arguments(format: str, text: str) -> None:
    for pieces in ([text], list(text)):
        assert run(format, pieces).calls == [Call(0, "call_0", "get_we", '{"a": 1}', finished=False)]


@pytest.mark.parametrize(
    ("format", "text"),
    [
        ("hermes", '<tool_call>{"id": "abc", "name": "f", "arguments": {"a'),
        ("mistral", '[TOOL_CALLS][{"id": "abc", "name": "f", "arguments": {"a'),
        ("json", '{"tool": {"id": "abc", "function": "f", "parameters": {"a'),
    ],
)
def test_cut_off_wrapper_keeps_the_models_id(format: str, text: str) -> None:
    assert run(format, [text]).calls == [Call(0, "abc", "f", '{"a', finished=False)]


def test_cut_off_inside_an_id_string_is_not_a_name() -> None:
    assert run("mistral", ['[TOOL_CALLS][{"id": "ab']).calls == [Call(0, "call_0", "", "", finished=False)]


@pytest.mark.parametrize(
    ("format", "text", "after"),
    [
        ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]', ""),
        (
            "mistral",
            '[TOOL_CALLS][{"name": "a", "arguments": {}} , {"name": "b", "arguments": {"x": 1}} ] ok',
            " ok",
        ),
        (
            "json",
            '{"tools": [{"function": "a", "parameters": {}}, {"function": "b", "parameters": {"x": 1}}]}',
            "",
        ),
        (
            "json",
            '{"tools": [{"function": "a", "parameters": {}},{"function": "b", "parameters": {"x": 1}}]} ok',
            " ok",
        ),
    ],
)
def test_lists_of_call_objects(format: str, text: str, after: str) -> None:
    for pieces in ([text], list(text)):
        result = run(format, pieces)
        assert result.calls == [Call(0, "call_0", "a", "{}"), Call(1, "call_1", "b", '{"x": 1}')]
        assert result.content == after


def test_list_item_that_is_not_an_object_is_text() -> None:
    result = run("mistral", ['[TOOL_CALLS][{"name": "a", "arguments": {}}, 7]'])
    assert result.calls == [Call(0, "call_0", "a", "{}")]
    assert result.content == "7]"


# --- sections -----------------------------------------------------------------------------------------------

DEEPSEEK_CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
DEEPSEEK_CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"


@pytest.mark.parametrize(
    ("format", "section", "opener"),
    [
        ("kimi_k2", "<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
        ("deepseek_v31", DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALL_BEGIN),
        ("deepseek_v3", DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALL_BEGIN),
    ],
)
def test_header_past_the_cap_is_text_with_what_follows_it(format: str, section: str, opener: str) -> None:
    header = "x" * (HEADER_LIMIT + 10)
    result = run(format, [section + opener + header, " more"])
    assert result.calls == []
    assert result.content == opener + header + " more"


def test_the_engine_stands_alone_and_every_format_lives_in_formats() -> None:
    tree = ast.parse(Path(lexer_module.__file__ or "").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert {name for name in imported if name and name.startswith("operators.")} == {
        "operators.delimiters._engine",
        "operators.delimiters._rules",
        "operators.delimiters._scan",
    }
    assert {lexer.__module__.rpartition(".")[0] for lexer in FORMATS.values()} == {
        "operators.delimiters.formats"
    }
