"""OpenTelemetry GenAI spans and metrics of :func:`pipeline.process` (``telemetry=``) and of hubs, checked
with the SDK's in-memory exporter and reader, on a fake clock (no wall-clock assertion)."""

from __future__ import annotations

import importlib
import itertools
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from pipeline import process
from pipeline.compose import chunk_core
from pipeline.errors import MissingExtraError, ProviderError
from pipeline.fanout.hub import fan_out
from pipeline.models import PipelineEvent, SegmentEvent, SegmentEventType, ToolInvocation
from pipeline.telemetry import MAX_PENDING_CHUNK_TIMES, Telemetry
from tests.conftest import FIXTURES

ANTHROPIC = FIXTURES / "anthropic" / "anthropic-sdk-python_claude-sonnet-4_text_then_tool_use.sse"


class FakeClock:
    """Each reading is one second after the previous one, from 0."""

    def __init__(self) -> None:
        self.now = -1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.clock = FakeClock()

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            clock=self.clock,
            **options,
        )

    def span(self) -> ReadableSpan:
        (span,) = self.spans.get_finished_spans()
        return span

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        return list(metric.data.data_points)
        return []

    def histogram(self, name: str) -> HistogramDataPoint:
        (point,) = self.points(name)
        assert isinstance(point, HistogramDataPoint)
        return point


@pytest.fixture
def otel() -> Iterator[Otel]:
    otel = Otel()
    yield otel
    otel.tracer_provider.shutdown()
    otel.meter_provider.shutdown()


