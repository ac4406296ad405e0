"""The delimiter rewriter's framework: marker scanning, JSON and XML argument scanners, the core's packing of
chunks, the registry and the async operator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiostream import stream, streamcontext
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import FORMATS, DelimiterRewriter, get_format, rewrite_delimiters
from operators.delimiters._scan import JsonArgs, Markers, XmlArguments, value_type_from_schema
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta
from tests.delimiter_cases import numbered_ids, pieces_at, run

SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, AB, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
CALL = f"{SB}{CB}functions.f:0{AB}" + '{"a": 1}' + f"{CE}{SE}"


# --- Markers --------------------------------------------------------------------------------------


def test_markers_find_first_and_hold_partial_suffix() -> None:
    markers = Markers("<a>", "<bc>")
    assert markers.find("x<bc>y<a>", 0, False) == (1, 5, "<bc>")
    assert markers.find("x<bc>y<a>", 5, False) == (6, 9, "<a>")
    assert markers.find("text <b", 0, False) == (5, 5, None)
    assert markers.find("text <b", 0, True) == (7, 7, None)
    assert markers.find("a < b", 0, False) == (5, 5, None)
    assert markers.find("x<", 0, False) == (1, 1, None)


def test_markers_hold_a_marker_that_may_grow_into_a_longer_one() -> None:
    markers = Markers("<t>", "<t>\n")
    assert markers.find("x<t>", 0, False) == (1, 1, None)
    assert markers.find("x<t>", 0, True) == (1, 4, "<t>")
    assert markers.find("x<t>\n", 0, False) == (1, 5, "<t>\n")
    assert markers.find("x<t>y", 0, False) == (1, 4, "<t>")


def reference_find(markers: tuple[str, ...], buf: str, pos: int, final: bool) -> tuple[int, int, str | None]:
    """What ``Markers.find`` means, one position at a time: the first place that starts a marker (the
    longest there) or, unless ``final``, that starts a proper prefix of one running to the end."""
    for start in range(pos, len(buf)):
        rest = buf[start:]
        if not final and any(len(rest) < len(marker) and marker.startswith(rest) for marker in markers):
            return start, start, None
        found = [marker for marker in markers if rest.startswith(marker)]
        if found:
            marker = max(found, key=len)
            return start, start + len(marker), marker
    return len(buf), len(buf), None


MARKER_SETS = (
    ("<a>", "<bc>"),
    ("<t>", "<t>\n"),
    ("</parameter>", "\n</parameter>", "\n<parameter=", "\n</function>", "\n</tool_call>"),
    ("<|end|>", "<|return|>", "<|call|>", "<|start|>", "<|channel|>"),
    ("ab", "abc", "bcd"),
    (">",),
    ("[TOOL_CALLS]", "x"),
)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(MARKER_SETS),
    st.lists(st.one_of(st.sampled_from(("<", "</", "\n", "\n<", "x", " ", "|", "<|", "ab"))), max_size=12),
    st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=12),
    st.integers(min_value=0, max_value=40),
    st.booleans(),
)
def test_markers_find_agrees_with_the_reference(
    markers: tuple[str, ...], noise: list[str], cuts: list[int], pos: int, final: bool
) -> None:
    """Text made of markers, their prefixes and look-alikes (many places that start like a marker
    without being one, so that the search past the first few runs too)."""
    pieces = [
        markers[cut % len(markers)][: cut % 5 + 1] if cut % 3 else markers[cut % len(markers)] for cut in cuts
    ]
    buf = "".join(piece for pair in zip(noise, pieces, strict=False) for piece in pair) + "".join(
        pieces[len(noise) :]
    )
    pos = min(pos, len(buf))
    assert Markers(*markers).find(buf, pos, final) == reference_find(markers, buf, pos, final)


def test_markers_find_past_many_look_alikes() -> None:
    markers = Markers("</parameter>", "\n</parameter>")
    buf = "</p> " * 10 + "</parameter>" + "</pa"
    assert markers.find(buf, 0, False) == (50, 62, "</parameter>")
    assert markers.find(buf, 62, False) == (62, 62, None)
    assert markers.find(buf, 62, True) == (66, 66, None)


def test_markers_reject_quote_and_empty() -> None:
    with pytest.raises(ValueError, match="quote"):
        Markers('"x')
    with pytest.raises(ValueError, match="non-empty"):
        Markers()


# --- JsonArgs -------------------------------------------------------------------------------------


def scan_all(pieces: list[str], markers: Markers) -> tuple[str, str | None, bool]:
    """Feed pieces to a JsonArgs as a lexer would (holding back what it returns); the emitted text, the
    marker found, and whether the JSON was complete."""
    scanner = JsonArgs()
    out: list[str] = []
    held = ""
    for piece in pieces:
        buf = held + piece
        stop, resume, marker = scanner.scan(buf, 0, markers, False)
        out.append(scanner.trim(buf[:stop]))
        if marker is not None:
            return "".join(out), marker, scanner.complete
        held = buf[resume:]
    stop, _resume, marker = scanner.scan(held, 0, markers, True)
    out.append(scanner.trim(held[:stop]))
    return "".join(out), marker, scanner.complete


JSON_TEXT = ' \n {"s": "<end> \\" \\\\", "l": [1, {"k": "}"}], "t": true}  \n<end>rest'


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(JSON_TEXT) - 1), max_size=30))
def test_json_args_find_markers_outside_strings_only(cuts: set[int]) -> None:
    text, marker, complete = scan_all(pieces_at(JSON_TEXT, cuts), Markers("<end>"))
    assert (text, marker, complete) == (
        '{"s": "<end> \\" \\\\", "l": [1, {"k": "}"}], "t": true}',
        "<end>",
        True,
    )


@settings(max_examples=500, deadline=None)
@given(
    st.text(alphabet='"\\{}[]a :,', max_size=40),
    st.booleans(),
    st.booleans(),
    st.integers(min_value=-1, max_value=3),
    st.booleans(),
    st.booleans(),
    st.sampled_from(("", " ", "\n ")),
)
def test_json_args_take_agrees_with_scan(
    text: str, in_string: bool, escape: bool, depth: int, opened: bool, emitted: bool, pending: str
) -> None:
    """The fast path's take (character by character up to 16, else by scan) leaves the scanner as
    scanning the same text to its end does, from any state, and emits what trim does."""
    taker, scanner = JsonArgs(), JsonArgs()
    for args in (taker, scanner):
        args.in_string, args.escape, args.depth = in_string, escape and in_string, depth
        args.opened, args.emitted = opened, emitted
        args._pending_space = "" if in_string else pending
    markers = Markers("<end>")
    taken = taker.take(text, markers)
    scanner.scan(text, 0, markers, True)
    assert taken == scanner.trim(text)
    state = (taker.in_string, taker.escape, taker.depth, taker.opened, taker.emitted, taker._pending_space)
    assert state == (
        scanner.in_string,
        scanner.escape,
        scanner.depth,
        scanner.opened,
        scanner.emitted,
        scanner._pending_space,
    )


def test_json_args_cut_off_is_incomplete_and_keeps_string_whitespace() -> None:
    assert scan_all(['{"a": "x  '], Markers("<end>")) == ('{"a": "x  ', None, False)
    assert scan_all(['{"a": [1, ', "2"], Markers("<end>")) == ('{"a": [1, 2', None, False)


def test_json_args_stop_at_close() -> None:
    scanner = JsonArgs()
    buf = '{"a": {"b": "}"}}, "name": "x"}'
    assert scanner.scan(buf, 0, Markers("</t>"), False, stop_at_close=True) == (17, 17, "")
    assert scanner.trim(buf[:17]) == '{"a": {"b": "}"}}'
    assert scanner.complete


@pytest.mark.parametrize(
    ("pieces", "complete"),
    [
        (['{"a": 1}'], True),
        (['{"a": 1}', "  \n"], True),
        (['"text"'], True),
        (["[1, ", "2]"], True),
        (['{"a": 1', "}"], True),
        (['{"a": "}', '"'], False),
        (['{"a": 1}', "<"], False),
        (['{"a": 1}x'], False),
        (['{"a": 1} ', "x"], False),
        (["12"], False),
    ],
)
def test_json_args_complete_only_when_nothing_follows_the_root(pieces: list[str], complete: bool) -> None:
    """What an end marker that may be left out relies on: text after the root value (a cut inside the
    marker, released at the end) leaves the arguments incomplete."""
    scanner = JsonArgs()
    for piece in pieces:
        scanner.scan(piece, 0, Markers("</t>"), True)
        scanner.trim(piece)
    assert scanner.complete is complete


# --- XmlArguments ---------------------------------------------------------------------------------


def xml(params: list[tuple[str, str, list[str]]], strip: str = "newline", limit: int = 1 << 20) -> str:
    out: list[str] = []
    writer = XmlArguments(out.append, strip=strip, limit=limit)
    for key, value_type, pieces in params:
        writer.begin(key, value_type)
        for piece in pieces:
            writer.value(piece)
        writer.end_value()
    writer.close()
    return "".join(out)


def test_xml_arguments_stream_strings_and_type_values() -> None:
    text = xml(
        [("s", "auto", ["\n", 'a "b"', "\n", "\n"]), ("n", "auto", ["1", "2"]), ("o", "auto", ["[1", "]"])]
    )
    assert text == '{"s": "a \\"b\\"\\n", "n": 12, "o": [1]}'
    assert xml([]) == "{}"


def test_xml_arguments_emit_the_key_before_the_value_arrives() -> None:
    out: list[str] = []
    writer = XmlArguments(out.append)
    writer.begin("path", "auto")
    assert out == ['{"path": ']
    writer.value("/tmp")
    assert out == ['{"path": ', '"/tmp']


@pytest.mark.parametrize(
    ("value_type", "value", "expected"),
    [
        ("integer", "3.0", 3),
        ("integer", "x", "x"),
        ("number", "2", 2),
        ("boolean", "False", False),
        ("null", "None", None),
        ("object", "{'a': (1)}", {"a": 1}),
        ("array", "{}", "{}"),
        ("json", "nope", "nope"),
        ("string", "7", "7"),
    ],
)
def test_xml_arguments_schema_conversion(value_type: str, value: str, expected: object) -> None:
    assert json.loads(xml([("k", value_type, [value])], strip="none")) == {"k": expected}


def test_xml_arguments_space_strip_and_over_limit_raw_release() -> None:
    assert xml([("k", "string", ["  a ", " b  ", " "])], strip="space") == '{"k": "a  b"}'
    assert xml([("k", "auto", ["{", '"x": 1', "}"])], limit=3) == '{"k": {"x": 1}}'


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "string"}, "string"),
        ({"type": ["integer", "null"]}, "integer"),
        ({"anyOf": [{"type": "number"}, {"type": "null"}]}, "number"),
        ({"type": ["integer", "string"]}, "json"),
        ({"enum": ["a", "b"]}, "string"),
        ({}, "auto"),
    ],
)
def test_value_type_from_schema(prop: dict[str, object], expected: str) -> None:
    assert value_type_from_schema({"properties": {"k": prop}}, "k") == expected


def test_value_type_without_schema_or_undeclared_key() -> None:
    assert value_type_from_schema(None, "k") == "auto"
    assert value_type_from_schema({"properties": {}}, "k") == "string"


# --- the core -------------------------------------------------------------------------------------


def test_plain_chunks_pass_through_as_the_same_objects() -> None:
    rewriter = DelimiterRewriter("kimi_k2")
    chunk = ChunkResponse(content="hello", usage=TokenUsage(prompt_tokens=1))
    assert rewriter.feed(chunk)[0] is chunk
    reasoning = ChunkResponse(reasoning="thinking")
    assert rewriter.feed(reasoning)[0] is reasoning


def test_chunk_that_is_all_held_back_gives_nothing_until_released() -> None:
    rewriter = DelimiterRewriter("kimi_k2")
    assert rewriter.feed(ChunkResponse(content="<|tool_")) == []
    assert rewriter.feed(ChunkResponse(content="x")) == [ChunkResponse(content="<|tool_x")]
    assert rewriter.feed(ChunkResponse(content="<|")) == []
    assert rewriter.finish() == [ChunkResponse(content="<|")]


def test_other_fields_ride_on_the_last_chunk() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    chunk = ChunkResponse(
        content="A" + CALL + "B",
        reasoning="R",
        usage=TokenUsage(total_tokens=9),
        metadata={"id": "x"},
        refusal="no",
        image_urls=["u"],
    )
    first, second = rewriter.feed(chunk)
    assert first == ChunkResponse(
        content="A",
        reasoning="R",
        tool_calls=[ToolCallDelta(0, "functions.f:0", "f", '{"a": 1}', True)],
    )
    assert second == ChunkResponse(
        content="B", usage=TokenUsage(total_tokens=9), metadata={"id": "x"}, refusal="no", image_urls=["u"]
    )


def test_held_text_chunk_with_other_fields_still_yields_them() -> None:
    rewriter = DelimiterRewriter("kimi_k2")
    (chunk,) = rewriter.feed(ChunkResponse(content="<|tool", usage=TokenUsage(total_tokens=3)))
    assert chunk == ChunkResponse(content="", usage=TokenUsage(total_tokens=3))


def test_finish_reason_stop_becomes_tool_calls_and_keeps_the_original() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content=CALL))
    (chunk,) = rewriter.feed(ChunkResponse(finish_reason="stop", metadata={"model": "k"}))
    assert (chunk.finish_reason, chunk.metadata) == ("tool_calls", {"model": "k", "stop_reason": "stop"})
    other = DelimiterRewriter("kimi_k2")
    other.feed(ChunkResponse(content=CALL))
    (kept,) = other.feed(ChunkResponse(finish_reason="stop", metadata={"stop_reason": "end_turn"}))
    assert (kept.finish_reason, kept.metadata) == ("tool_calls", {"stop_reason": "end_turn"})
    (plain,) = DelimiterRewriter("kimi_k2").feed(ChunkResponse(content="x", finish_reason="stop"))
    assert plain.finish_reason == "stop"
    (length,) = DelimiterRewriter("kimi_k2").feed(ChunkResponse(content=CALL, finish_reason="length"))
    assert length.finish_reason == "length"


def test_server_tool_calls_keep_their_index_unless_a_delimiter_call_took_it() -> None:
    chunks = [
        ChunkResponse(tool_calls=[ToolCallDelta(0, "api_a", "a", "{")]),
        ChunkResponse(content=CALL),
        ChunkResponse(
            tool_calls=[ToolCallDelta(0, None, None, "}", True), ToolCallDelta(1, "api_b", "b", "{}")]
        ),
    ]
    result = run("kimi_k2", chunks)
    assert [(call.index, call.call_id, call.arguments) for call in result.calls] == [
        (0, "api_a", "{}"),
        (1, "functions.f:0", '{"a": 1}'),
        (2, "api_b", "{}"),
    ]


def test_is_complete_ends_the_calls_and_starts_a_new_response() -> None:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=numbered_ids)
    rewriter.feed(ChunkResponse(content=f"{SB}{CB}functions.f:0{AB}" + '{"a": 1'))
    (last,) = rewriter.feed(ChunkResponse(content="}", is_complete=True, finish_reason="stop"))
    assert last == ChunkResponse(
        is_complete=True,
        finish_reason="tool_calls",
        metadata={"stop_reason": "stop"},
        tool_calls=[ToolCallDelta(0, None, None, "}", True)],
    )
    (again,) = rewriter.feed(ChunkResponse(content=CALL))
    assert again.tool_calls == [ToolCallDelta(0, "functions.f:0", "f", '{"a": 1}', True)]
    assert rewriter.finish() == []


def test_is_complete_releases_held_text_before_it() -> None:
    rewriter = DelimiterRewriter("kimi_k2")
    assert rewriter.feed(ChunkResponse(content="x <|tool")) == [ChunkResponse(content="x ")]
    assert rewriter.feed(ChunkResponse(is_complete=True)) == [
        ChunkResponse(content="<|tool", is_complete=True)
    ]
    assert rewriter.finish() == []


DEEPSEEK_CALL = (
    "<\uff5ctool\u2581call\u2581begin\uff5c>f<\uff5ctool\u2581sep\uff5c>{}"
    "<\uff5ctool\u2581call\u2581end\uff5c>"
)


def test_generated_ids_use_the_id_factory_with_the_call_index() -> None:
    result = run("deepseek_v31", ["a", DEEPSEEK_CALL, DEEPSEEK_CALL], id_factory=lambda i: f"id{i}")
    assert [call.call_id for call in result.calls] == ["id0", "id1"]
    default = run("deepseek_v31", [DEEPSEEK_CALL], id_factory=None)
    call_id = default.calls[0].call_id
    assert call_id is not None
    assert call_id.startswith("call_")
    assert len(call_id) == 29


def test_registry() -> None:
    assert {
        "kimi_k2",
        "deepseek_v3",
        "deepseek_v31",
        "deepseek_v32",
        "hermes",
        "qwen3_coder",
        "glm45",
        "glm47",
        "minimax_m2",
    } <= set(FORMATS)
    assert get_format("kimi_k2") is FORMATS["kimi_k2"]
    with pytest.raises(
        ConfigurationError, match=r"unknown tool format 'nope'; expected one of: none, .*kimi_k2"
    ):
        get_format("nope")
    with pytest.raises(ConfigurationError, match="max_buffered_chars"):
        DelimiterRewriter("kimi_k2", max_buffered_chars=0)


def test_every_format_passes_plain_text_through_at_any_chunking() -> None:
    text = "Plain text with <angle> brackets, <| bars |>, [brackets], {braces} and ``` fences.\n"
    for name in FORMATS:
        for pieces in ([text], list(text)):
            result = run(name, pieces)
            assert (result.content, result.calls) == (text, []), name


# --- the operator ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_operator_rewrites_a_stream() -> None:
    pieces = [
        "I'll check. <|tool_calls_sec",
        "tion_begin|><|tool_call_begin|>functions.w:0<|tool_call_arg",
        'ument_begin|>{"city": ',
        '"Paris"}<|tool_call_end|><|tool_calls_section_end|>',
    ]
    source = stream.iterate([ChunkResponse(content=piece) for piece in pieces])
    chunks: list[ChunkResponse] = []
    async with streamcontext(rewrite_delimiters(source, "kimi_k2", id_factory=numbered_ids)) as items:
        async for chunk in items:
            chunks.append(chunk)
    assert [chunk.content for chunk in chunks] == ["I'll check. ", "", ""]
    deltas = [delta for chunk in chunks for delta in chunk.tool_calls or ()]
    assert deltas == [
        ToolCallDelta(0, "functions.w:0", "w", '{"city":'),
        ToolCallDelta(0, None, None, ' "Paris"}', True),
    ]


@pytest.mark.anyio
async def test_operator_pipes_and_closes_its_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[ChunkResponse]:
        try:
            yield ChunkResponse(content="a")
            yield ChunkResponse(content="b")
        finally:
            closed.append(True)

    piped = stream.iterate(source()) | rewrite_delimiters.pipe("hermes")
    async with streamcontext(piped) as items:
        async for chunk in items:
            assert chunk.content == "a"
            break
    assert closed == [True]


# --- any format, any text ---------------------------------------------------------------------------

PART_ONE_FORMATS: tuple[str, ...] = (
    "kimi_k2",
    "deepseek_v3",
    "deepseek_v31",
    "deepseek_v32",
    "hermes",
    "qwen3_coder",
    "glm45",
    "minimax_m2",
)
FRAGMENTS: tuple[str, ...] = ("{", "}", '"', "\\", "[", "]", ":", ",", "a", "1", "true", ">", "<", "=")
FRAGMENTS += ("é", "```", "json", "function")
FRAGMENTS += (" ", "\n", '"name": "f"', '"arguments": ', 'name="f"', 'string="false"')


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_text_of_markers_and_fragments_is_chunking_invariant(data: st.DataObject) -> None:
    """Random mixtures of a format's markers and JSON/XML fragments: no exception, every call follows the
    delta protocol (checked by ``collect``), and the result does not depend on the chunking."""
    name = data.draw(st.sampled_from(PART_ONE_FORMATS))
    tokens = data.draw(
        st.lists(st.sampled_from(get_format(name).markers + FRAGMENTS), min_size=1, max_size=30)
    )
    text = "".join(tokens)
    cuts = data.draw(st.sets(st.integers(min_value=1, max_value=max(1, len(text) - 1)), max_size=12))
    whole = run(name, [text])
    assert run(name, pieces_at(text, cuts)) == whole
    assert run(name, list(text)) == whole
