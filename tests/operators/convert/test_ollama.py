"""Ollama's native streams (/api/chat and /api/generate): exact chunks for hand-written lines, every
recording split at every byte, bytes and dicts alike, and detection with ``provider="auto"``."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter import JSONLinesFramer
from operators.adapter.detect import detect_wire_format
from operators.convert.ollama import OllamaConverter, convert_ollama
from pipeline.compose import process
from pipeline.errors import ConverterError, ProviderError, StreamfoldError
from pipeline.models import ChunkResponse, Payload, PipelineEvent, TokenUsage, ToolCallDelta
from pipeline.testing import counter_segment_ids, summarize
from tests.conftest import TESTS
from tests.converter_cases import Event, collect, iterate, load_events, run_converter, sequential_ids

FIXTURES = TESTS / "fixtures" / "ollama"
FIXTURE_FILES = sorted(FIXTURES.iterdir())
RECORDED_BYTES = {path: path.read_bytes() for path in FIXTURE_FILES}


def convert(events: Iterable[Mapping[str, Any]]) -> list[ChunkResponse]:
    return run_converter(OllamaConverter(id_factory=sequential_ids), events)


def chat(content: str = "", **message: Any) -> Event:
    return {"model": "qwen3", "message": {"role": "assistant", "content": content, **message}, "done": False}


def generate(response: str = "", **fields: Any) -> Event:
    return {"model": "qwen3", "response": response, "done": False, **fields}


def done(reason: str | None = "stop", **fields: Any) -> Event:
    line: Event = {"model": "qwen3", "message": {"role": "assistant", "content": ""}, "done": True, **fields}
    if reason is not None:
        line["done_reason"] = reason
    return line


def call(name: str, arguments: dict[str, Any], call_id: str | None = None, index: int = 0) -> Event:
    called: Event = {"function": {"index": index, "name": name, "arguments": arguments}}
    if call_id is not None:
        called["id"] = call_id
    return called


METRICS: dict[str, Any] = {
    "total_duration": 6333627375,
    "load_duration": 2169395125,
    "prompt_eval_count": 277,
    "prompt_eval_duration": 1355263167,
    "eval_count": 82,
    "eval_duration": 2249808459,
}
DURATIONS = {key: value for key, value in METRICS.items() if key.endswith("duration")}


def test_chat_text_and_thinking() -> None:
    assert convert([chat(thinking="The"), chat(thinking=" user"), chat("Hi"), done(**METRICS)]) == [
        ChunkResponse(reasoning="The", metadata={"model": "qwen3"}),
        ChunkResponse(reasoning=" user"),
        ChunkResponse(content="Hi"),
        ChunkResponse(
            is_complete=True,
            finish_reason="stop",
            usage=TokenUsage(prompt_tokens=277, completion_tokens=82, total_tokens=359),
            metadata={"stop_reason": "stop", **DURATIONS},
        ),
    ]


def test_generate_response_and_thinking() -> None:
    last = {"done": True, "done_reason": "length", "context": [1, 2], "eval_count": 3}
    assert convert([generate(thinking="hmm"), generate("Rab"), generate("bits"), {**generate(), **last}]) == [
        ChunkResponse(reasoning="hmm", metadata={"model": "qwen3"}),
        ChunkResponse(content="Rab"),
        ChunkResponse(content="bits"),
        ChunkResponse(
            is_complete=True,
            finish_reason="length",
            usage=TokenUsage(prompt_tokens=0, completion_tokens=3, total_tokens=3),
            metadata={"stop_reason": "length"},
        ),
    ]


def test_each_call_arrives_whole_in_order_of_arrival() -> None:
    """Ollama numbers every call of a line 0 and may leave the second without an id (a real qwen3.5
    stream did both): positions follow arrival, a missing id is generated, and a stop after a call is a
    tool_calls finish."""
    calls = [call("weather_get", {"city": "Paris"}, "call_zy4pkytc"), call("weather_get", {"city": "Lyon"})]
    later = [call("clock", {})]
    assert convert([chat(tool_calls=calls), chat(tool_calls=later), done()]) == [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(0, "call_zy4pkytc", "weather_get", '{"city":"Paris"}', finished=True),
                ToolCallDelta(1, "gen_1", "weather_get", '{"city":"Lyon"}', finished=True),
            ],
            metadata={"model": "qwen3"},
        ),
        ChunkResponse(tool_calls=[ToolCallDelta(2, "gen_2", "clock", "{}", finished=True)]),
        ChunkResponse(is_complete=True, finish_reason="tool_calls", metadata={"stop_reason": "stop"}),
    ]


def test_generate_calls_are_at_the_top_and_arguments_keep_their_order() -> None:
    arguments = {"z": 1, "a": [True, None], "é": "ü"}
    chunks = convert([generate(tool_calls=[{"function": {"name": "f", "arguments": arguments}}])])
    assert chunks == [
        ChunkResponse(
            tool_calls=[
                ToolCallDelta(
                    0,
                    "gen_0",
                    "f",
                    json.dumps(arguments, separators=(",", ":"), ensure_ascii=False),
                    finished=True,
                )
            ],
            metadata={"model": "qwen3"},
        )
    ]


@pytest.mark.parametrize(
    ("reason", "finish_reason"),
    [("stop", "stop"), ("length", "length"), ("load", "stop"), ("unload", "stop"), ("mystery", "mystery")],
)
def test_done_reasons_are_normalised(reason: str, finish_reason: str) -> None:
    assert convert([done(reason)]) == [
        ChunkResponse(metadata={"model": "qwen3"}),
        ChunkResponse(is_complete=True, finish_reason=finish_reason, metadata={"stop_reason": reason}),
    ]


def test_done_without_a_reason_is_a_stop() -> None:
    assert convert([chat("a"), done(None)])[-1] == ChunkResponse(is_complete=True, finish_reason="stop")


def test_a_stream_cut_before_done_has_no_finish() -> None:
    assert convert([chat("a")]) == [ChunkResponse(content="a", metadata={"model": "qwen3"})]


@pytest.mark.anyio
async def test_operator_yields_the_core_chunks() -> None:
    events = [chat("a"), chat(tool_calls=[call("f", {})]), done()]
    assert await collect(convert_ollama(iterate(events), id_factory=sequential_ids)) == convert(events)


# --------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"error": "an error was encountered while running the model"}, "event 1: provider error: an error"),
        ({"error": {"message": "overloaded", "code": "overloaded"}}, "event 1: provider error (overloaded)"),
    ],
)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_an_error_line_raises_provider_error(line: Event, message: str, as_bytes: bool) -> None:
    items: list[Any] = [generate("kept"), line]
    if as_bytes:
        items = as_payloads(items)
    converter = OllamaConverter()
    assert converter.feed(items[0]) == [ChunkResponse(content="kept", metadata={"model": "qwen3"})]
    with pytest.raises(ProviderError, match=re.escape(message)) as raised:
        converter.feed(items[1])
    assert raised.value.payload == line


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"message": {"content": 5}, "done": False}, "message.content"),
        ({"message": {"thinking": ["a"]}, "done": False}, "message.thinking"),
        (
            chat(tool_calls=[{"function": {"name": "f", "arguments": "{}"}}]),
            "message.tool_calls[0].function.arguments",
        ),
        (chat(tool_calls=[{"id": 7, "function": {"name": "f"}}]), "message.tool_calls[0].id"),
        ({"response": "a", "done": "yes"}, "done"),
        ({**done(), "eval_count": "3"}, "eval_count"),
        ({**done(), "done_reason": 1}, "done_reason"),
    ],
)
def test_wrong_typed_fields_raise_naming_them(line: Event, field: str) -> None:
    with pytest.raises(ConverterError, match=re.escape(f"event 0: field {field!r}")):
        OllamaConverter().feed(line)


@pytest.mark.parametrize(
    ("calls", "field"),
    [
        ([{"function": {"name": "", "arguments": {}}}], "message.tool_calls[0].function.name"),
        ([call("f", {}), {"id": "x"}], "message.tool_calls[1].function.name"),
    ],
)
def test_a_call_without_a_name_raises_naming_it(calls: list[Event], field: str) -> None:
    with pytest.raises(ConverterError, match=re.escape(f"event 0: field {field!r} should be a non-empty")):
        OllamaConverter().feed(chat(tool_calls=calls))


# --------------------------------------------------------------------------------------------------
# Bytes and dicts, every split of the recordings


def as_payloads(events: Iterable[Any]) -> list[Payload]:
    return [Payload(msgspec.json.encode(event), 0) for event in events]


Outcome = tuple[list[ChunkResponse], str | None]


def framed(pieces: Iterable[bytes]) -> Outcome:
    """Every chunk the framer and the converter give for ``pieces``, and the error that ended them."""
    framer = JSONLinesFramer()
    converter = OllamaConverter(id_factory=sequential_ids)
    chunks: list[ChunkResponse] = []
    try:
        for piece in pieces:
            for payload in framer.feed(piece):
                chunks.extend(converter.feed(payload))
        for payload in framer.finish():
            chunks.extend(converter.feed(payload))
        chunks.extend(converter.finish())
    except StreamfoldError as error:
        return chunks, f"{type(error).__name__}: {error}"
    return chunks, None


WHOLE = {path: framed([data]) for path, data in RECORDED_BYTES.items()}


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda path: path.name)
def test_every_split_of_a_recording_gives_the_same_chunks(path: Path) -> None:
    data = RECORDED_BYTES[path]
    for cut in range(1, len(data)):
        assert framed([data[:cut], data[cut:]]) == WHOLE[path], cut


@settings(max_examples=60, deadline=None)
@given(path=st.sampled_from(FIXTURE_FILES), cuts=st.lists(st.integers(0, 12000), max_size=12))
def test_any_rechunking_of_a_recording_gives_the_same_chunks(path: Path, cuts: list[int]) -> None:
    data = RECORDED_BYTES[path]
    bounds = sorted({cut % (len(data) + 1) for cut in cuts})
    pieces = [data[start:end] for start, end in zip([0, *bounds], [*bounds, len(data)], strict=True)]
    assert framed(pieces) == WHOLE[path]


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda path: path.name)
def test_recorded_lines_as_bytes_give_what_their_dicts_give(path: Path) -> None:
    dicts = load_events(path)
    assert outcome(dicts) == WHOLE[path]
    assert WHOLE[path][0]


LINES = st.lists(
    st.one_of(
        st.builds(chat, st.sampled_from(["Hi", "", "é"])),
        st.builds(generate, st.sampled_from(["a", ""])),
        st.builds(lambda text: chat(thinking=text), st.sampled_from(["t", ""])),
        st.builds(lambda name: chat(tool_calls=[call(name, {"a": 1})]), st.sampled_from(["f", ""])),
        st.builds(done, st.sampled_from(["stop", "length", None])),
        st.just({"error": "boom"}),
        st.just({"message": "not an object", "done": False}),
    ),
    max_size=10,
)


def outcome(items: Iterable[Any]) -> Outcome:
    converter = OllamaConverter(id_factory=sequential_ids)
    chunks: list[ChunkResponse] = []
    try:
        for item in items:
            chunks.extend(converter.feed(item))
    except StreamfoldError as error:
        return chunks, f"{type(error).__name__}: {error}"
    return chunks, None


@settings(max_examples=200, deadline=None)
@given(lines=LINES)
def test_lines_as_bytes_give_what_their_dicts_give(lines: list[Event]) -> None:
    assert outcome(as_payloads(lines)) == outcome(lines)


# --------------------------------------------------------------------------------------------------
# provider="auto"


def test_a_first_chat_line_is_ollama_not_an_error() -> None:
    """Its ``message`` is the model's message: once read as an HTTP error body's ``message``."""
    assert detect_wire_format(chat("The")) == "ollama"
    assert detect_wire_format(generate("The")) == "ollama"
    assert detect_wire_format({"model": "m", "created_at": "t", "response": "", "done": True}) == "ollama"


async def body(*lines: Event) -> AsyncIterator[bytes]:
    yield b"".join(json.dumps(line).encode() + b"\n" for line in lines)


@pytest.mark.anyio
async def test_auto_reads_a_chat_stream() -> None:
    events = await collect(
        process(
            body(chat("Hello"), chat(tool_calls=[call("f", {"x": 1}, "call_1")]), done(**METRICS)),
            segment_ids=counter_segment_ids(),
        )
    )
    summary = summarize(events)
    assert summary.text == "Hello"
    assert [(item.id, item.name, item.arguments) for item in summary.invocations] == [
        ("call_1", "f", {"x": 1})
    ]
    assert summary.finish_reason == "tool_calls"
    assert summary.usage == TokenUsage(prompt_tokens=277, completion_tokens=82, total_tokens=359)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["auto", "ollama"])
async def test_a_first_error_line_is_a_provider_error(provider: Any) -> None:
    received: list[PipelineEvent] = []
    with pytest.raises(ProviderError, match=r"^event 0: provider error: model 'llama9' not found$"):
        await collect(process(body({"error": "model 'llama9' not found"}), provider=provider), received)
    assert received == []