def chat(delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return {"id": "chatcmpl-1", "model": "gpt-4o-2024-08-06", "choices": choices, **extra}


def call_delta(arguments: str, **first: Any) -> dict[str, Any]:
    return {
        "tool_calls": [
            {"index": 0, **first, "function": {**first.pop("function", {}), "arguments": arguments}}
        ]
    }


CHAT_WITH_CALL = [
    chat({"role": "assistant", "content": "Hi"}),  # clock 1
    chat(call_delta("", id="call_a", type="function", function={"name": "get_weather"})),  # 2: first delta
    chat(call_delta('{"city": ')),  # 3
    chat(call_delta('"Paris"}')),  # 4: last argument delta, the call is folded (its JSON is complete)
    chat({}, "tool_calls"),  # 5
    chat(None, usage={"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}),  # 6
]


def numbered() -> Callable[[Any], str]:
    counter = itertools.count()
    return lambda _: f"segment-{next(counter)}"


async def collect(stream: Any) -> list[PipelineEvent]:
    async with stream.stream() as events:
        return [event async for event in events]


@pytest.mark.anyio
async def test_span_has_the_genai_attributes_and_the_events_are_unchanged(otel: Otel) -> None:
    telemetry = otel.telemetry(request_model="gpt-4o", attributes={"app": "demo"})
    measured = await collect(
        process(CHAT_WITH_CALL, provider="openai", segment_ids=numbered(), telemetry=telemetry)
    )

    assert measured == await collect(process(CHAT_WITH_CALL, provider="openai", segment_ids=numbered()))
    span = otel.span()
    assert span.name == "chat gpt-4o"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "app": "demo",
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.stream": True,
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 9,
        "gen_ai.response.time_to_first_chunk": 1.0,
        "streamfold.response.outcome": "completed",
    }


@pytest.mark.anyio
async def test_chunk_timing_histograms(otel: Otel) -> None:
    await collect(
        process(CHAT_WITH_CALL, provider="openai", telemetry=otel.telemetry(request_model="gpt-4o"))
    )

    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
    }
    first = otel.histogram("gen_ai.client.operation.time_to_first_chunk")
    assert (dict(first.attributes or {}), first.count, first.sum) == (attributes, 1, 1.0)
    per_chunk = otel.histogram("gen_ai.client.operation.time_per_output_chunk")
    assert (dict(per_chunk.attributes or {}), per_chunk.count, per_chunk.sum) == (attributes, 5, 5.0)
    duration = otel.histogram("gen_ai.client.operation.duration")
    assert (duration.count, duration.sum) == (1, 7.0)
    tokens = {
        dict(point.attributes)["gen_ai.token.type"]: point.sum
        for point in otel.points("gen_ai.client.token.usage")
    }
    assert tokens == {"input": 20, "output": 9}


@pytest.mark.anyio
async def test_chunk_intervals_can_be_left_out(otel: Otel) -> None:
    telemetry = otel.telemetry(chunk_intervals=False)
    await collect(process(CHAT_WITH_CALL, provider="openai", telemetry=telemetry))

    assert otel.points("gen_ai.client.operation.time_per_output_chunk") == []
    assert otel.histogram("gen_ai.client.operation.time_to_first_chunk").sum == 1.0


@pytest.mark.anyio
async def test_many_chunks_are_recorded_past_the_pending_cap(otel: Otel) -> None:
    chunks = [chat({"content": "x"}) for _ in range(MAX_PENDING_CHUNK_TIMES + 10)]
    await collect(process(chunks, provider="openai", telemetry=otel.telemetry()))

    per_chunk = otel.histogram("gen_ai.client.operation.time_per_output_chunk")
    assert (per_chunk.count, per_chunk.sum) == (MAX_PENDING_CHUNK_TIMES + 9, MAX_PENDING_CHUNK_TIMES + 9)


@pytest.mark.anyio
async def test_tool_call_argument_time_and_invocation_delay(otel: Otel) -> None:
    await collect(process(CHAT_WITH_CALL, provider="openai", telemetry=otel.telemetry()))

    arguments = otel.histogram("streamfold.tool_call.arguments.duration")
    assert (dict(arguments.attributes or {})["gen_ai.tool.name"], arguments.count, arguments.sum) == (
        "get_weather",
        1,
        2.0,  # first delta at 2, last argument delta at 4
    )
    delay = otel.histogram("streamfold.tool_call.invocation.delay")
    assert (delay.count, delay.sum) == (1, 2.0)
    (event,) = otel.span().events
    assert event.name == "streamfold.tool_call"
    assert dict(event.attributes or {}) == {
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_a",
        "streamfold.tool_call.arguments.duration": 2.0,
        "streamfold.tool_call.invocation.delay": 2.0,
    }


@pytest.mark.anyio
async def test_recorded_anthropic_stream(otel: Otel) -> None:
    reads = [event + b"\n\n" for event in ANTHROPIC.read_bytes().split(b"\n\n") if event.strip()]
    adapter = chunk_core(provider="anthropic")
    received = [len(adapter.feed(read)) for read in reads]  # chunks made per read, as they arrive
    events = await collect(process(reads, provider="anthropic", telemetry=otel.telemetry()))

    assert [type(event).__name__ for event in events].count("ToolInvocation") == 1
    attributes = dict(otel.span().attributes or {})
    assert {key: attributes[key] for key in attributes if key.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.stream": True,
        "gen_ai.response.model": "claude-sonnet-4-20250514",
        "gen_ai.response.id": "msg_019Q1hrJbZG26Fb9BQhrkHEr",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 377,
        "gen_ai.usage.output_tokens": 65,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "gen_ai.response.time_to_first_chunk": 1.0,
    }
    per_chunk = otel.histogram("gen_ai.client.operation.time_per_output_chunk")
    reads_with_chunks = sum(1 for count in received if count)
    # one clock reading per read: each read after the first with chunks is one second later
    assert (per_chunk.count, per_chunk.sum) == (sum(received) - 1, reads_with_chunks - 1)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(ANTHROPIC.read_bytes()) - 1), max_size=30))
