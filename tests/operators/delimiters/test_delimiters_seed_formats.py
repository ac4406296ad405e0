"""The seeds' text formats: ``xml`` (``<tool name=...>``), ``json`` (``{"tool": {...}}``) and ``sentinel``
(``[[SEG_START {...}]] ... [[SEG_END]]``), including file content streamed into JSON arguments."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import ArgumentSplitter
from operators.delimiters import DelimiterRewriter
from operators.segments import SegmentEmitter
from pipeline.models import ChunkResponse, SegmentEvent, SegmentEventType, SegmentType, ToolCallDelta
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

FILE_TEXT = 'def f():\n    return "</arg> [[SEG_END] \\\\ \t é"\n'


def file_segments(format: str, text: str) -> list[SegmentEvent]:
    """The segment events of ``text`` fed one character at a time through rewriter, splitter, emitter."""
    rewriter = DelimiterRewriter(format, id_factory=lambda index: f"call_{index}")
    splitter = ArgumentSplitter()
    emitter = SegmentEmitter(segment_ids=lambda kind: f"{kind.value}_0")
    events: list[SegmentEvent] = []

    def emit(chunks: list[ChunkResponse]) -> None:
        for chunk in chunks:
            for split in splitter.feed(chunk):
                events.extend(e for e in emitter.feed(split) if isinstance(e, SegmentEvent))

    for char in text:
        emit(rewriter.feed(ChunkResponse(content=char)))
    emit(rewriter.finish())
    for split in splitter.finish():
        events.extend(e for e in emitter.feed(split) if isinstance(e, SegmentEvent))
    events.extend(e for e in emitter.finish() if isinstance(e, SegmentEvent))
    return events


# --- xml ---------------------------------------------------------------------------------------------------


def test_xml_call_with_typed_and_string_values() -> None:
    text = (
        "Let me search.\n"
        '<tool name="search">\n  <arguments>\n    <arg name="query">cats &amp; "dogs"</arg>\n'
        '    <arg name="limit">5</arg>\n    <arg name="filters">{"lang": ["en"]}</arg>\n'
        "  </arguments>\n</tool>\nDone."
    )
    result = assert_chunking_invariant("xml", text)
    assert result.content == "Let me search.\n\nDone."
    assert result.calls == [
        Call(
            0,
            "call_0",
            "search",
            '{"query": "cats &amp; \\"dogs\\"", "limit": 5, "filters": {"lang": ["en"]}}',
        )
    ]


def test_xml_schema_types_values() -> None:
    schema = {"properties": {"limit": {"type": "string"}, "deep": {"type": "boolean"}}}
    text = '<tool name="s"><arguments><arg name="limit">5</arg><arg name="deep">true</arg></arguments></tool>'
    result = assert_chunking_invariant("xml", text, tool_schemas={"s": schema})
    assert result.parsed() == [("s", {"limit": "5", "deep": True})]


def test_xml_write_file_with_sentinel_content() -> None:
    text = (
        '<tool name="write_file"><arguments>\n<arg name="path">src/app.py</arg>\n'
        f'<arg name="content">\n__START_CONTENT__\n{FILE_TEXT}__END_CONTENT__\n</arg>\n'
        "</arguments></tool>"
    )
    result = assert_chunking_invariant("xml", text)
    assert result.calls == [
        Call(
            0,
            "call_0",
            "write_file",
            json.dumps({"path": "src/app.py", "content": FILE_TEXT}, ensure_ascii=False),
        )
    ]


def test_xml_sentinel_content_streams_into_a_file_segment() -> None:
    text = (
        '<tool name="write_file"><arguments><arg name="content">'
        f"__START_CONTENT__\n{FILE_TEXT}__END_CONTENT__"
        '</arg><arg name="path">a.py</arg></arguments></tool>'
    )
    events = file_segments("xml", text)
    assert events[0] == SegmentEvent.start(
        "call_0", SegmentType.WRITE_FILE, {"tool_name": "write_file", "call_id": "call_0"}
    )
    contents = [e.payload["delta"] for e in events if e.event_type is SegmentEventType.CONTENT]
    assert "".join(contents) == FILE_TEXT
    assert len(contents) > 10  # streamed, not delivered at the end
    assert events[-1].metadata["arguments"] == {"content": FILE_TEXT, "path": "a.py"}


def test_xml_value_ends_at_first_arg_end_and_newlines_around_values_are_dropped() -> None:
    text = '<tool name="f"><arg name="v">\nline 1\nline 2\n</arg><arg name="w">a</arg></tool>'
    result = assert_chunking_invariant("xml", text)
    assert result.calls == [Call(0, "call_0", "f", '{"v": "line 1\\nline 2", "w": "a"}')]


def test_xml_parallel_calls_and_empty_arguments() -> None:
    text = '<tool name=\'a\'><arguments></arguments></tool>\n<tool name="b"><arg name="x">null</arg></tool>'
    result = assert_chunking_invariant("xml", text)
    assert result.calls == [Call(0, "call_0", "a", "{}"), Call(1, "call_1", "b", '{"x": null}')]


def test_xml_calls_inside_reasoning() -> None:
    text = 'Thinking <tool name="look"><arguments><arg name="at">x</arg></arguments></tool> more'
    result = assert_chunking_invariant("xml", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("Thinking  more", "")
    assert result.calls == [Call(0, "call_0", "look", '{"at": "x"}')]


@pytest.mark.parametrize(
    "prose",
    [
        "Use the <tool> tag, or <tools>, or <toolbox name='x'>.",
        'An attribute that is not a name: <tool id="x"> and <tool name="a" extra="b">.',
        'A tag that never closes: <tool name="a"',
        "<tool " + "x" * 300 + ">",
    ],
)
def test_xml_prose_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("xml", prose)
    assert (result.content, result.calls) == (prose, [])


def test_xml_stray_text_inside_a_call_is_kept() -> None:
    text = '<tool name="f"> note <arg>bad</arg><arg name="k">v</arg></tool>'
    result = assert_chunking_invariant("xml", text)
    assert result.content == " note <arg>bad</arg>"
    assert result.calls == [Call(0, "call_0", "f", '{"k": "v"}')]


def test_xml_cut_off_streams() -> None:
    cut_value = assert_chunking_invariant("xml", '<tool name="f"><arguments><arg name="v">unfinis')
    assert cut_value.calls == [Call(0, "call_0", "f", '{"v": "unfinis', finished=False)]
    cut_raw = assert_chunking_invariant("xml", '<tool name="f"><arg name="c">  __START_CONTENT__\nabc</arg')
    assert cut_raw.calls == [Call(0, "call_0", "f", '{"c": "abc</arg', finished=False)]
    cut_lead = assert_chunking_invariant("xml", '<tool name="f"><arg name="c">  ')
    # A value cut before it could be typed is left as it came (the arguments are incomplete anyway).
    assert cut_lead.calls == [Call(0, "call_0", "f", '{"c":   ', finished=False)]


def test_xml_text_after_end_content_is_kept_in_the_value() -> None:
    text = '<tool name="f"><arg name="c">__START_CONTENT__a__END_CONTENT__ b </arg></tool>'
    result = assert_chunking_invariant("xml", text)
    assert result.calls == [Call(0, "call_0", "f", '{"c": "a b "}')]


# --- json --------------------------------------------------------------------------------------------------


def test_json_call_inside_prose() -> None:
    text = 'Searching: {"tool": {"function": "search", "parameters": {"query": "a {b} \\"c\\""}}} done'
    result = assert_chunking_invariant("json", text)
    assert result.content == "Searching:  done"
    assert result.calls == [Call(0, "call_0", "search", '{"query": "a {b} \\"c\\""}')]


def test_json_tools_list_and_consecutive_objects() -> None:
    text = (
        '{"tools": [{"function": "a", "parameters": {}}, {"name": "b", "arguments": {"x": [1, {"y": 2}]}}]}\n'
        '{"tool": {"id": "c7", "function": "c", "parameters": "{\\"s\\": 1}"}}'
    )
    result = assert_chunking_invariant("json", text)
    assert result.content == "\n"
    assert result.calls == [
        Call(0, "call_0", "a", "{}"),
        Call(1, "call_1", "b", '{"x": [1, {"y": 2}]}'),
        Call(2, "c7", "c", '{"s": 1}'),
    ]


def test_json_in_a_markdown_fence() -> None:
    text = '```json\n{"tool": {"function": "f", "parameters": {"s": "```"}}}\n```'
    result = assert_chunking_invariant("json", text)
    assert result.content == "```json\n\n```"
    assert result.calls == [Call(0, "call_0", "f", '{"s": "```"}')]


@pytest.mark.parametrize(
    "prose",
    [
        "A set {1, 2} and a dict {'tool': 1}.",
        'Other JSON {"a": {"tool": 1}} and {"tool": "x"} and {"tools": {}} and {"toolbox": {}}',
        "{",
        '{"to',
    ],
)
def test_json_other_objects_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("json", prose)
    assert (result.content, result.calls) == (prose, [])


def test_json_calls_inside_reasoning() -> None:
    result = assert_chunking_invariant(
        "json", 'Plan {"tool": {"function": "f", "parameters": {"a": 1}}} then', channel="reasoning"
    )
    assert (result.reasoning, result.content) == ("Plan  then", "")
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_json_cut_off_and_interrupted_calls() -> None:
    cut = assert_chunking_invariant("json", '{"tool": {"function": "f", "parameters": {"a": [1')
    assert cut.calls == [Call(0, "call_0", "f", '{"a": [1', finished=False)]
    fenced = assert_chunking_invariant(
        "json", '```\n{"tool": {"function": "f", "parameters": {"a": 1\n```\nmore'
    )
    assert fenced.calls == [Call(0, "call_0", "f", '{"a": 1\n', finished=False)]
    assert fenced.content == "```\n```\nmore"


def test_json_malformed_call_object_ends_the_call() -> None:
    result = assert_chunking_invariant("json", '{"tool": {"function": "f" "parameters": {}}}')
    assert result.calls == [Call(0, "call_0", "f", "", finished=False)]
    assert result.content == '"parameters": {}}}'


# --- sentinel ----------------------------------------------------------------------------------------------


def test_sentinel_tool_call() -> None:
    text = (
        'Plan.[[SEG_START {"type": "tool_call", "tool_name": "search"}]]'
        '{"query": "a [[SEG_END]] b"}[[SEG_END]] ok'
    )
    result = assert_chunking_invariant("sentinel", text)
    assert result.content == "Plan. ok"
    assert result.calls == [Call(0, "call_0", "search", '{"query": "a [[SEG_END]] b"}')]


def test_sentinel_header_arguments_and_call_id() -> None:
    text = '[[SEG_START {"type": "tool_call", "tool_name": "f", "call_id": "id7", "arguments": {"a": 1}}]]'
    text += "[[SEG_END]]"
    result = assert_chunking_invariant("sentinel", text)
    assert result.calls == [Call(0, "id7", "f", '{"a":1}')]


def test_sentinel_write_and_patch_file() -> None:
    text = (
        f'[[SEG_START {{"type":"write_file","path":"notes]].py"}}]]\n{FILE_TEXT}[[SEG_END]]\n'
        '[[SEG_START {"type": "patch_file", "path": "a.py"}]]--- a\n+++ b\n[[SEG_END]]'
    )
    result = assert_chunking_invariant("sentinel", text)
    assert result.content == "\n"
    assert result.calls == [
        Call(
            0,
            "call_0",
            "write_file",
            json.dumps({"path": "notes]].py", "content": FILE_TEXT}, ensure_ascii=False),
        ),
        Call(1, "call_1", "patch_file", json.dumps({"path": "a.py", "patch": "--- a\n+++ b\n"})),
    ]


def test_sentinel_file_content_streams_character_by_character() -> None:
    rewriter = DelimiterRewriter("sentinel", id_factory=str)
    (first,) = rewriter.feed(ChunkResponse(content='[[SEG_START {"type": "write_file", "path": "p"}]]\nab'))
    assert first.tool_calls == [ToolCallDelta(0, "0", "write_file", '{"path": "p", "content": "ab')]
    (second,) = rewriter.feed(ChunkResponse(content='"\n'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='\\"\\n')]
    assert rewriter.feed(ChunkResponse(content="[[SEG_")) == []
    (third,) = rewriter.feed(ChunkResponse(content="END]]"))
    assert third.tool_calls == [ToolCallDelta(0, arguments_delta='"}', finished=True)]


def test_sentinel_write_file_becomes_a_streaming_file_segment() -> None:
    events = file_segments(
        "sentinel", f'[[SEG_START {{"type": "write_file", "path": "x.py"}}]]{FILE_TEXT}[[SEG_END]]'
    )
    assert events[0].segment_type is SegmentType.WRITE_FILE
    contents = [e.payload["delta"] for e in events if e.event_type is SegmentEventType.CONTENT]
    assert "".join(contents) == FILE_TEXT
    assert len(contents) > 10
    assert events[-1].metadata["arguments"] == {"path": "x.py", "content": FILE_TEXT}


def test_sentinel_text_and_reasoning_segments() -> None:
    text = '[[SEG_START {"type": "reasoning"}]]thinking[[SEG_END]] '
    text += '[[SEG_START {"type": "text"}]]hello[[SEG_END]]'
    result = assert_chunking_invariant("sentinel", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("thinking ", "hello")


@pytest.mark.parametrize(
    "prose",
    [
        "mention [[SEG_START and [[SEG_END]] in prose",
        '[[SEG_START {"type": "unknown"}]]body[[SEG_END]]',
        "[[SEG_START {bad json}]]x",
        '[[SEG_START {"type": "tool_call"}]]{}[[SEG_END]]',
        '[[SEG_START {"type": "text"} no close',
        '[[SEG_START {"type": "text"}] x',
    ],
)
def test_sentinel_prose_and_bad_headers_stay_text(prose: str) -> None:
    result = assert_chunking_invariant("sentinel", prose)
    assert (result.content, result.calls) == (prose, [])


def test_sentinel_cut_off_and_interrupted_segments() -> None:
    cut = assert_chunking_invariant("sentinel", '[[SEG_START {"type": "write_file", "path": "x"}]]partial')
    assert cut.calls == [Call(0, "call_0", "write_file", '{"path": "x", "content": "partial', finished=False)]
    text = (
        '[[SEG_START {"type": "tool_call", "tool_name": "f"}]]{"a": [1'
        '[[SEG_START {"type": "tool_call", "tool_name": "g"}]]{}[[SEG_END]]'
    )
    interrupted = assert_chunking_invariant("sentinel", text)
    assert interrupted.calls == [
        Call(0, "call_0", "f", '{"a": [1', finished=False),
        Call(1, "call_1", "g", "{}"),
    ]


SAMPLES = {
    "xml": (
        'Go <tool name="w"><arguments><arg name="path">a.txt</arg><arg name="content">__START_CONTENT__\n'
        'x </arg> "y"\n__END_CONTENT__</arg><arg name="n">12</arg></arguments></tool> <tool> end'
    ),
    "json": (
        'Go {"tool": {"function": "w", "parameters": {"s": "}{ \\" ```"}}} {x} {"tools": [{"name": "v"}]} end'
    ),
    "sentinel": (
        'Go [[SEG_START {"type": "write_file", "path": "a]]"}]]\nx [[SEG_E "y"\n[[SEG_END]]'
        '[[SEG_START {"type": "tool_call", "tool_name": "t"}]]{"q": "[[SEG_END]]"}[[SEG_END]]'
        " [[SEG_START x end"
    ),
}


@pytest.mark.parametrize("format", sorted(SAMPLES))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_rechunking_gives_the_same_result(format: str, data: st.DataObject) -> None:
    sample = SAMPLES[format]
    cuts = data.draw(st.sets(st.integers(min_value=1, max_value=len(sample) - 1), max_size=40))
    assert run(format, pieces_at(sample, cuts)) == run(format, [sample])


def test_samples_fold_as_expected() -> None:
    xml = run("xml", [SAMPLES["xml"]])
    assert (xml.content, xml.parsed()) == (
        "Go  <tool> end",
        [("w", {"path": "a.txt", "content": 'x </arg> "y"\n', "n": 12})],
    )
    js = run("json", [SAMPLES["json"]])
    assert (js.content, js.parsed()) == ("Go  {x}  end", [("w", {"s": '}{ " ```'}), ("v", {})])
    sentinel = run("sentinel", [SAMPLES["sentinel"]])
    assert sentinel.content == "Go  [[SEG_START x end"
    assert sentinel.parsed() == [
        ("write_file", {"path": "a]]", "content": 'x [[SEG_E "y"\n'}),
        ("t", {"q": "[[SEG_END]]"}),
    ]
