"""``DelimiterRewriter(offered_tools=...)``: a call to a tool the request does not offer comes back as the
text the model wrote, byte for byte and at any chunking; calls to offered tools are rewritten as without
it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from operators.delimiters._guard import MAX_UNDECIDED_CHARS
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse
from tests.conftest import TESTS
from tests.delimiter_cases import Result, numbered_ids, pieces_at, run

RAW = TESTS / "fixtures" / "raw_model_output"

RECORDED = {
    "vllm-test_deepseek-v3.1_prefix_2_tools_suffix.txt": "deepseek_v31",
    "vllm-test_deepseek-v3_parallel_tools_fenced_json.txt": "deepseek_v3",
    "vllm-test_deepseek-v3_single_tool_fenced_json.txt": "deepseek_v3",
    "vllm-test_deepseek-v3_text_then_tool.txt": "deepseek_v3",
    "vllm-test_glm-4.5_no_args_tool.txt": "glm45",
    "vllm-test_glm-4.5_text_tool_text_tool.txt": "glm45",
    "vllm-test_hermes_qwen_2_sequential_tool_calls.txt": "hermes",
    "vllm-test_hermes_qwen_newline_wrapped_tool_call.txt": "hermes",
    "vllm-test_hermes_qwen_text_then_tool_call.txt": "hermes",
    "vllm-test_hermes_granite_stringified_arguments.txt": "hermes",
    "vllm-test_kimi-k2_multiline_json_args.txt": "kimi_k2",
    "vllm-test_kimi-k2_text_then_3_parallel_tools.txt": "kimi_k2",
    "vllm-test_kimi-k2_text_then_single_tool.txt": "kimi_k2",
    "vllm-test_qwen3-coder_2_parallel_tools.txt": "qwen3_coder",
    "vllm-test_qwen3-coder_multiline_object_param.txt": "qwen3_coder",
    "vllm-test_qwen3-coder_text_then_tool_xml_params.txt": "qwen3_coder",
    "vllm-test_pythonic_llama3.2_parallel_calls.txt": "pythonic",
    "vllm-test_pythonic_escaped_strings.txt": "pythonic",
    "vllm-test_llama4-pythonic_python_start_2_calls.txt": "pythonic",
    "vllm-test_llama4-pythonic_python_start_end_3_calls.txt": "pythonic",
    "vllm-test_olmo3_parallel_calls.txt": "olmo3",
    "vllm-test_olmo3_json_literals.txt": "olmo3",
    "vllm-test_lfm2_text_after_call.txt": "lfm2",
    "vllm-test_lfm2_dotted_name_nested_args.txt": "lfm2",
    "vllm-test_lfm2_multiline_string_arg.txt": "lfm2",
    "vllm-test_gemma4_text_then_tool.txt": "gemma4",
    "vllm-test_gemma4_2_calls_back_to_back.txt": "gemma4",
    "vllm-test_gemma4_nested_object_and_array.txt": "gemma4",
    "vllm-test_gemma4_bare_number_and_boolean.txt": "gemma4",
    "vllm-test_functiongemma_2_calls.txt": "functiongemma",
    "vllm-test_functiongemma_text_then_tool.txt": "functiongemma",
    "vllm-test_seed-oss_think_budget_then_tool.txt": "seed_oss",
    "vllm-test_step3_parallel_tools.txt": "step3",
    "vllm-test_step3_whitespace_kept_in_strings.txt": "step3",
    "vllm-test_step3p5_text_then_typed_tool.txt": "step3p5",
    "vllm-test_hunyuan-a13b_2_tools_nested_args.txt": "hunyuan_a13b",
    "vllm-test_hy-v3_2_tools_newlines.txt": "hunyuan",
    "vllm-test_ernie-4.5_think_end_then_2_tools.txt": "ernie45",
    "vllm-test_deepseek-v4_text_then_tool_calls_dsml.txt": "deepseek_v4",
    "kimi-tool-parser-test_kimi-k2.5_2_fenced_json_calls.txt": "kimi_k2",
    "vllm-docstring_kimi-k3_xtml_tools_channel.txt": "kimi_k3",
    "vllm-test_minimax-m3_text_then_nested_call.txt": "minimax_m3",
}
"""Real model output (tests/fixtures/SOURCES.md) and its format."""

D = "\uff5cDSML\uff5c"
WRITTEN = {
    "minimax_m2": (
        'Let me look.<minimax:tool_call>\n<invoke name="get_weather">\n'
        '<parameter name="city">Paris</parameter>\n'
        '</invoke>\n<invoke name="now">\n</invoke>\n</minimax:tool_call> Done.'
    ),
    "deepseek_v32": (
        f'Checking.<{D}function_calls>\n<{D}invoke name="get_weather">\n'
        f'<{D}parameter name="location" string="true">Paris</{D}parameter>\n'
        f'<{D}parameter name="days" string="false">3</{D}parameter>\n</{D}invoke>\n</{D}function_calls>'
    ),
    "mistral": 'Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]now[ARGS]{}',
    "llama3_json": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}; '
        '{"name": "now", "parameters": {}}'
    ),
    "harmony": (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Paris"}<|call|>'
    ),
    "xml": (
        'Writing.\n<tool name="write_file">\n  <arguments>\n    <arg name="path">a.py</arg>\n'
        '    <arg name="content">print("hi")</arg>\n  </arguments>\n</tool>\nDone.'
    ),
    "json": (
        'Here: {"tools": [{"function": "a", "parameters": {}}, {"function": "b", "parameters": {"x": 1}}]}'
        ' and {"tool": {"function": "search", "parameters": {"query": "streamfold"}}}'
    ),
    "sentinel": '[[SEG_START {"type": "tool_call", "tool_name": "search"}]]{"query": "x"}[[SEG_END]] after',
}
"""Written from each format's documentation, for the formats without a recording here."""

