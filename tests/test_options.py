"""Every option of every public entry point is checked at once: a ConfigurationError naming the choices.

``"none"`` is the one documented spelling of "no delimiter rewriting" (``api_tool_call`` an alias), at every
entry point; a plain list (or one bytes object) is a source.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from operators import convert_openai_chat, emit_segments, fold_invocations
from operators.segments import FileTool
from pipeline import ConfigurationError, process, to_chunks
from pipeline.compose import chunk_core
from pipeline.models import PipelineEvent, SegmentType
from pipeline.seeds import create_streaming_handler
from pipeline.seeds.handlers import ApiToolCallStreamingResponseHandler, resolve_parser_name
from pipeline.testing import chunked, collect, counter_segment_ids, replay, sequential_call_ids
from tests.conftest import FIXTURES
from tests.reference import read_payloads

RECORDING = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
KIMI_TEXT = FIXTURES / "raw_model_output" / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt"


async def _nothing() -> AsyncIterator[Any]:
    items: list[Any] = []
    for item in items:
        yield item


def _deterministic(**options: Any) -> dict[str, Any]:
    return {"id_factory": sequential_call_ids, "segment_ids": counter_segment_ids(), **options}


FORMATS_MESSAGE = "expected one of: none, "

BAD_PROCESS_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"provider": "OpenAI"}, "unknown provider 'OpenAI'; expected one of: auto, openai, openai-responses,"),
    ({"provider": None}, "unknown provider None; expected one of: auto, openai,"),
    ({"framing": "ssee"}, "unknown framing 'ssee'; expected one of: auto, sse, jsonl"),
    ({"tool_format": "kimi-k3"}, f"unknown tool format 'kimi-k3'; {FORMATS_MESSAGE}"),
    ({"tool_format": ""}, f"unknown tool format ''; {FORMATS_MESSAGE}"),
    ({"choice": -1}, "choice must be an integer >= 0, got -1"),
    ({"choice": "1"}, "choice must be an integer >= 0, got '1'"),
    ({"max_argument_size": -1}, "max_argument_size must be an integer >= 0, got -1"),
    ({"max_argument_size": 1.5}, "max_argument_size must be an integer >= 0, got 1.5"),
    ({"file_tools": {"write_file": "content"}}, "file_tools must map tool names to FileTool objects"),
    ({"tools": {"get_weather": 1}}, "tools['get_weather'] must be a pydantic model or TypeAdapter, got 1"),
    ({"tools": ["get_weather"]}, "tools must map tool names to pydantic models"),
    ({"id_factory": "call_"}, "id_factory must be a callable"),
    ({"segment_ids": 3}, "segment_ids must be a callable"),
]


@pytest.mark.parametrize(("options", "message"), BAD_PROCESS_OPTIONS, ids=lambda value: repr(value)[:40])
def test_process_rejects_a_bad_option_when_called(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        process(_nothing(), **options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"provider": "anthropic-messages"}, "unknown provider 'anthropic-messages'; expected one of: auto,"),
        ({"framing": "SSE"}, "unknown framing 'SSE'; expected one of: auto, sse, jsonl"),
        ({"choice": -2}, "choice must be an integer >= 0, got -2"),
    ],
)
def test_to_chunks_and_chunk_core_reject_a_bad_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        to_chunks(_nothing(), **options)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        chunk_core(**options)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: convert_openai_chat(_nothing(), choice=-1), "choice must be an integer >= 0, got -1"),
        (
            lambda: emit_segments(_nothing(), file_tools={"w": 1}),  # type: ignore[dict-item]
            "file_tools must map tool names to FileTool",
        ),
        (
            lambda: emit_segments(_nothing(), segment_ids="text"),  # type: ignore[arg-type]
            "segment_ids must be a callable",
        ),
        (
            lambda: fold_invocations(_nothing(), tools={"t": 1}),  # type: ignore[dict-item]
            "tools['t'] must be a pydantic model",
        ),
    ],
)
def test_operators_reject_a_bad_option(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        make()


async def _events(path: Path, **options: Any) -> list[dict[str, Any]]:
    data = path.read_bytes()  # noqa: ASYNC240 (a small fixture)

    async def body() -> AsyncIterator[bytes]:
        yield data

    return [event.to_dict() for event in await collect(process(body(), **_deterministic(**options)))]


@pytest.mark.anyio
@pytest.mark.parametrize("spelling", ["none", "api_tool_call"])
async def test_process_none_means_no_rewriting(spelling: str) -> None:
    events = await _events(RECORDING, tool_format=spelling)
    assert events == await _events(RECORDING)
    assert [event["name"] for event in events if event["type"] == "TOOL_INVOCATION"] == [
        "GetWeatherArgs",
        "get_stock_price",
    ]


@pytest.mark.anyio
async def test_testing_replay_takes_none_and_checks_chunk_sizes() -> None:
    assert await replay(KIMI_TEXT, tool_format="none") == await replay(KIMI_TEXT)
    with pytest.raises(ConfigurationError, match=re.escape("chunk_size must be an integer >= 1, got 0")):
        await replay(RECORDING, chunk_size=0)
    with pytest.raises(ConfigurationError, match=re.escape("chunk sizes must be integers >= 1, got [3, -1]")):
        await replay(RECORDING, chunk_sizes=[3, -1])


def test_chunked_refuses_sizes_below_one() -> None:
    assert chunked(b"abcde", [2, 1]) == [b"ab", b"c", b"de"]
    for sizes in (0, -3, [], [1, 0]):
        with pytest.raises(ConfigurationError, match="chunk sizes must be integers >= 1"):
            chunked(b"abcde", sizes)


def test_the_handler_factory_takes_none_as_api_tool_call(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_parser_name("none") == "api_tool_call"
    assert isinstance(create_streaming_handler("none"), ApiToolCallStreamingResponseHandler)
    monkeypatch.setenv("STREAMFOLD_STREAM_PARSER", "none")
    assert type(create_streaming_handler()) is ApiToolCallStreamingResponseHandler
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "unknown stream parser 'nothing'; expected one of: api_tool_call, pass_through, none,"
        ),
    ):
        create_streaming_handler("nothing")


def test_the_handler_factory_checks_its_options() -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape("max_argument_size must be an integer >= 0, got -1")
    ):
        create_streaming_handler("api_tool_call", max_argument_size=-1)
    with pytest.raises(ConfigurationError, match="file_tools must map tool names to FileTool objects"):
        create_streaming_handler("hermes", file_tools={"write_file": "content"})
    with pytest.raises(ConfigurationError, match=re.escape("parser_name must be a string, got 3")):
        create_streaming_handler(3)  # type: ignore[arg-type]
    create_streaming_handler("api_tool_call", file_tools={"save": FileTool(SegmentType.WRITE_FILE, "text")})


@pytest.mark.anyio
async def test_a_plain_list_of_provider_dicts_is_a_source() -> None:
    dicts = [payload for _, payload in read_payloads(RECORDING)]
    from_list: list[PipelineEvent] = await collect(process(dicts, **_deterministic()))
    assert [event.to_dict() for event in from_list] == await _events(RECORDING)
    chunks = await collect(to_chunks(dicts, provider="openai", id_factory=sequential_call_ids))
    assert chunks == await collect(to_chunks(iter([RECORDING.read_bytes()]), id_factory=sequential_call_ids))


@pytest.mark.anyio
async def test_one_bytes_object_is_a_whole_body() -> None:
    events = await collect(process(RECORDING.read_bytes(), **_deterministic()))
    assert [event.to_dict() for event in events] == await _events(RECORDING)


@pytest.mark.parametrize("source", ["data: {}\n\n", {"choices": []}, 42])
def test_a_source_that_is_not_iterable_items_is_refused(source: object) -> None:
    with pytest.raises(ConfigurationError, match="a source is an async or plain iterable"):
        process(source)  # type: ignore[arg-type]


def test_the_splitter_refuses_a_negative_cap_with_a_configuration_error() -> None:
    from operators.arguments.splitter import ArgumentSplitter

    with pytest.raises(ConfigurationError, match="max_argument_size must be an integer >= 0, got -1"):
        ArgumentSplitter(max_argument_size=-1)


@pytest.mark.anyio
async def test_a_source_item_of_no_known_kind_is_a_decode_error_naming_its_type() -> None:
    from pipeline import process
    from pipeline.errors import StreamDecodeError

    async def drain() -> None:
        async with process([object()]).stream() as events:
            async for _ in events:
                pass

    with pytest.raises(StreamDecodeError, match="a source item is a object: expected bytes"):
        await drain()
