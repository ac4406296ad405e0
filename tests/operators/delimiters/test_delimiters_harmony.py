"""gpt-oss harmony: channels to reasoning / content, recipients to tool calls, built-in tools, foreign
messages, cut-off streams, and the same result at every chunking."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters import DelimiterRewriter
from pipeline.models import ChunkResponse, ToolCallDelta
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant, pieces_at, run

RAW = FIXTURES / "raw_model_output"
S, C, K, M = "<|start|>", "<|channel|>", "<|constrain|>", "<|message|>"
END, RET, CALL = "<|end|>", "<|return|>", "<|call|>"


def deltas(text: str, channel: str = "content") -> list[ToolCallDelta]:
    """Every tool-call delta the rewriter gives for ``text`` fed one character at a time."""
    rewriter = DelimiterRewriter("harmony", id_factory=str)
    chunks: list[ChunkResponse] = []
    for char in text:
        piece = ChunkResponse(content=char) if channel == "content" else ChunkResponse(reasoning=char)
        chunks.extend(rewriter.feed(piece))
    chunks.extend(rewriter.finish())
    return [delta for chunk in chunks for delta in chunk.tool_calls or ()]


def test_fixture_analysis_then_builtin_call_and_its_response() -> None:
    text = (RAW / "harmony_gpt-oss_analysis_then_builtin_tool_call_and_response.txt").read_text()
    result = assert_chunking_invariant("harmony", text)
    assert result.reasoning == (
        'User asks "Who is the current US president?" It\'s 2025, presumably current president is Joe '
        "Biden? Actually as of 2025-07-28, there was a 2024 election. In 2024, President is probably "
        "President Biden still? But w\ne need up to date info. Let's browse to confirm."
    )
    assert result.calls == [
        Call(
            0,
            "call_0",
            "browser.search",
            '{"query": "current US president July 2025", "topn": 10, "source": "news"}',
        )
    ]
    # The browser's answer is a message from another author: not model output, passed through whole.
    assert result.content == (
        '<|start|>browser.search to=assistant<|channel|>commentary<|message|>{"result": "https://openai.com/"}'
        "<|end|>"
    )
    assert {delta.kind for delta in deltas(text)} == {"function"}


def test_fixture_rendered_conversation_with_function_call() -> None:
    text = (RAW / "harmony_gpt-oss_conversation_function_call_constrain_json.txt").read_text()
    result = assert_chunking_invariant("harmony", text)
    assert (
        result.reasoning
        == "User asks: \u201cWhat is the weather in SF?\u201d We need to use lookup_weather tool."
    )
    assert result.calls == [Call(0, "call_0", "lookup_weather", '{"location": "San Francisco"}')]
    # The user's and the tool's messages pass through; the trailing "<|start|>assistant" opens nothing.
    assert result.content == (
        "<|start|>user<|message|>What is the weather in SF?<|end|>"
        '<|start|>functions.lookup_weather<|message|>{"temperature": 20, "description": "sunny"}<|end|>'
    )


def test_fixture_tool_response_without_terminator() -> None:
    text = (RAW / "harmony_gpt-oss_tool_response_message.txt").read_text()
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == []
    assert result.reasoning == ""
    assert result.content == text


def test_format_document_example_with_final_answer() -> None:
    text = (
        f"{C}analysis{M}Need to use function get_weather.{END}"
        f"{S}assistant{C}commentary to=functions.get_weather {K}json{M}"
        '{"location":"San Francisco"}'
        f"{CALL}{S}assistant{C}final{M}It is 20 degrees and sunny.{RET}"
    )
    result = assert_chunking_invariant("harmony", text)
    assert result.reasoning == "Need to use function get_weather."
    assert result.content == "It is 20 degrees and sunny."
    assert result.calls == [Call(0, "call_0", "get_weather", '{"location":"San Francisco"}')]


def test_preamble_on_commentary_is_content_and_text_outside_messages_keeps_its_field() -> None:
    text = (
        f"lead {C}commentary{M}I will look it up.{END}"
        f"{S}assistant{C}commentary to=functions.search{M}"
        '{"q": "x"}'
        f"{CALL} tail"
    )
    result = assert_chunking_invariant("harmony", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("lead  tail", "I will look it up.")
    assert result.calls == [Call(0, "call_0", "search", '{"q": "x"}')]


def test_channels_decide_where_text_goes_whatever_field_it_came_in() -> None:
    chunks = [
        ChunkResponse(content=f"{C}analysis{M}think in content{END}"),
        ChunkResponse(reasoning=f"{S}assistant{C}final{M}answer in reasoning{RET}"),
    ]
    result = run("harmony", chunks)
    assert (result.reasoning, result.content) == ("think in content", "answer in reasoning")


def test_message_without_channel_keeps_its_field_and_stray_terminators_are_dropped() -> None:
    result = assert_chunking_invariant("harmony", f"{END}{S}assistant{M}plain{END}{CALL}after{RET}")
    assert (result.content, result.reasoning, result.calls) == ("plainafter", "", [])


def test_recipient_in_role_part_and_content_type_words() -> None:
    text = f'{S}assistant to=functions.lookup {C}commentary json{M}{{"k": [1, 2]}}{CALL}'
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == [Call(0, "call_0", "lookup", '{"k": [1, 2]}')]


def test_constrain_before_channel_and_recipient_after_constrain() -> None:
    text = f"{S}assistant{K}json{C}commentary{M}hello{END}"
    text += f'{C}commentary {K}json to=functions.f{M}{{"a": 1}}{CALL}'
    result = assert_chunking_invariant("harmony", text)
    assert result.content == "hello"
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]


def test_parallel_calls_and_calls_inside_reasoning() -> None:
    text = (
        f"{C}analysis{M}Two lookups.{END}"
        f"{S}assistant{C}commentary to=functions.a {K}json{M}"
        '{"n": 1}'
        f"{CALL}{S}assistant{C}commentary to=functions.b {K}json{M}"
        '{"n": 2}'
        f"{CALL}"
    )
    result = assert_chunking_invariant("harmony", text, channel="reasoning")
    assert (result.reasoning, result.content) == ("Two lookups.", "")
    assert result.calls == [Call(0, "call_0", "a", '{"n": 1}'), Call(1, "call_1", "b", '{"n": 2}')]


def test_markers_inside_json_strings_are_arguments() -> None:
    arguments = json.dumps({"text": f"say {CALL} and {END} then {S}assistant{C}final{M}x", "n": "}"})
    text = f"{C}commentary to=functions.echo {K}json{M}{arguments}{CALL}{C}final{M}ok"
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == [Call(0, "call_0", "echo", arguments)]
    assert result.content == "ok"


def test_python_tool_is_a_custom_call_with_the_code_as_input() -> None:
    code = "\nimport math\nprint(math.sqrt(2))  # {not json}\n"
    text = f"{C}analysis{M}Compute it.{END}{S}assistant{C}analysis to=python code{M}{code}{CALL}"
    result = assert_chunking_invariant("harmony", text)
    assert result.reasoning == "Compute it."
    assert result.calls == [Call(0, "call_0", "python", code)]
    assert {delta.kind for delta in deltas(text)} == {"custom"}


def test_custom_call_without_stop_token_is_finished_at_the_end() -> None:
    """Servers strip the ``<|call|>`` stop token: the code that arrived is the whole input."""
    result = assert_chunking_invariant("harmony", f"{C}analysis to=python code{M}print(1)")
    assert result.calls == [Call(0, "call_0", "python", "print(1)", finished=True)]


def test_builtin_with_json_body_is_a_function_call() -> None:
    text = f'{C}analysis to=browser.open code{M}  {{"id": 3, "loc": 120}}  {CALL}'
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == [Call(0, "call_0", "browser.open", '{"id": 3, "loc": 120}')]
    assert {delta.kind for delta in deltas(text)} == {"function"}


def test_builtin_with_array_body_is_a_function_call() -> None:
    """A body whose first character is ``[`` is JSON too (the docstring's ``{`` or ``[``)."""
    text = f'{C}analysis to=container.exec{M} ["ls", "-la", {{"cwd": "/tmp"}}] {CALL}'
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == [Call(0, "call_0", "container.exec", '["ls", "-la", {"cwd": "/tmp"}]')]
    assert {delta.kind for delta in deltas(text)} == {"function"}


def test_empty_bodies() -> None:
    result = assert_chunking_invariant(
        "harmony", f"{C}commentary to=functions.now{M}{CALL}{C}commentary to=browser.find{M} {CALL}"
    )
    assert result.calls == [Call(0, "call_0", "now", "{}"), Call(1, "call_1", "browser.find", "{}")]


def test_arguments_stream_as_they_arrive() -> None:
    rewriter = DelimiterRewriter("harmony", id_factory=str)
    (first,) = rewriter.feed(ChunkResponse(content=f'{C}commentary to=functions.f {K}json{M}{{"a": "x'))
    assert first.tool_calls == [ToolCallDelta(0, "0", "f", '{"a": "x')]
    (second,) = rewriter.feed(ChunkResponse(content='yz"}'))
    assert second.tool_calls == [ToolCallDelta(0, arguments_delta='yz"}')]
    (third,) = rewriter.feed(ChunkResponse(content=f"{CALL}"))
    assert third.tool_calls == [ToolCallDelta(0, finished=True)]
    assert rewriter.finish() == []


def test_cut_off_inside_arguments_is_unfinished() -> None:
    result = assert_chunking_invariant("harmony", f'{C}commentary to=functions.f {K}json{M}{{"a": "unfin')
    assert result.calls == [Call(0, "call_0", "f", '{"a": "unfin', finished=False)]


def test_complete_json_without_call_token_is_finished() -> None:
    result = assert_chunking_invariant("harmony", f'{C}commentary to=functions.f {K}json{M}{{"a": 1}}\n')
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}', finished=True)]


def test_call_interrupted_by_the_next_message() -> None:
    text = (
        f'{C}commentary to=functions.f {K}json{M}{{"a": 1}}{S}assistant{C}final{M}done'
        f'{S}assistant{C}commentary to=functions.g {K}json{M}{{"b": [{S}assistant{C}final{M}x'
    )
    result = assert_chunking_invariant("harmony", text)
    assert result.calls == [
        Call(0, "call_0", "f", '{"a": 1}', finished=True),
        Call(1, "call_1", "g", '{"b": [', finished=False),
    ]
    assert result.content == "donex"


def test_cut_off_in_a_header_opens_nothing() -> None:
    result = assert_chunking_invariant(
        "harmony", f"{C}analysis{M}hm{END}{S}assistant{C}commentary to=functions.get_wea"
    )
    assert (result.reasoning, result.content, result.calls) == ("hm", "", [])


def test_header_interrupted_by_another_header_is_dropped() -> None:
    result = assert_chunking_invariant("harmony", f"{S}assistant{S}assistant{C}analysis{C}final{M}yes{RET}")
    assert (result.content, result.reasoning) == ("yes", "")


def test_prose_that_is_not_a_header_stays_text() -> None:
    text = f"Type {C} then, say, a channel name! {S}(or not). <|chan"
    result = assert_chunking_invariant("harmony", text)
    assert (result.content, result.calls) == (text, [])


def test_header_longer_than_the_limit_is_text() -> None:
    header = "x" * 300
    result = run("harmony", [f"{C}{header}{M}body{END}"])
    assert (result.content, result.calls) == (f"{C}{header}body", [])


def test_finish_reason_stop_becomes_tool_calls() -> None:
    result = run(
        "harmony",
        [ChunkResponse(content=f"{C}commentary to=functions.f{M}{{}}"), ChunkResponse(finish_reason="stop")],
    )
    assert result.finish_reasons == ["tool_calls"]


SAMPLE = (
    f'{C}analysis{M}Plan: call "a" <| then b.{END}{S}assistant{C}commentary to=functions.a {K}json{M}'
    '{"path": "x<|call|>y", "q": "\\"}"}'
    f"{CALL}{S}assistant{C}analysis to=python code{M}print('<|')\n{CALL}"
    f"{S}user{M}hi{END}{S}assistant{C}final{M}Done <| ok.{RET}"
)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(min_value=1, max_value=len(SAMPLE) - 1), max_size=40))
def test_any_rechunking_gives_the_same_result(cuts: set[int]) -> None:
    expected = run("harmony", [SAMPLE])
    assert expected.reasoning == 'Plan: call "a" <| then b.'
    assert expected.content == f"{S}user{M}hi{END}Done <| ok."
    assert [(call.name, call.arguments) for call in expected.calls] == [
        ("a", '{"path": "x<|call|>y", "q": "\\"}"}'),
        ("python", "print('<|')\n"),
    ]
    assert run("harmony", pieces_at(SAMPLE, cuts)) == expected
