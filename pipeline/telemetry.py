"""OpenTelemetry for streamed responses: GenAI semantic-convention spans and metrics, and streamfold's own.

::

    telemetry = Telemetry()                                  # the global tracer and meter providers
    events = process(body, provider="openai", telemetry=telemetry.options(request_model="gpt-4o"))

An optional extra (``pip install 'streamfold[telemetry]'``; only ``opentelemetry-api`` is needed at run
time, an SDK or a distro configures the export). Without ``telemetry=`` nothing of this module runs:
`pipeline.process` builds the same loop as before.

Per response (`pipeline.process` with ``telemetry=``), a CLIENT span ``"{operation} {model}"`` with the
GenAI attributes (``gen_ai.operation.name``, ``gen_ai.provider.name`` and the deprecated ``gen_ai.system``,
``gen_ai.request.model``, ``gen_ai.request.stream``, ``gen_ai.response.id``, ``gen_ai.response.model``,
``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` and the cache and
reasoning counts where the provider gives them, ``gen_ai.response.time_to_first_chunk``), and the metrics
``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``,
``gen_ai.client.operation.time_to_first_chunk`` and ``gen_ai.client.operation.time_per_output_chunk`` (a
chunk is one provider event that carries something, as the converters count them).

streamfold's own, per tool call (a span event ``streamfold.tool_call`` and two histograms):
``streamfold.tool_call.arguments.duration``, from the call's first delta to its last argument delta, and
``streamfold.tool_call.invocation.delay``, from its first delta to its `ToolInvocation`. Per hub
subscriber (`Telemetry.watch_hub`, read from `Hub.statistics` at each metric collection):
``streamfold.hub.subscriber.lag`` (items waiting for it: buffered and replay still to read),
``streamfold.hub.subscriber.delivered`` / ``coalesced`` / ``dropped``.

Outcome: a response read to its end ends its span with status UNSET; a failure (the source's or a stage's)
with status ERROR, ``error.type`` (the exception's class) and the exception recorded; a consumer that stops
early, or a cancelled task, ends it with ``streamfold.response.outcome = "closed"`` and no error. A span
processor that raises (at the span's start or end) never fails the response: the error is logged with its
traceback as a warning on the ``streamfold`` logger, and the response goes on (without its span, if the
start failed).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pipeline._extras import needs_extra
from pipeline.errors import StreamfoldError
from pipeline.models import (
    ChunkResponse,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolInvocation,
)
from pipeline.stage import Core, chain, drive

with needs_extra("telemetry", "streamfold telemetry"):
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import SpanKind, Status, StatusCode

if TYPE_CHECKING:
    from pipeline.fanout.hub import Hub, SubscriberStatistics

__all__ = ["MAX_PENDING_CHUNK_TIMES", "PROVIDER_NAMES", "Telemetry"]

_logger = logging.getLogger("streamfold")

PROVIDER_NAMES: Final[Mapping[str, str]] = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
    "bedrock-converse": "aws.bedrock",
    "ollama": "ollama",
}
"""``process(provider=...)`` -> ``gen_ai.provider.name`` (the semantic conventions' well-known values).
``auto`` and ``text`` give ``_OTHER`` unless `Telemetry.options` names the provider."""

MAX_PENDING_CHUNK_TIMES: Final = 4096
"""Chunk intervals held before they are recorded with the response's attributes (so that
``gen_ai.response.model`` and ``error.type``, known only later, are on them); past the cap they are recorded
with the attributes known so far (the response model, no error)."""

_TOOL_SEGMENTS: Final = frozenset({SegmentType.TOOL_CALL, SegmentType.WRITE_FILE, SegmentType.PATCH_FILE})
_FIRST_CHUNK_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
_PER_CHUNK_BUCKETS: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
)  # fmt: skip
_DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip


class Telemetry:
    """Where spans and metrics go, and the per-response attributes (`options` makes a variant).

    Args:
        tracer_provider: default the global one (``opentelemetry.trace``).
        meter_provider: default the global one (``opentelemetry.metrics``).
        operation: ``gen_ai.operation.name`` (``chat``, ``text_completion``, ``generate_content``, ...).
        provider_name: ``gen_ai.provider.name``; default from ``process(provider=...)``.
        request_model: ``gen_ai.request.model`` (and the span name's second word).
        started_at: a ``clock()`` reading taken when the request was sent: time to first chunk is
            measured from it (default: from when the pipeline is first read).
        attributes: more span attributes.
        chunk_intervals: record ``gen_ai.client.operation.time_per_output_chunk``: one histogram record
            per chunk, which with the OpenTelemetry SDK is costly (``benchmarks/bench_live`` measures
            it); ``False`` leaves that one histogram out.
        clock: seconds, monotonic (default ``time.perf_counter``); tests pass a fake one.

    Raises:
        MissingExtraError: ``opentelemetry-api`` is not installed (at import of this module).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        operation: str = "chat",
        provider_name: str | None = None,
        request_model: str | None = None,
        started_at: float | None = None,
        attributes: Mapping[str, Any] | None = None,
        chunk_intervals: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.operation = operation
        self.provider_name = provider_name
        self.request_model = request_model
        self.started_at = started_at
        self.attributes: Mapping[str, Any] = dict(attributes or {})
        self.chunk_intervals = chunk_intervals
        self.clock = clock
        self._instruments = _Instruments(tracer_provider, meter_provider)

    def options(
        self,
        *,
        operation: str | None = None,
        provider_name: str | None = None,
        request_model: str | None = None,
        started_at: float | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Telemetry:
        """A variant for one request, sharing the tracer, meter and instruments (cheap: no new instrument).

        Args:
            operation: as the class takes it; None keeps this one's.
            provider_name: as the class takes it; None keeps this one's.
            request_model: as the class takes it; None keeps this one's.
            started_at: as the class takes it; None keeps this one's.
            attributes: added to this one's.
        """
        variant = object.__new__(Telemetry)
        variant.__dict__.update(self.__dict__)
        if operation is not None:
            variant.operation = operation
        if provider_name is not None:
            variant.provider_name = provider_name
        if request_model is not None:
            variant.request_model = request_model
        if started_at is not None:
            variant.started_at = started_at
        if attributes is not None:
            variant.attributes = {**self.attributes, **attributes}
        return variant

    def watch_hub(self, hub: Hub[Any], name: str = "hub") -> None:
        """Report ``hub``'s subscribers (lag, delivered, coalesced, dropped) at each metric collection.

        Until the hub is garbage or `unwatch_hub`. Reading the statistics costs the hub nothing between
        collections. Make one `Telemetry` per meter provider (and `options` per request): each one
        registers its own observable instruments.

        Args:
            hub: the hub to watch.
            name: the ``hub`` attribute of its metrics.
        """
        self._instruments.hubs[hub] = name

    def unwatch_hub(self, hub: Hub[Any]) -> None:
        """Stop reporting ``hub``'s subscribers."""
        self._instruments.hubs.pop(hub, None)

    def instrument(
        self, source: AsyncIterable[Any], stages: Sequence[Core[Any, Any]], *, provider: str
    ) -> AsyncGenerator[Any, None]:
        """``drive(source, chain(*stages))`` in a span: what `pipeline.process` runs with ``telemetry=``.

        The first stage (the adapter: chunks) is timed, and a probe after the last reads the events.

        Args:
            source: the source items.
            stages: the cores, the adapter first.
            provider: ``process(provider=...)``: it gives ``gen_ai.provider.name`` (`PROVIDER_NAMES`)
                unless the telemetry names one.
        """
        response = _Response(self, provider)
        probed = [_TimedAdapter(stages[0], response), *stages[1:], _EventProbe(response)]
        return _run(response, drive(source, chain(*probed)))


class _Instruments:
    """The tracer, meter and instruments of a `Telemetry` (made once, shared by its variants)."""

    def __init__(
        self, tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None
    ) -> None:
        self.tracer = trace.get_tracer("streamfold", tracer_provider=tracer_provider)
        meter = metrics.get_meter("streamfold", meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time from the request to the first chunk of the response stream.",
            explicit_bucket_boundaries_advisory=_FIRST_CHUNK_BUCKETS,
        )
        self.per_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_per_output_chunk",
            unit="s",
            description="Time from the previous chunk to this one, for each chunk after the first.",
            explicit_bucket_boundaries_advisory=_PER_CHUNK_BUCKETS,
        )
        self.arguments = meter.create_histogram(
            "streamfold.tool_call.arguments.duration",
            unit="s",
            description="Time from a tool call's first delta to its last argument delta.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.invocation = meter.create_histogram(
            "streamfold.tool_call.invocation.delay",
            unit="s",
            description="Time from a tool call's first delta to its folded invocation.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self.hubs: weakref.WeakKeyDictionary[Hub[Any], str] = weakref.WeakKeyDictionary()
        meter.create_observable_gauge(
            "streamfold.hub.subscriber.lag",
            callbacks=[self._observe("lag")],
            unit="{item}",
            description="Items waiting for a hub subscriber: in its buffer and of the replay still to read.",
        )
        for field in ("delivered", "coalesced", "dropped"):
            meter.create_observable_counter(
                f"streamfold.hub.subscriber.{field}",
                callbacks=[self._observe(field)],
                unit="{item}",
                description=f"Items a hub subscriber has had {field}.",
            )

    def _observe(self, field: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            observations = []
            for hub, hub_name in list(self.hubs.items()):
                for stats in _subscribers(hub):
                    value = stats.buffered + stats.replay_pending if field == "lag" else getattr(stats, field)
                    attributes = {
                        "streamfold.hub.name": hub_name,
                        "streamfold.subscriber.name": stats.name,
                        "streamfold.subscriber.policy": stats.policy,
                    }
                    observations.append(Observation(value, attributes))
            return observations

        return callback


def _subscribers(hub: Hub[Any]) -> tuple[SubscriberStatistics, ...]:
    """The hub's subscribers' statistics. A periodic metric reader calls from its own thread while the
    event loop may be adding a subscriber: a read that races with it is tried again, then left out of
    this collection (the counters are cumulative, the next collection has them)."""
    for _ in range(3):
        try:
            return hub.statistics().subscribers
        except RuntimeError:  # the subscriber dict changed size while it was read
            continue
    return ()


_OPTIONAL_USAGE = (
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_creation_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
"""The usage fields a provider may leave out, with their span attributes."""


def _usage_attributes(usage: TokenUsage) -> dict[str, Any]:
    """The span attributes of a response's token usage."""
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
    }
    for field, attribute in _OPTIONAL_USAGE:
        value = getattr(usage, field)
        if value is not None:
            attributes[attribute] = value
    return attributes


class _Response:
    """What one response's probes learn, and its span."""

    __slots__ = (
        "_span_args",
        "attributes",
        "calls",
        "chunk_intervals",
        "clock",
        "finish_reason",
        "first_chunk",
        "instruments",
        "intervals",
        "last_chunk",
        "metadata",
        "span",
        "started",
        "usage",
    )

    def __init__(self, telemetry: Telemetry, provider: str) -> None:
        self.instruments = telemetry._instruments
        self.clock = telemetry.clock
        self.chunk_intervals = telemetry.chunk_intervals
        provider_name = telemetry.provider_name or PROVIDER_NAMES.get(provider, "_OTHER")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": telemetry.operation,
            "gen_ai.provider.name": provider_name,
        }
        if telemetry.request_model is not None:
            attributes["gen_ai.request.model"] = telemetry.request_model
        self.attributes = attributes
        """The metrics' attributes (the span's too, with more)."""
        span_attributes = {
            **telemetry.attributes,
            **attributes,
            "gen_ai.system": provider_name,
            "gen_ai.request.stream": True,
        }
        name = telemetry.operation
        if telemetry.request_model:
            name = f"{name} {telemetry.request_model}"
        self.started = telemetry.started_at
        self.span: trace.Span = trace.INVALID_SPAN
        self._span_args = (name, span_attributes)
        self.first_chunk: float | None = None
        self.last_chunk = 0.0
        self.intervals: list[float] = []
        self.metadata: dict[str, Any] = {}
        self.usage: Any = None
        self.finish_reason: str | None = None
        self.calls: dict[str, list[Any]] = {}
        """Open tool calls: segment id -> [tool name, first delta time, last argument delta time]."""

    def begin(self) -> None:
        now = self.clock()
        start_time = None
        if self.started is None:
            self.started = now
        else:
            start_time = time.time_ns() - int((now - self.started) * 1e9)
        name, attributes = self._span_args
        try:
            self.span = self.instruments.tracer.start_span(
                name, kind=SpanKind.CLIENT, attributes=attributes, start_time=start_time
            )
        except Exception:  # a span processor's on_start: the response goes on without the span
            _span_failed("starting", name)

    def chunks(self, chunks: list[ChunkResponse], *, timed: bool) -> None:
        if not chunks:
            return
        if timed:
            self._time_chunks(len(chunks))
        for chunk in chunks:
            if chunk.metadata:
                self.metadata.update(chunk.metadata)
            if chunk.usage is not None:
                self.usage = chunk.usage
            if chunk.finish_reason is not None:
                self.finish_reason = chunk.finish_reason

    def _time_chunks(self, count: int) -> None:
        """Note the time of ``count`` chunks made from one item (received at the same time)."""
        now = self.clock()
        intervals = self.intervals
        if self.first_chunk is None:
            self.first_chunk = now
        elif self.chunk_intervals:
            intervals.append(now - self.last_chunk)
        self.last_chunk = now
        if not self.chunk_intervals:
            return
        intervals.extend([0.0] * (count - 1))
        if len(intervals) >= MAX_PENDING_CHUNK_TIMES:
            self._record_intervals(self._metric_attributes(None))

    def _metric_attributes(self, error: BaseException | None) -> dict[str, Any]:
        attributes = dict(self.attributes)
        model = self.metadata.get("model")
        if isinstance(model, str):
            attributes["gen_ai.response.model"] = model
        if error is not None:
            attributes["error.type"] = type(error).__qualname__
        return attributes

    def _record_intervals(self, attributes: Mapping[str, Any]) -> None:
        record = self.instruments.per_chunk.record
        for interval in self.intervals:
            record(interval, attributes)
        self.intervals = []

    def event(self, event: Any) -> None:
        if type(event) is SegmentEvent:
            kind = event.event_type
            if kind is SegmentEventType.START:
                if event.segment_type in _TOOL_SEGMENTS:
                    self.calls[event.segment_id] = [event.tool_name, self.last_chunk, None]
            elif kind is not SegmentEventType.END:
                call = self.calls.get(event.segment_id)
                if call is not None:
                    call[2] = self.last_chunk
        elif type(event) is ToolInvocation:
            call = self.calls.pop(event.id, None)
            if call is not None:
                self._tool_call(event, call)

    def _tool_call(self, invocation: ToolInvocation, call: list[Any]) -> None:
        _, first, last_argument = call
        arguments = (last_argument if last_argument is not None else first) - first
        delay = self.last_chunk - first
        attributes = {**self.attributes, "gen_ai.tool.name": invocation.name}
        self.instruments.arguments.record(arguments, attributes)
        self.instruments.invocation.record(delay, attributes)
        event_attributes: dict[str, Any] = {
            "gen_ai.tool.name": invocation.name,
            "gen_ai.tool.call.id": invocation.id,
            "streamfold.tool_call.arguments.duration": arguments,
            "streamfold.tool_call.invocation.delay": delay,
        }
        if invocation.error is not None:
            event_attributes["error.type"] = invocation.error.kind
        self.span.add_event("streamfold.tool_call", event_attributes)

    def end(self, outcome: str, error: BaseException | None) -> None:
        now = self.clock()
        span = self.span
        attributes = self._metric_attributes(error)
        metadata = self.metadata
        response: dict[str, Any] = {"streamfold.response.outcome": outcome}
        if isinstance(metadata.get("id"), str):
            response["gen_ai.response.id"] = metadata["id"]
        if self.finish_reason is not None:
            response["gen_ai.response.finish_reasons"] = (self.finish_reason,)
        instruments = self.instruments
        usage = self.usage
        if usage is not None:
            response.update(_usage_attributes(usage))
            instruments.tokens.record(usage.prompt_tokens, {**attributes, "gen_ai.token.type": "input"})
            instruments.tokens.record(usage.completion_tokens, {**attributes, "gen_ai.token.type": "output"})
        started = now if self.started is None else self.started
        if self.first_chunk is not None:
            first_chunk = self.first_chunk - started
            response["gen_ai.response.time_to_first_chunk"] = first_chunk
            instruments.first_chunk.record(first_chunk, attributes)
        self._record_intervals(attributes)
        instruments.duration.record(now - started, attributes)
        span.set_attributes({**attributes, **response})
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}: {error}"))
        try:
            span.end()
        except Exception:  # a span processor's on_end
            _span_failed("ending", self._span_args[0])


def _span_failed(step: str, name: str) -> None:
    """Report a span processor that raised (with its traceback): telemetry never fails a response."""
    _logger.warning(
        "%s the telemetry span %r failed (a span processor raised); the response goes on",
        step,
        name,
        exc_info=True,
    )


class _TimedAdapter:
    """The adapter, with each chunk it makes from a source item timed (one clock reading per item) and
    read for the response's metadata, usage and finish reason. Chunks made by ``finish`` or ``abort`` (the
    end of the stream, not a chunk received) are read but not timed."""

    __slots__ = ("_adapter", "_response", "abort")

    def __init__(self, adapter: Core[Any, ChunkResponse], response: _Response) -> None:
        self._adapter = adapter
        self._response = response
        abort = getattr(adapter, "abort", None)
        if abort is not None:
            self.abort = self._aborting(abort)

    def feed(self, item: Any) -> list[ChunkResponse]:
        try:
            chunks = self._adapter.feed(item)
        except StreamfoldError as exc:
            self._response.chunks(exc.partial_outputs, timed=True)
            raise
        self._response.chunks(chunks, timed=True)
        return chunks

    def finish(self) -> list[ChunkResponse]:
        try:
            chunks = self._adapter.finish()
        except StreamfoldError as exc:
            self._response.chunks(exc.partial_outputs, timed=False)
            raise
        self._response.chunks(chunks, timed=False)
        return chunks

    def _aborting(
        self, abort: Callable[[BaseException], list[ChunkResponse]]
    ) -> Callable[[BaseException], list[ChunkResponse]]:
        def aborting(exc: BaseException) -> list[ChunkResponse]:
            chunks = abort(exc)
            self._response.chunks(chunks, timed=False)
            return chunks

        return aborting


class _EventProbe:
    """After the folder: the tool calls' timings, at the time of the chunk that made each event."""

    __slots__ = ("_event",)

    def __init__(self, response: _Response) -> None:
        self._event = response.event

    def feed(self, event: Any) -> list[Any]:
        self._event(event)
        return [event]

    def finish(self) -> list[Any]:
        return []


async def _run(response: _Response, events: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """``events`` in the response's span: begun at the first read, ended however the stream ends."""
    response.begin()
    outcome, error = "closed", None
    try:
        async for event in events:
            yield event
        outcome = "completed"
    except Exception as exc:
        outcome, error = "failed", exc
        raise
    finally:
        try:
            await events.aclose()
        finally:
            response.end(outcome, error)