SAMPLES = [(name, fmt, (RAW / name).read_text()) for name, fmt in RECORDED.items()] + [
    (fmt, fmt, text) for fmt, text in WRITTEN.items()
]
IDS = [name for name, _, _ in SAMPLES]


def guarded(fmt: str, pieces: list[str], offered: frozenset[str] | set[str], **options: object) -> Result:
    return run(fmt, pieces, offered_tools=offered, **options)  # type: ignore[arg-type]


def calls_of(result: Result) -> list[tuple[int, str | None, str, bool]]:
    return [(call.index, call.name, call.arguments, call.finished) for call in result.calls]


@pytest.mark.parametrize(("name", "fmt", "text"), SAMPLES, ids=IDS)
def test_every_call_unknown_gives_the_text_back_byte_for_byte(name: str, fmt: str, text: str) -> None:
    plain = run(fmt, [text])
    assert plain.calls, "the sample has calls"
    for pieces in ([text], list(text), pieces_at(text, range(3, len(text), 7))):
        result = guarded(fmt, pieces, set())
        assert (result.content, result.reasoning, result.calls) == (text, "", [])
        assert result.finish_reasons == []


def rewritten(fmt: str, pieces: list[str], **options: object) -> list[ChunkResponse]:
    rewriter = DelimiterRewriter(fmt, id_factory=numbered_ids, **options)  # type: ignore[arg-type]
    chunks = [chunk for piece in pieces for chunk in rewriter.feed(ChunkResponse(content=piece))]
    return chunks + rewriter.finish()


@pytest.mark.parametrize(("name", "fmt", "text"), SAMPLES, ids=IDS)
def test_every_call_offered_gives_the_same_chunks(name: str, fmt: str, text: str) -> None:
    names = {call.name for call in run(fmt, [text]).calls if call.name is not None}
    for pieces in ([text], list(text), pieces_at(text, range(5, len(text), 11))):
        assert rewritten(fmt, pieces, offered_tools=names) == rewritten(fmt, pieces)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_chunking_any_offered_subset(data: st.DataObject) -> None:
    """Chunk boundaries never change the result, whichever of the sample's tools are offered."""
    name, fmt, text = data.draw(st.sampled_from(SAMPLES))
    names = sorted({call.name for call in run(fmt, [text]).calls if call.name is not None})
    offered = set(data.draw(st.lists(st.sampled_from(names), unique=True))) if names else set()
    cuts = data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=40))
    assert guarded(fmt, pieces_at(text, cuts), offered) == guarded(fmt, [text], offered), name


KIMI = (
    "Hi <|tool_calls_section_begin|><|tool_call_begin|>functions.{0}:0<|tool_call_argument_begin|>"
    '{{"a": 1}}<|tool_call_end|><|tool_call_begin|>functions.{1}:1<|tool_call_argument_begin|>'
    '{{"b": 2}}<|tool_call_end|><|tool_calls_section_end|> bye'
)
QWEN = (
    "Hi\n<tool_call>\n<function={0}>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n"
    "<tool_call>\n<function={1}>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call> bye"
)
HERMES = (
    'Hi <tool_call>\n{{"name": "{0}", "arguments": {{"a": 1}}}}\n</tool_call>\n'
    '<tool_call>\n{{"name": "{1}", "arguments": {{"b": 2}}}}\n</tool_call> bye'
)


