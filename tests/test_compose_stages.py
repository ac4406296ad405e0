"""``process`` runs its stages' cores in one loop: it must give exactly what the operators piped one
after another give, on every recorded stream, and when the source fails or a stage raises at any point
(what came before is delivered, open tool calls are folded with an ``interrupted`` error, the same
exception propagates)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiostream import Stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import split_arguments
from operators.delimiters import rewrite_delimiters
from operators.invocations import fold_invocations
from operators.registry import ProviderOption, ToolFormat
from operators.segments import emit_segments
from pipeline.compose import process, to_chunks
from pipeline.errors import ConfigurationError
from pipeline.models import PipelineEvent, ToolInvocation
from pipeline.testing import chunked, counter_segment_ids, sequential_call_ids
from tests.reference import FIXTURES, fixture_paths

PARALLEL_CALLS = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
TEXT_THEN_CALL = FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_tool_use.sse"
RAW_HERMES = FIXTURES / "raw_model_output" / "vllm-test_hermes_qwen_2_sequential_tool_calls.txt"
RECORDINGS = {path: path.read_bytes() for path in fixture_paths()}


class SourceFailed(Exception):
    pass


def piped(source: Any, *, provider: ProviderOption = "auto", tool_format: str | None = None) -> Stream[Any]:
    """The reference: the pipeline as the operators piped one after another."""
    chunks = to_chunks(source, provider=provider, id_factory=sequential_call_ids)
    if tool_format is not None:
        chunks = chunks | rewrite_delimiters.pipe(tool_format, id_factory=sequential_call_ids)
    segments = chunks | split_arguments.pipe()
    events = segments | emit_segments.pipe(segment_ids=counter_segment_ids(), call_ids=sequential_call_ids)
    return events | fold_invocations.pipe()


def fused(
    source: Any, *, provider: ProviderOption = "auto", tool_format: ToolFormat | None = None
) -> Stream[PipelineEvent]:
    return process(
        source,
        provider=provider,
        tool_format=tool_format,
        id_factory=sequential_call_ids,
        segment_ids=counter_segment_ids(),
    )


async def pieces(values: list[Any], fail_after: int | None = None) -> AsyncIterator[Any]:
    for position, value in enumerate(values):
        if position == fail_after:
            raise SourceFailed(f"the source failed before piece {position}")
        yield value


async def outcome(events: Stream[Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Every event received (as dicts), and the exception that ended the stream, if any."""
    received: list[dict[str, Any]] = []
    try:
        async with events.stream() as items:
            async for event in items:
                received.append(event.to_dict())
    except Exception as exc:
        return received, f"{type(exc).__name__}: {exc}"
    return received, None


async def both(values: list[Any], fail_after: int | None = None, **options: Any) -> tuple[Any, Any]:
    reference = await outcome(piped(pieces(values, fail_after), **options))
    return reference, await outcome(fused(pieces(values, fail_after), **options))


@pytest.mark.anyio
@pytest.mark.parametrize("path", list(RECORDINGS), ids=lambda path: path.name)
async def test_every_recorded_stream_gives_the_same_events(path: Path) -> None:
    reference, result = await both(chunked(RECORDINGS[path], 61))
    assert result == reference
    assert reference[0]  # the stream gave events


@pytest.mark.anyio
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from([PARALLEL_CALLS, TEXT_THEN_CALL]),
    size=st.integers(min_value=1, max_value=200),
    fail_after=st.integers(min_value=0, max_value=60),
)
async def test_a_source_failing_anywhere_gives_the_same_events_and_error(
    path: Path, size: int, fail_after: int
) -> None:
    reference, result = await both(chunked(RECORDINGS[path], size), fail_after)
    assert result == reference


@pytest.mark.anyio
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from([PARALLEL_CALLS, TEXT_THEN_CALL]),
    size=st.integers(min_value=1, max_value=200),
    position=st.floats(min_value=0, max_value=1),
)
async def test_a_stage_failing_anywhere_gives_the_same_events_and_error(
    path: Path, size: int, position: float
) -> None:
    data = RECORDINGS[path]
    first_event = data.index(b"\n\n") + 2  # (framing detection reads the first line)
    cut = first_event + int(position * (len(data) - first_event))
    broken = data[:cut] + b"\xff" + data[cut:]  # invalid UTF-8: the SSE decoder raises there
    reference, result = await both(chunked(broken, size))
    assert result == reference
    assert str(reference[1]).startswith("StreamDecodeError: invalid UTF-8 at byte")


async def consume(events: Stream[PipelineEvent], received: list[PipelineEvent]) -> None:
    async with events.stream() as items:
        async for event in items:
            received.append(event)


@pytest.mark.anyio
async def test_a_call_cut_by_a_failing_source_is_folded_as_interrupted() -> None:
    data = RECORDINGS[PARALLEL_CALLS]
    cut = data.index(b'"cker')  # inside the arguments of the second call
    received: list[PipelineEvent] = []
    with pytest.raises(SourceFailed):
        await consume(fused(pieces([data[:cut], data[cut:]], fail_after=1)), received)
    folded = [event for event in received if isinstance(event, ToolInvocation)]
    assert [(call.name, call.error.kind if call.error else None) for call in folded] == [
        ("GetWeatherArgs", None),
        ("get_stock_price", "interrupted"),
    ]
    assert folded[1].error is not None
    assert folded[1].error.raw == '{"ti'
    assert "SourceFailed: the source failed before piece 1" in folded[1].error.message


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1, 4, 17])
async def test_a_delimiter_format_gives_the_same_events(size: int) -> None:
    text = RAW_HERMES.read_text()
    deltas = [text[start : start + size] for start in range(0, len(text), size)]
    reference, result = await both(deltas, provider="text", tool_format="hermes")
    assert result == reference
    assert sum(event["type"] == "TOOL_INVOCATION" for event in result[0]) == 2


def test_an_unknown_delimiter_format_is_refused_when_the_pipeline_is_made() -> None:
    for make in (piped, fused):
        with pytest.raises(ConfigurationError, match=r"unknown (tool|delimiter) format 'no_such_format'"):
            make(pieces(["text"]), provider="text", tool_format="no_such_format")  # type: ignore[arg-type]
