"""The argument-chunk splitter (``operators.arguments.splitter``): one parser per call, the events of each
delta on the chunk's :class:`SplitChunk`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from aiostream import stream
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import ArgumentSplitter, split_arguments
from operators.convert.anthropic import AnthropicConverter
from operators.convert.cohere import CohereConverter
from operators.convert.gemini import GeminiConverter
from operators.convert.openai_chat import OpenAIChatConverter
from operators.convert.openai_responses import OpenAIResponsesConverter
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentEvent,
    ArgumentValue,
    ChunkResponse,
    JSONPath,
    SplitChunk,
    ToolCallDelta,
)
from tests import reference

D, V, E = ArgumentDelta, ArgumentValue, ArgumentError


def call(index: int, text: str | None = None, **fields: Any) -> ChunkResponse:
    return ChunkResponse(tool_calls=[ToolCallDelta(index, arguments_delta=text, **fields)])


Out = ChunkResponse | SplitChunk


def split(chunks: Iterable[ChunkResponse], **options: Any) -> list[Out]:
    """The splitter's outputs; a second splitter, not fed the chunks its ``passes`` accepts (as a chain
    does), must give the same."""
    splitter, skipping = ArgumentSplitter(**options), ArgumentSplitter(**options)
    out: list[Out] = []
    for chunk in chunks:
        outputs = splitter.feed(chunk)
        assert outputs == ([chunk] if skipping.passes(chunk) else skipping.feed(chunk))
        out += outputs
    finished = splitter.finish()
    assert finished == skipping.finish()
    return out + finished


def with_events(chunk: ChunkResponse, *events: tuple[ArgumentEvent, ...]) -> SplitChunk:
    return SplitChunk(chunk, events)


def events_per_delta(chunks: Iterable[Out]) -> list[tuple[ArgumentEvent, ...]]:
    return [events for chunk in chunks if isinstance(chunk, SplitChunk) for events in chunk.argument_events]


def events_by_call(chunks: Iterable[Out]) -> dict[int, list[ArgumentEvent]]:
    found: dict[int, list[ArgumentEvent]] = {}
    for chunk in chunks:
        if isinstance(chunk, SplitChunk):
            deltas = chunk.chunk.tool_calls or []
            for delta, events in zip(deltas, chunk.argument_events, strict=True):
                found.setdefault(delta.index, []).extend(events)
    return found


def test_chunks_without_tool_calls_pass_through_unchanged() -> None:
    chunks = [ChunkResponse(content="hi"), ChunkResponse(reasoning="hm"), ChunkResponse(tool_calls=[])]
    splitter = ArgumentSplitter()
    for chunk in chunks:
        assert splitter.passes(chunk)
        assert splitter.feed(chunk) == [chunk]
    assert splitter.finish() == []
    assert not splitter.passes(call(0, "{}"))
    assert not splitter.passes(ChunkResponse(content="hi", is_complete=True))


def test_each_delta_carries_what_it_streamed_or_completed() -> None:
    chunks = [
        call(0, None, call_id="call_1", name="write_file"),
        call(0, '{"path": "a.py", "content": "print('),
        call(0, '1)\\n"}'),
        call(0, finished=True),
    ]
    out = split(chunks)
    assert out[0] == with_events(chunks[0], ())
    assert out[1] == with_events(
        chunks[1], (D(("path",), "a.py"), V(("path",), "a.py"), D(("content",), "print("))
    )
    root = {"path": "a.py", "content": "print(1)\n"}
    assert out[2] == with_events(
        chunks[2], (D(("content",), "1)\n"), V(("content",), "print(1)\n"), V((), root))
    )
    assert out[3] == with_events(chunks[3], ())  # the root was already complete: finishing adds nothing
    assert len(out) == 4


def test_finished_appends_the_parsers_final_events() -> None:
    out = split([call(0, '{"n": 1', finished=True), call(1, "", finished=True), call(2, "2", finished=True)])
    assert events_per_delta(out) == [
        (
            E(
                "truncated",
                "the arguments end at offset 7 where more of the number, ',' or '}' was expected",
                7,
            ),
        ),
        (V((), {}),),
        (V((), 2),),
    ]


def test_parallel_calls_have_independent_parsers() -> None:
    chunks = [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, arguments_delta='{"a": "x'),
                ToolCallDelta(1, arguments_delta='{"a": "y'),
            ]
        ),
        call(1, 'z"}', finished=True),
        call(0, 'w"}', finished=True),
    ]
    assert events_by_call(split(chunks)) == {
        0: [D(("a",), "x"), D(("a",), "w"), V(("a",), "xw"), V((), {"a": "xw"})],
        1: [D(("a",), "y"), D(("a",), "z"), V(("a",), "yz"), V((), {"a": "yz"})],
    }


def test_custom_calls_stream_free_text_as_input() -> None:
    out = split(
        [
            call(0, "*** Begin Patch\n", kind="custom", name="apply_patch"),
            call(0, '{"not": json', kind="custom"),
            call(0, "", kind="custom", finished=True),
        ]
    )
    text = '*** Begin Patch\n{"not": json'
    assert events_by_call(out) == {
        0: [
            D(("input",), "*** Begin Patch\n"),
            D(("input",), '{"not": json'),
            V(("input",), text),
            V((), {"input": text}),
        ]
    }


def test_unfinished_calls_are_finished_at_the_end_of_the_stream_in_index_order() -> None:
    chunks = [
        call(2, '{"a": [1', name="late"),
        call(0, "raw text", kind="custom"),
        call(1, '{"done": true}', finished=True),
        call(3, None, name="no_arguments"),
    ]
    out = split(chunks)
    assert len(out) == 5
    assert out[4] == with_events(
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, finished=True, kind="custom"),
                ToolCallDelta(2, finished=True),
                ToolCallDelta(3, finished=True),
            ]
        ),
        (V(("input",), "raw text"), V((), {"input": "raw text"})),
        (
            E(
                "truncated",
                "the arguments end at offset 8 where more of the number, ',' or ']' was expected",
                8,
            ),
        ),
        (V((), {}),),
    )


def test_finish_reports_each_open_call_once() -> None:
    splitter = ArgumentSplitter()
    splitter.feed(call(0, "[1"))
    assert len(splitter.finish()) == 1
    assert splitter.finish() == []


def test_nothing_extra_at_the_end_when_every_call_finished() -> None:
    assert len(split([call(0, "{}", finished=True), ChunkResponse(content="after")])) == 2


def test_too_large_then_the_call_passes_through() -> None:
    chunks = [call(0, '{"a": "01'), call(0, "23456789"), call(0, '"}'), call(0, finished=True)]
    out = split(chunks, max_argument_size=10)
    message = "the arguments are longer than the limit of 10 characters"
    assert events_by_call(out) == {0: [D(("a",), "01"), D(("a",), "2"), E("too_large", message, 10)]}
    assert out[2] == with_events(chunks[2], ())
    assert out[3] == with_events(chunks[3], ())
    assert len(out) == 4


def test_too_large_custom_input() -> None:
    chunks = [call(0, "abcdef", kind="custom"), call(0, "ghijkl", kind="custom")]
    out = split(chunks, max_argument_size=8)
    message = "the custom tool input is longer than the limit of 8 characters"
    assert events_by_call(out) == {
        0: [D(("input",), "abcdef"), D(("input",), "gh"), E("too_large", message, 8)]
    }
    assert out[2] == with_events(
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True, kind="custom")]), ()
    )


def test_deltas_after_a_call_finished_are_passed_through() -> None:
    chunks = [call(0, "{}", finished=True), call(0, " x"), call(0, finished=True)]
    out = split(chunks)
    assert out[1] == with_events(chunks[1], ())
    assert out[2] == with_events(chunks[2], ())


def test_the_last_chunk_of_a_response_finishes_its_calls_and_the_next_response_starts_afresh() -> None:
    last = ChunkResponse(is_complete=True, finish_reason="length")
    chunks = [call(0, '{"a": 1'), last, call(0, '{"b": 2}')]
    out = split(chunks)
    truncated = E(
        "truncated", "the arguments end at offset 7 where more of the number, ',' or '}' was expected", 7
    )
    assert out[1] == with_events(
        ChunkResponse(is_complete=True, finish_reason="length", tool_calls=[ToolCallDelta(0, finished=True)]),
        (truncated,),
    )
    assert out[2] == with_events(chunks[2], (V(("b",), 2), V((), {"b": 2})))
    # complete already: the closing chunk adds nothing
    assert out[3] == with_events(ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True)]), ())


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_argument_size"):
        ArgumentSplitter(max_argument_size=-1)


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=15,
    ).map(lambda value: {"value": value, "note": 'x\\"y\n'}),
    st.data(),
)
def test_any_split_into_deltas_gives_the_same_arguments(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(arguments, ensure_ascii=data.draw(st.booleans()))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(text) - 1), max_size=30))))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    chunks = [call(0, piece) for piece in pieces]
    if data.draw(st.booleans()):
        chunks.append(call(0, finished=True))
    events = events_by_call(split(chunks))[0]
    values = {event.path: event.value for event in events if isinstance(event, ArgumentValue)}
    assert values.pop(()) == arguments
    assert values == {(key,): value for key, value in arguments.items()}
    streamed: dict[JSONPath, str] = {}
    for event in events:
        if isinstance(event, ArgumentDelta):
            streamed[event.path] = streamed.get(event.path, "") + event.delta
    assert streamed[("note",)] == arguments["note"]


@pytest.mark.anyio
async def test_the_operator_streams_and_finishes_open_calls() -> None:
    source = stream.iterate([ChunkResponse(content="x"), call(0, '{"a": "b'), call(1, "[1, 2]")])
    async with (source | split_arguments.pipe(max_argument_size=100)).stream() as items:
        out = [chunk async for chunk in items]
    assert events_by_call(out) == {
        0: [
            D(("a",), "b"),
            E(
                "truncated",
                "the arguments end at offset 8 where the rest of the string at path ('a',)"
                " and its closing quote was expected",
                8,
            ),
        ],
        1: [V((), [1, 2])],
    }
    assert out[0] == ChunkResponse(content="x")
    assert out[-1] == with_events(
        ChunkResponse(tool_calls=[ToolCallDelta(0, finished=True), ToolCallDelta(1, finished=True)]),
        (events_by_call(out)[0][-1],),
        (),
    )


# Recorded streams: the splitter agrees with the oracle's whole-text parse of every call.

_Converter = (
    AnthropicConverter | OpenAIChatConverter | OpenAIResponsesConverter | GeminiConverter | CohereConverter
)
_CONVERTERS: dict[str, Callable[[], _Converter]] = {
    "anthropic": lambda: AnthropicConverter(id_factory=reference.call_id_for),
    "openai_responses": lambda: OpenAIResponsesConverter(id_factory=reference.call_id_for),
    "gemini": lambda: GeminiConverter(id_factory=reference.call_id_for),
    "cohere": lambda: CohereConverter(id_factory=reference.call_id_for),
    "openai_chat": lambda: OpenAIChatConverter(id_factory=reference.call_id_for),
    "openai_compatible": lambda: OpenAIChatConverter(id_factory=reference.call_id_for),
}
_RECORDINGS = [
    path
    for path in reference.fixture_paths()
    if path.parent.name in _CONVERTERS and reference.expected(path).error is None  # no in-band error
]


@pytest.mark.parametrize("path", _RECORDINGS, ids=[path.name for path in _RECORDINGS])
def test_recorded_streams(path: Path) -> None:
    expected = reference.expected(path)
    converter = _CONVERTERS[path.parent.name]()
    chunks = [chunk for _, payload in reference.read_payloads(path) for chunk in converter.feed(payload)]
    chunks += converter.finish()
    found = events_by_call(split(chunks))
    assert len(found) == len(expected.invocations)
    for index, invocation in enumerate(expected.invocations):
        events = found[index]
        roots = [event.value for event in events if isinstance(event, ArgumentValue) and event.path == ()]
        members = {
            event.path[0]: event.value
            for event in events
            if isinstance(event, ArgumentValue) and len(event.path) == 1
        }
        failures = [event for event in events if isinstance(event, ArgumentError)]
        if invocation.arguments is not None:
            assert roots == [invocation.arguments]
            assert failures == []
            if invocation.arguments:
                assert members == invocation.arguments
        else:
            assert roots == []
            assert [failure.kind for failure in failures] == [invocation.error_kind]
            assert members == invocation.partial_arguments


# --- I-JSON through the whole pipeline ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "offset", "problem"),
    [
        ('{"a": "x\\ud800"}', 8, "high surrogate escape '\\ud800' not followed by a low surrogate escape"),
        ('{"a": "\\udc00"}', 7, "low surrogate escape '\\udc00' without a high surrogate escape before it"),
        ('{"n": 1e999}', 6, "the number 1e999 overflows a double"),
        ('{"n": [-1e999]}', 7, "the number -1e999 overflows a double"),
    ],
)
@pytest.mark.parametrize("provider", ["text", "openai"])
def test_non_i_json_arguments_are_an_invalid_json_invocation_in_replay_jsonl(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    arguments: str,
    offset: int,
    problem: str,
    provider: str,
) -> None:
    """``replay --output jsonl`` used to crash on these (``UnicodeEncodeError``) or print ``Infinity``."""
    from pipeline.cli.main import main

    path = tmp_path / "stream"
    if provider == "text":
        path.write_text(f'<tool_call>{{"name": "f", "arguments": {arguments}}}</tool_call>', encoding="utf-8")
        argv = ["--provider", "text", "--tool-format", "hermes"]
    else:
        delta = {
            "tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": arguments}}]
        }
        events = [
            {"id": "c", "choices": [{"index": 0, "delta": delta}]},
            {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        path.write_text("".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n")
        argv = ["--provider", "openai"]
    assert main(["replay", str(path), *argv, "--output", "jsonl"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out
    assert "NaN" not in out
    lines = [json.loads(line) for line in out.splitlines()]
    (invocation,) = [line for line in lines if line["type"] == "TOOL_INVOCATION"]
    assert invocation["name"] == "f"
    error = invocation["error"]
    assert error["kind"] == "invalid_json"
    assert error["message"] == f"invalid JSON at offset {offset}: {problem}"