@pytest.mark.parametrize(
    ("fmt", "template", "first_text"),
    [
        (
            "kimi_k2",
            KIMI,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.bad:0<|tool_call_argument_begin|>"
            '{"a": 1}<|tool_call_end|>',
        ),
        (
            "qwen3_coder",
            QWEN,
            "\n<tool_call>\n<function=bad>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>\n",
        ),
        ("hermes", HERMES, '<tool_call>\n{"name": "bad", "arguments": {"a": 1}}\n</tool_call>\n'),
    ],
)
def test_unknown_call_then_offered_call(fmt: str, template: str, first_text: str) -> None:
    """The unknown call's text (and what closed it) goes out as text; the offered call after it is call 0."""
    text = template.format("bad", "good")
    expected_content = text[: text.index(first_text)] + first_text + " bye"
    if fmt == "qwen3_coder":
        expected_content = "Hi" + first_text + " bye"
    for pieces in ([text], list(text)):
        result = guarded(fmt, pieces, {"good"})
        assert result.content == expected_content
        assert calls_of(result) == [(0, "good", '{"b": 2}', True)]


@pytest.mark.parametrize(
    ("fmt", "text", "content"),
    [
        (
            "seed_oss",
            "<seed:tool_call><function=bad></function>x<function=good><parameter=b>2</parameter></function>"
            "</seed:tool_call>",
            "<seed:tool_call><function=bad></function>x",
        ),
        (
            "minimax_m2",
            '<minimax:tool_call><invoke name="bad"></invoke>x<invoke name="good"><parameter name="b">2'
            "</parameter></invoke></minimax:tool_call>",
            '<minimax:tool_call><invoke name="bad"></invoke>x',
        ),
    ],
)
def test_text_between_an_unknown_call_and_an_offered_one(fmt: str, text: str, content: str) -> None:
    """Text the model wrote between the two calls of a section goes out with the unknown call's text, up
    to the offered call's opening marker, which is the call's, at any chunking."""
    for pieces in ([text], list(text), [text[:45], text[45:]]):
        result = guarded(fmt, pieces, {"good"})
        assert (result.content, calls_of(result)) == (content, [(0, "good", '{"b": 2}', True)]), pieces


def test_an_unknown_and_an_offered_call_decided_at_once_leave_no_gap() -> None:
    """Qwen3-Coder calls without ``<tool_call>`` are confirmed by a later ``</tool_call>``, which decides
    an unknown call and an offered one in one step: their texts cannot be told apart, so the unknown
    call is dropped, and the offered calls keep positions 0, 1, 2 (the offered one was lost, and its
    position left a gap)."""
    f_call = "<function=f>\n<parameter=k>\n1\n</parameter>\n</function>\n"
    text = f"Hi {f_call}</tool_call> <function=g>\n</function>\n" * 2 + f"<tool_call>\n{f_call}</tool_call>"
    for pieces in ([text], list(text)):
        result = guarded("qwen3_coder", pieces, {"f"})
        assert calls_of(result) == [(index, "f", '{"k": 1}', True) for index in range(3)]
        assert result.content == "Hi  \nHi  <function=g>\n</function>\n"


@pytest.mark.parametrize(
    ("fmt", "template", "second_text"),
    [
        (
            "kimi_k2",
            KIMI,
            '<|tool_call_begin|>functions.bad:1<|tool_call_argument_begin|>{"b": 2}<|tool_call_end|>'
            "<|tool_calls_section_end|>",
        ),
        (
            "qwen3_coder",
            QWEN,
            "<tool_call>\n<function=bad>\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
        ),
        ("hermes", HERMES, '<tool_call>\n{"name": "bad", "arguments": {"b": 2}}\n</tool_call>'),
    ],
)
def test_offered_call_then_unknown_call(fmt: str, template: str, second_text: str) -> None:
    """The unknown call goes out from its opening marker (what closed the offered call is that call's),
    with the markers that close the markup after it."""
    text = template.format("good", "bad")
    plain = run(fmt, [template.format("good", "x")], id_factory=numbered_ids)
    for pieces in ([text], list(text)):
        result = guarded(fmt, pieces, {"good"})
        assert calls_of(result) == [(0, "good", '{"a": 1}', True)]
        assert result.content == plain.content.replace(" bye", second_text + " bye")


def test_finish_reason_stop_stays_stop_without_offered_calls() -> None:
    rewriter = DelimiterRewriter("hermes", offered_tools=["good"], id_factory=numbered_ids)
    text = HERMES.format("bad", "worse")
    chunks = rewriter.feed(ChunkResponse(content=text)) + rewriter.feed(
        ChunkResponse(finish_reason="stop", is_complete=True)
    )
    assert [chunk.finish_reason for chunk in chunks if chunk.finish_reason] == ["stop"]
    assert "".join(chunk.content for chunk in chunks) == text
    assert not any(chunk.tool_calls for chunk in chunks)