def test_rechunked_bytes_give_the_same_span_and_chunk_count(cuts: list[int]) -> None:
    body = ANTHROPIC.read_bytes()
    bounds = [0, *sorted(set(cuts)), len(body)]
    reads = [body[start:end] for start, end in itertools.pairwise(bounds)]
    otel = Otel()

    async def run() -> None:
        await collect(process(reads, provider="anthropic", telemetry=otel.telemetry()))

    try:
        anyio.run(run)
    finally:
        otel.tracer_provider.shutdown()
        otel.meter_provider.shutdown()
    attributes = dict(otel.span().attributes or {})
    del attributes["gen_ai.response.time_to_first_chunk"]
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.stream": True,
        "gen_ai.response.model": "claude-sonnet-4-20250514",
        "gen_ai.response.id": "msg_019Q1hrJbZG26Fb9BQhrkHEr",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 377,
        "gen_ai.usage.output_tokens": 65,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "streamfold.response.outcome": "completed",
    }
    adapter = chunk_core(provider="anthropic")
    received = len(adapter.feed(body))  # chunks made while reading, not at the end
    assert otel.histogram("gen_ai.client.operation.time_per_output_chunk").count == received - 1
    assert [event.name for event in otel.span().events] == ["streamfold.tool_call"]


@pytest.mark.anyio
async def test_failure_delivers_events_then_marks_the_span(otel: Otel) -> None:
    async def failing() -> AsyncIterator[dict[str, Any]]:
        for item in CHAT_WITH_CALL[:3]:
            yield item
        yield {"error": {"message": "overloaded", "type": "server_error"}}

    received: list[PipelineEvent] = []

    async def consume() -> None:
        async with process(failing(), provider="openai", telemetry=otel.telemetry()).stream() as events:
            async for event in events:
                received.append(event)

    with pytest.raises(ProviderError, match="overloaded"):
        await consume()

    assert isinstance(received[-1], ToolInvocation)
    assert received[-1].error is not None
    assert received[-1].error.kind == "interrupted"
    span = otel.span()
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert (attributes["error.type"], attributes["streamfold.response.outcome"]) == (
        "ProviderError",
        "failed",
    )
    assert [event.name for event in span.events] == ["streamfold.tool_call", "exception"]
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert dict(duration.attributes)["error.type"] == "ProviderError"


@pytest.mark.anyio
async def test_consumer_stopping_early_ends_the_span_as_closed(otel: Otel) -> None:
    closed = anyio.Event()

    async def source() -> AsyncIterator[dict[str, Any]]:
        try:
            for item in CHAT_WITH_CALL:
                yield item
        finally:
            closed.set()

    async with process(source(), provider="openai", telemetry=otel.telemetry()).stream() as events:
        async for event in events:
            assert isinstance(event, SegmentEvent)
            assert event.event_type is SegmentEventType.START
            break

    assert closed.is_set()
    span = otel.span()
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes or {})["streamfold.response.outcome"] == "closed"


@pytest.mark.anyio
async def test_started_at_measures_from_the_request(otel: Otel) -> None:
    started = otel.clock()  # 0; the pipeline's first read is at 1, its first chunk at 2
    telemetry = otel.telemetry().options(started_at=started, request_model="gpt-4o")
    await collect(process(CHAT_WITH_CALL, provider="openai", telemetry=telemetry))

    assert otel.histogram("gen_ai.client.operation.time_to_first_chunk").sum == 2.0
    assert otel.span().name == "chat gpt-4o"


@pytest.mark.anyio
async def test_provider_name_for_auto_and_override(otel: Otel) -> None:
    await collect(process(CHAT_WITH_CALL, telemetry=otel.telemetry()))
    await collect(process(CHAT_WITH_CALL, telemetry=otel.telemetry(provider_name="deepseek")))

    names = [dict(span.attributes or {})["gen_ai.provider.name"] for span in otel.spans.get_finished_spans()]
    assert names == ["_OTHER", "deepseek"]


