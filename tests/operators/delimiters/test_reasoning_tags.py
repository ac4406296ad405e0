"""ReasoningTagSplitter: reasoning written between tags in the text, at every chunking."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.delimiters.reasoning_tags import ReasoningTagSplitter, split_reasoning_tags
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse, SegmentEvent, ToolCallDelta, ToolInvocation
from pipeline.testing import collect
from tests.conftest import TESTS

RAW = TESTS / "fixtures" / "raw_model_output"


def runs(chunks: list[ChunkResponse]) -> list[tuple[str, str]]:
    """The text of ``chunks`` as merged (kind, text) runs, in order."""
    out: list[tuple[str, str]] = []
    for chunk in chunks:
        for kind, text in (("reasoning", chunk.reasoning or ""), ("text", chunk.content)):
            if not text:
                continue
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + text)
            else:
                out.append((kind, text))
    return out


def split(pieces: list[str], **options: Any) -> list[ChunkResponse]:
    core = ReasoningTagSplitter(**options)
    out: list[ChunkResponse] = []
    for piece in pieces:
        out.extend(core.feed(ChunkResponse(content=piece)))
    out.extend(core.finish())
    return out


def reference(text: str, opening: str = "<think>", closing: str = "</think>", inside: bool = False) -> Any:
    """The same policy, on the whole text at once."""
    out: list[tuple[str, str]] = []
    if inside:
        stripped = text.lstrip()
        if stripped.startswith(opening):
            text = stripped[len(opening) :]
    position = 0
    while position < len(text):
        tag = closing if inside else opening
        found = text.find(tag, position)
        stop = len(text) if found < 0 else found
        if stop > position:
            kind = "reasoning" if inside else "text"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + text[position:stop])
            else:
                out.append((kind, text[position:stop]))
        if found < 0:
            break
        position = found + len(tag)
        inside = not inside
    return out


CASES = [
    ("<think>plan</think>answer", [("reasoning", "plan"), ("text", "answer")]),
    (
        "Hi <think>a</think> there <think>b</think>!",
        [("text", "Hi "), ("reasoning", "a"), ("text", " there "), ("reasoning", "b"), ("text", "!")],
    ),
    ("<thinking>not a tag</thinking>", [("text", "<thinking>not a tag</thinking>")]),
    ("a <th and <thin but no tag", [("text", "a <th and <thin but no tag")]),
    ("<think>outer <think>inner</think> after", [("reasoning", "outer <think>inner"), ("text", " after")]),
    ("<think>never closed", [("reasoning", "never closed")]),
    ("ends with <thi", [("text", "ends with <thi")]),
    ("<think>ends with </thi", [("reasoning", "ends with </thi")]),
    ("stray </think> close", [("text", "stray </think> close")]),
    ("<think></think>only text", [("text", "only text")]),
    ("<<think>x</think>>", [("text", "<"), ("reasoning", "x"), ("text", ">")]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_every_chunk_boundary(text: str, expected: list[tuple[str, str]]) -> None:
    assert runs(split([text])) == expected
    for cut in range(len(text) + 1):
        assert runs(split([text[:cut], text[cut:]])) == expected, cut
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            pieces = [text[:first], text[first:second], text[second:]]
            assert runs(split(pieces)) == expected, (first, second)
    assert runs(split(list(text))) == expected


def test_a_partial_tag_is_held_back_never_leaked() -> None:
    core = ReasoningTagSplitter()
    assert core.feed(ChunkResponse(content="Hi <th")) == [ChunkResponse(content="Hi ")]
    assert core.feed(ChunkResponse(content="ink>pla")) == [ChunkResponse(reasoning="pla")]
    assert core.feed(ChunkResponse(content="n</")) == [ChunkResponse(reasoning="n")]
    assert core.feed(ChunkResponse(content="think>ok")) == [ChunkResponse(content="ok")]
    assert core.finish() == []


def test_a_finish_reason_releases_what_is_held_on_its_own_chunk() -> None:
    """The model's text is over at its finish reason: a held partial tag goes out there, before the stages
    after (the delimiter rewriter ends its calls at that chunk), not with the complete chunk after it."""
    core = ReasoningTagSplitter()
    assert core.feed(ChunkResponse(content="ok <th")) == [ChunkResponse(content="ok ")]
    assert core.feed(ChunkResponse(finish_reason="stop")) == [
        ChunkResponse(content="<th", finish_reason="stop")
    ]
    complete = ChunkResponse(finish_reason="stop", is_complete=True)
    assert core.feed(complete) == [complete]
    inside = ReasoningTagSplitter(start_in_reasoning=True)
    assert inside.feed(ChunkResponse(content="a</thi")) == [ChunkResponse(reasoning="a")]
    assert inside.feed(ChunkResponse(content="", finish_reason="length")) == [
        ChunkResponse(reasoning="</thi", finish_reason="length")
    ]


def test_look_alike_held_back_only_while_it_may_be_a_tag() -> None:
    core = ReasoningTagSplitter()
    assert core.feed(ChunkResponse(content="<th")) == [ChunkResponse()]
    assert core.feed(ChunkResponse(content="inking>")) == [ChunkResponse(content="<thinking>")]


def test_kimi_style() -> None:
    text = "◁think▷用户想要◁/think▷好的"
    expected = [("reasoning", "用户想要"), ("text", "好的")]
    for cut in range(len(text) + 1):
        assert runs(split([text[:cut], text[cut:]], style="kimi")) == expected


def test_custom_pair_and_bad_styles() -> None:
    assert runs(split(["[R]x[/R]y"], style=("[R]", "[/R]"))) == [("reasoning", "x"), ("text", "y")]
    with pytest.raises(
        ConfigurationError, match="unknown reasoning tag style 'thonk'; expected one of: think"
    ):
        ReasoningTagSplitter("thonk")
    with pytest.raises(ConfigurationError, match="pair of distinct non-empty tags"):
        ReasoningTagSplitter(("", "</x>"))
    with pytest.raises(ConfigurationError, match="start_in_reasoning must be a bool"):
        ReasoningTagSplitter(start_in_reasoning="yes")  # type: ignore[arg-type]


START_CASES = [
    ("plan</think>answer", [("reasoning", "plan"), ("text", "answer")]),
    ("<think>plan</think>answer", [("reasoning", "plan"), ("text", "answer")]),
    ("\n <think>\nplan</think>answer", [("reasoning", "\nplan"), ("text", "answer")]),
    ("all reasoning, never closed", [("reasoning", "all reasoning, never closed")]),
    ("  <thin", [("reasoning", "  <thin")]),
    ("x<think>y</think>z", [("reasoning", "x<think>y"), ("text", "z")]),
]


@pytest.mark.parametrize(("text", "expected"), START_CASES)
def test_start_in_reasoning(text: str, expected: list[tuple[str, str]]) -> None:
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            pieces = [text[:first], text[first:second], text[second:]]
            assert runs(split(pieces, start_in_reasoning=True)) == expected, (first, second)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<think>", "</think>", "<th", "</", "ink>", "a", " ", "\n", "<", ">", "é"]),
        max_size=25,
    ),
    st.lists(st.integers(0, 200), max_size=8),
    st.booleans(),
)
def test_any_rechunking_matches_the_whole_text(words: list[str], cuts: list[int], inside: bool) -> None:
    text = "".join(words)
    bounds = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]
    assert runs(split(pieces, start_in_reasoning=inside)) == reference(text, inside=inside)


def test_other_fields_stay_on_the_last_chunk_and_a_response_ends_the_state() -> None:
    core = ReasoningTagSplitter()
    call = ToolCallDelta(0, "c1", "f", "{}", finished=True)
    out = core.feed(
        ChunkResponse(
            content="a<think>b</think>c<th", tool_calls=[call], finish_reason="stop", is_complete=True
        )
    )
    assert out == [
        ChunkResponse(content="a"),
        ChunkResponse(reasoning="b"),
        ChunkResponse(content="c<th", tool_calls=[call], finish_reason="stop", is_complete=True),
    ]
    assert core.feed(ChunkResponse(content="ink>")) == [ChunkResponse(content="ink>")]
    assert core.feed(ChunkResponse(content="<think>x")) == [ChunkResponse(reasoning="x")]
    started = ReasoningTagSplitter(start_in_reasoning=True)
    assert started.feed(ChunkResponse(content="r</think>t", is_complete=True)) == [
        ChunkResponse(reasoning="r"),
        ChunkResponse(content="t", is_complete=True),
    ]
    assert started.feed(ChunkResponse(content="again")) == [ChunkResponse(reasoning="again")]


def test_chunks_without_content_pass_through_as_the_same_object() -> None:
    core = ReasoningTagSplitter()
    chunk = ChunkResponse(reasoning="provider reasoning")
    assert core.feed(chunk)[0] is chunk


def test_each_tag_character_is_scanned_a_bounded_number_of_times() -> None:
    """Linear: a long reasoning fed one character at a time holds back at most len(tag) - 1 characters."""
    core = ReasoningTagSplitter()
    core.feed(ChunkResponse(content="<think>"))
    for char in "x<" * 5000:
        core.feed(ChunkResponse(content=char))
        assert len(core._held) < len("</think>")


@pytest.mark.anyio
async def test_operator_then_glm_tool_format() -> None:
    """Before a delimiter rewriter: the reasoning comes out, the tool call after it is still found."""
    from operators.delimiters import DelimiterRewriter
    from pipeline.stage import drive

    text = (RAW / "vllm-test_glm-4.5_think_text_then_tool_arg_key_value.txt").read_text()

    async def source() -> Any:
        for start in range(0, len(text), 3):
            yield ChunkResponse(content=text[start : start + 3])

    chunks = await collect(drive(split_reasoning_tags.raw(source()), DelimiterRewriter("glm45")))
    assert runs(chunks)[:2] == [
        ("reasoning", "I want to get the weather."),
        ("text", "\n\nI will help you get the weather.\n"),
    ]
    names = [delta.name for chunk in chunks for delta in chunk.tool_calls or () if delta.name]
    assert names == ["get_weather"]


@pytest.mark.anyio
async def test_process_reasoning_tags_option() -> None:
    from pipeline.compose import process

    text = (RAW / "vllm-test_glm-4.5_think_text_then_tool_arg_key_value.txt").read_text()
    pieces = [text[i : i + 5].encode() for i in range(0, len(text), 5)]
    events = await collect(process(pieces, provider="text", tool_format="glm45", reasoning_tags="think"))
    starts = [
        e.segment_type for e in events if isinstance(e, SegmentEvent) and e.event_type == "SEGMENT_START"
    ]
    assert [str(kind) for kind in starts] == ["reasoning", "text", "tool_call"]
    invocation = next(event for event in events if isinstance(event, ToolInvocation))
    assert invocation.arguments == {"city": "Beijing", "date": "2025-08-01"}
    with pytest.raises(ConfigurationError, match="reasoning tag style"):
        process(pieces, provider="text", reasoning_tags="nope")
    plain = await collect(process(pieces, provider="text", tool_format="glm45"))
    assert not any(re.search("reasoning", str(getattr(event, "segment_type", ""))) for event in plain)


def test_cli_replay_reasoning_tags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from pipeline.cli.main import main

    fixture = str(RAW / "vllm-test_glm-4.5_think_text_then_tool_arg_key_value.txt")
    argv = ["replay", fixture, "--tool-format", "glm45", "--output", "jsonl", "--chunk-size", "4"]
    assert main([*argv, "--reasoning-tags", "think"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    starts = [line["segment_type"] for line in lines if line["type"] == "SEGMENT_START"]
    assert starts == ["reasoning", "text", "tool_call"]
    reasoning_id = lines[0]["segment_id"]
    reasoning = "".join(
        line["payload"]["delta"]
        for line in lines
        if line["type"] == "SEGMENT_CONTENT" and line["segment_id"] == reasoning_id
    )
    assert reasoning == "I want to get the weather."
    opened = tmp_path / "opened.txt"
    opened.write_text("plan</think>answer")
    assert (
        main(
            [
                "replay",
                str(opened),
                "--output",
                "openai-sse",
                "--reasoning-tags",
                "think",
                "--start-in-reasoning",
            ]
        )
        == 0
    )
    deltas = [
        json.loads(line[6:])["choices"][0]["delta"]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("data: {") and "choices" in line
    ]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "plan"
    assert "".join(d.get("content") or "" for d in deltas) == "answer"


def test_a_stray_think_tag_beside_provider_reasoning_stays_text() -> None:
    core = ReasoningTagSplitter()
    out: list[ChunkResponse] = []
    for chunk in [
        ChunkResponse(reasoning="The user asks about tags."),
        ChunkResponse(content="Use <think> to"),
        ChunkResponse(content=" open a block."),
        ChunkResponse(content="", finish_reason="stop", is_complete=True),
    ]:
        out.extend(core.feed(chunk))
    out.extend(core.finish())
    assert out == [
        ChunkResponse(reasoning="The user asks about tags."),
        ChunkResponse(content="Use <think> to"),
        ChunkResponse(content=" open a block."),
        ChunkResponse(content="", finish_reason="stop", is_complete=True),
    ]


def test_provider_reasoning_ends_a_start_in_reasoning_response_s_reasoning_and_the_next_starts_afresh() -> (
    None
):
    core = ReasoningTagSplitter(start_in_reasoning=True)
    out: list[ChunkResponse] = []
    for chunk in [
        ChunkResponse(content="  "),
        ChunkResponse(reasoning="plan", content="Answer <think>"),
        ChunkResponse(content="", is_complete=True),
        ChunkResponse(content="again</think>done", is_complete=True),
    ]:
        out.extend(core.feed(chunk))
    assert out == [
        ChunkResponse(content=""),  # "  " held: an opening tag may follow
        ChunkResponse(reasoning="  "),
        ChunkResponse(reasoning="plan", content="Answer <think>"),
        ChunkResponse(content="", is_complete=True),
        ChunkResponse(reasoning="again"),
        ChunkResponse(content="done", is_complete=True),
    ]


@pytest.mark.anyio
async def test_process_keeps_the_answer_beside_reasoning_content_as_text() -> None:
    from pipeline import process

    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Think first."}}]},
        {"choices": [{"index": 0, "delta": {"content": "A stray <think> here"}}]},
        {"choices": [{"index": 0, "delta": {"content": " and the rest."}, "finish_reason": "stop"}]},
    ]
    out = await collect(process(events, provider="openai", reasoning_tags="think"))
    texts = [
        (event.segment_type, event.delta)
        for event in out
        if isinstance(event, SegmentEvent) and event.delta is not None
    ]
    assert texts == [(None, "Think first."), (None, "A stray <think> here"), (None, " and the rest.")]
    starts = [event.segment_type for event in out if isinstance(event, SegmentEvent) and event.segment_type]
    assert [str(kind) for kind in starts] == ["reasoning", "reasoning", "text", "text"]