def test_reasoning_channel_is_guarded_too() -> None:
    text = KIMI.format("bad", "worse")
    result = run("kimi_k2", list(text), channel="reasoning", offered_tools=set())
    assert (result.content, result.reasoning, result.calls) == ("", text, [])


def test_plain_chunks_pass_as_the_same_object() -> None:
    rewriter = DelimiterRewriter("kimi_k2", offered_tools={"good"})
    chunk = ChunkResponse(content="no markers here")
    assert rewriter.feed(chunk)[0] is chunk


def test_markup_longer_than_the_cap_is_rewritten_as_without_the_guard() -> None:
    """A header that never decides a name within the cap: the lexer's own output, nothing kept twice."""
    text = "<tool_call>\n" + " " * (MAX_UNDECIDED_CHARS + 10) + '{"name": "bad", "arguments": {}}</tool_call>'
    assert guarded("hermes", [text], set()) == run("hermes", [text])


def test_offered_tools_is_a_collection_of_names() -> None:
    with pytest.raises(ConfigurationError, match="offered_tools"):
        DelimiterRewriter("hermes", offered_tools="get_weather")


@pytest.mark.anyio
async def test_the_operator_takes_offered_tools() -> None:
    from operators.delimiters import rewrite_delimiters

    text = HERMES.format("bad", "good")

    async def source() -> AsyncIterator[ChunkResponse]:
        for piece in pieces_at(text, range(4, len(text), 9)):
            yield ChunkResponse(content=piece)

    async with rewrite_delimiters(source(), "hermes", offered_tools={"good"}).stream() as stream:
        chunks = [chunk async for chunk in stream]
    content = "".join(chunk.content for chunk in chunks)
    names = [call.name for chunk in chunks for call in chunk.tool_calls or () if call.name]
    assert (content, names) == (
        'Hi <tool_call>\n{"name": "bad", "arguments": {"a": 1}}\n</tool_call>\n bye',
        ["good"],
    )


@pytest.mark.anyio
async def test_process_takes_offered_tools() -> None:
    """Through the whole pipeline: the unknown call's text is text, the offered one an invocation."""
    from pipeline import ToolInvocation, process
    from pipeline.models import SegmentEvent, SegmentEventType
    from tests.proxy_upstream import chat_sse

    text = KIMI.format("bad", "good")
    body = chat_sse(pieces_at(text, range(3, len(text), 5)))
    async with process(
        body, provider="openai", tool_format="kimi_k2", offered_tools={"good"}, id_factory=numbered_ids
    ).stream() as stream:
        events = [event async for event in stream]
    segments = [event for event in events if isinstance(event, SegmentEvent)]
    texts = {event.segment_id for event in segments if event.segment_type == "text"}
    content = "".join(
        event.payload["delta"]
        for event in segments
        if event.event_type is SegmentEventType.CONTENT and event.segment_id in texts
    )
    invocations = [(event.name, event.arguments) for event in events if isinstance(event, ToolInvocation)]
    # the section's closing marker closes the offered call's markup, as without offered_tools
    offered_call = (
        '<|tool_call_begin|>functions.good:1<|tool_call_argument_begin|>{"b": 2}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    )
    assert (content, invocations) == (text.replace(offered_call, ""), [("good", {"b": 2})])
    with pytest.raises(ConfigurationError, match="tool_format"):
        process([], offered_tools={"good"})


@pytest.mark.parametrize(
    ("fmt", "pieces"),
    [
        ("seed_oss", ["<seed:tool_call>1<function=><parameter=>p", "a"]),
        (
            "kimi_k2",
            ["<|tool_call_section_begin|>é<|tool_call_begin|><|tool_call_argument_begin|>e", "e"],
        ),
    ],
)
def test_what_a_call_not_offered_writes_never_becomes_a_delta(fmt: str, pieces: list[str]) -> None:
    """The index of a call not offered is negative and never numbered: the shortcuts that write a
    call's arguments leave such a call to the states, which drop what it writes."""

    def chunks(reads: list[str]) -> list[ChunkResponse]:
        rewriter = DelimiterRewriter(fmt, offered_tools={"f"}, id_factory=str)
        return [
            out for read in reads for out in rewriter.feed(ChunkResponse(content=read))
        ] + rewriter.finish()

    cut = chunks(pieces)
    assert [delta for chunk in cut for delta in chunk.tool_calls or ()] == []
    text = "".join(chunk.content for chunk in cut)
    assert text == "".join(chunk.content for chunk in chunks(["".join(pieces)]))