@pytest.mark.anyio
async def test_hub_subscriber_lag_coalesced_and_dropped(otel: Otel) -> None:
    telemetry = otel.telemetry()
    items = [SegmentEvent.content("text-0", piece) for piece in "abcdef"]

    async def source() -> AsyncIterator[SegmentEvent]:
        for item in items:
            yield item

    async with fan_out(source()) as hub:
        telemetry.watch_hub(hub, name="ui")
        coalescing = hub.subscribe(policy="coalesce", max_buffer=1, name="browser")
        dropping = hub.subscribe(policy="drop", max_buffer=2, name="progress")
        await hub.wait_finished()

        def by_subscriber(name: str) -> dict[str, int]:
            points = otel.points(f"streamfold.hub.subscriber.{name}")
            assert all(isinstance(point, NumberDataPoint) for point in points)
            assert {dict(point.attributes)["streamfold.hub.name"] for point in points} == {"ui"}
            return {dict(point.attributes)["streamfold.subscriber.name"]: point.value for point in points}

        assert by_subscriber("lag") == {"browser": 1, "progress": 2}
        assert by_subscriber("coalesced") == {"browser": 5, "progress": 0}
        assert by_subscriber("dropped") == {"browser": 0, "progress": 4}
        assert [event.delta async for event in coalescing] == ["abcdef"]
        assert [event.delta async for event in dropping] == ["e", "f"]
        assert by_subscriber("delivered") == {"browser": 1, "progress": 2}
        assert by_subscriber("lag") == {"browser": 0, "progress": 0}
        telemetry.unwatch_hub(hub)
        assert otel.points("streamfold.hub.subscriber.lag") == []


def test_missing_extra_raises_missing_extra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "pipeline.telemetry")
    with pytest.raises(MissingExtraError, match=r"pip install 'streamfold\[telemetry\]'"):
        importlib.import_module("pipeline.telemetry")


@pytest.mark.anyio
async def test_hub_statistics_read_racing_the_loop_is_tried_again(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    telemetry = otel.telemetry()

    async def source() -> AsyncIterator[SegmentEvent]:
        yield SegmentEvent.content("text-0", "a")

    async with fan_out(source()) as hub:
        hub.subscribe(name="agent")
        telemetry.watch_hub(hub, name="ui")
        real = hub.statistics
        failures = iter([RuntimeError("dictionary changed size during iteration")])

        def racing() -> Any:
            for failure in failures:
                raise failure
            return real()

        monkeypatch.setattr(hub, "statistics", racing)
        points = otel.points("streamfold.hub.subscriber.lag")
        assert [dict(point.attributes)["streamfold.subscriber.name"] for point in points] == ["agent"]


class RaisingProcessor(SpanProcessor):
    """A span processor with a bug in ``on_start`` or ``on_end``."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.where == "on_start":
            raise RuntimeError("processor bug at start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "on_end":
            raise RuntimeError("processor bug at end")


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["on_start", "on_end"])
async def test_a_raising_span_processor_is_logged_and_the_response_goes_on(
    otel: Otel, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    otel.tracer_provider.add_span_processor(RaisingProcessor(where))
    telemetry = otel.telemetry(request_model="gpt-4o")
    with caplog.at_level(logging.WARNING, logger="streamfold"):
        measured = await collect(
            process(CHAT_WITH_CALL, provider="openai", segment_ids=numbered(), telemetry=telemetry)
        )

    assert measured == await collect(process(CHAT_WITH_CALL, provider="openai", segment_ids=numbered()))
    step = "starting" if where == "on_start" else "ending"
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "streamfold",
            "WARNING",
            f"{step} the telemetry span 'chat gpt-4o' failed (a span processor raised); the response goes on",
        )
    ]
    (record,) = caplog.records
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == f"processor bug at {where[3:]}"
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert "error.type" not in dict(duration.attributes)
    exported = otel.spans.get_finished_spans()
    assert [span.name for span in exported] == ([] if where == "on_start" else ["chat gpt-4o"])
