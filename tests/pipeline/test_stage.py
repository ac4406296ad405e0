"""The stage API (:mod:`pipeline.stage`): ``drive`` runs a core, ``chain`` fuses cores, and a chain driven
once gives exactly what its cores give driven one after another (the piped operators), failures included:
what came before a failure is delivered, cores after it close what they have open, the same exception
propagates. ``process()`` is ``drive(source, chain(...))``, so the recorded-stream cases below pin it too."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiostream import Stream, pipable_operator, stream, streamcontext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.arguments.splitter import split_arguments
from operators.delimiters import rewrite_delimiters
from operators.invocations import fold_invocations
from operators.segments import emit_segments
from pipeline.compose import process, to_chunks
from pipeline.errors import ConfigurationError, ConverterError
from pipeline.models import PipelineEvent, SegmentEvent, ToolInvocation
from pipeline.stage import Core, chain, drive, operator_stream
from pipeline.testing import chunked, collect, counter_segment_ids, feed_all, sequential_call_ids
from tests.reference import FIXTURES

PARALLEL_CALLS = FIXTURES / "openai_chat" / "openai-python_parallel_tool_calls_gpt4o.sse"
TEXT_THEN_CALL = FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_tool_use.sse"
RAW_HERMES = FIXTURES / "raw_model_output" / "vllm-test_hermes_qwen_2_sequential_tool_calls.txt"
RECORDINGS = {path: path.read_bytes() for path in (PARALLEL_CALLS, TEXT_THEN_CALL)}


class SourceFailed(Exception):
    pass


class Bug(Exception):
    """A foreign exception: a defect, which the stage API passes through untouched."""


class Stage:
    """A test core: each item becomes ``fan`` outputs ``(name, item, k)``; the ``fail_at``-th item fed
    raises ``ConverterError`` after its first output (carried in ``partial_outputs``); with ``hold`` it
    keeps its last item back until the next one (or ``finish``); with ``closes`` it has an ``abort``; with
    ``passes`` it passes odd numbers on as they are (not counted as fed) and says so with ``passes``."""

    def __init__(
        self,
        name: str,
        *,
        fan: int = 1,
        fail_at: int | None = None,
        hold: bool = False,
        closes: bool = False,
        passes: bool = False,
    ) -> None:
        self.name, self.fan, self.fail_at, self.hold = name, fan, fail_at, hold
        self.fed = 0
        self.held: list[Any] = []
        if closes:
            self.abort = self._abort
        if passes:
            self.passes = odd

    def feed(self, item: Any) -> list[Any]:
        if hasattr(self, "passes") and odd(item):
            return [item]
        self.fed += 1
        outputs = [(self.name, item, k) for k in range(self.fan)]
        if self.fed == self.fail_at:
            error = ConverterError(f"{self.name} failed at item {self.fed}", event_number=self.fed)
            error.partial_outputs = outputs[:1]
            raise error
        if self.hold:
            outputs, self.held = self.held, outputs
        return outputs

    def finish(self) -> list[Any]:
        held, self.held = self.held, []
        return [*held, (self.name, "end")]

    def _abort(self, exc: BaseException) -> list[Any]:
        held, self.held = self.held, []
        return [*held, (self.name, "aborted", type(exc).__name__)]


def odd(item: Any) -> bool:
    return isinstance(item, int) and item % 2 == 1


async def items(values: list[Any], fail_after: int | None = None) -> AsyncIterator[Any]:
    for position, value in enumerate(values):
        if position == fail_after:
            raise SourceFailed(f"the source failed before piece {position}")
        yield value


async def run(events: AsyncIterator[Any] | Stream[Any]) -> tuple[list[Any], str | None]:
    """Everything received, and the exception that ended the stream (type and message), if any."""
    received: list[Any] = []
    try:
        async with stream.iterate(events).stream() as streamer:
            async for event in streamer:
                received.append(event)
    except Exception as exc:
        return received, f"{type(exc).__name__}: {exc}"
    return received, None


def stages(spec: list[dict[str, Any]]) -> list[Core[Any, Any]]:
    return [Stage(f"s{n}", **options) for n, options in enumerate(spec)]


STAGE = st.fixed_dictionaries(
    {},
    optional={
        "fan": st.integers(min_value=0, max_value=3),
        "fail_at": st.integers(min_value=1, max_value=12),
        "hold": st.booleans(),
        "closes": st.booleans(),
        "passes": st.booleans(),
    },
)


@pytest.mark.anyio
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.lists(STAGE, min_size=1, max_size=4),
    count=st.integers(min_value=0, max_value=6),
    fail_after=st.none() | st.integers(min_value=0, max_value=6),
)
async def test_a_chain_driven_once_gives_what_its_cores_give_piped(
    spec: list[dict[str, Any]], count: int, fail_after: int | None
) -> None:
    piped: AsyncIterator[Any] = items(list(range(count)), fail_after)
    for core in stages(spec):
        piped = drive(piped, core)
    reference = await run(piped)
    fused = await run(drive(items(list(range(count)), fail_after), chain(*stages(spec))))
    assert fused == reference


@pytest.mark.anyio
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(STAGE, min_size=1, max_size=4), count=st.integers(min_value=0, max_value=6))
async def test_a_chain_fed_by_hand_gives_what_drive_gives(spec: list[dict[str, Any]], count: int) -> None:
    """`drive` runs a chain's one-item loop itself; ``chain(...).feed`` has its own: they agree."""
    driven = await run(drive(items(list(range(count))), chain(*stages(spec))))
    outputs, error = feed_all(chain(*stages(spec)), range(count))
    assert (outputs, None if error is None else f"{type(error).__name__}: {error}") == driven


class Flattening:
    """A first core that is ``cores`` chained until its first feed succeeds, then hands them to the chain
    it leads (as the auto adapter does once it knows its framer and converter)."""

    def __init__(self, cores: list[Core[Any, Any]]) -> None:
        self.cores = cores
        self.inner = chain(*cores)
        self.fed = 0
        self.replace: Any = None

    def flatten(self, replace: Any) -> None:
        self.replace = replace

    def feed(self, item: Any) -> list[Any]:
        self.fed += 1
        outputs = self.inner.feed(item)
        if self.replace is not None:
            self.replace(self.cores)
            self.replace = None
        return outputs

    def finish(self) -> list[Any]:
        return self.inner.finish()

    def abort(self, exc: BaseException) -> list[Any]:
        abort: Any = getattr(self.inner, "abort", None)
        return [] if abort is None else abort(exc)


@pytest.mark.anyio
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=st.lists(STAGE, min_size=1, max_size=4),
    split=st.integers(min_value=1, max_value=4),
    count=st.integers(min_value=0, max_value=6),
    fail_after=st.none() | st.integers(min_value=0, max_value=6),
)
async def test_a_first_core_that_flattens_into_its_chain_gives_what_its_cores_give_piped(
    spec: list[dict[str, Any]], split: int, count: int, fail_after: int | None
) -> None:
    piped: AsyncIterator[Any] = items(list(range(count)), fail_after)
    for core in stages(spec):
        piped = drive(piped, core)
    reference = await run(piped)
    cores = stages(spec)
    first = Flattening(cores[:split])
    fused = await run(drive(items(list(range(count)), fail_after), chain(first, *cores[split:])))
    assert fused == reference


def test_after_flattening_the_chain_feeds_the_cores_themselves() -> None:
    first = Flattening([Stage("a"), Stage("b")])
    core = chain(first, Stage("c"))
    assert core.feed(1) == [("c", ("b", ("a", 1, 0), 0), 0)]
    assert core.feed(2) == [("c", ("b", ("a", 2, 0), 0), 0)]
    assert first.fed == 1
    assert core.finish() == [("c", ("b", ("a", "end"), 0), 0), ("c", ("b", "end"), 0), ("c", "end")]


def test_a_core_failing_on_a_later_item_of_a_batch_keeps_the_outputs_of_those_before() -> None:
    core = chain(Stage("a", fan=3), Stage("b", fail_at=2), Stage("c", closes=True))
    with pytest.raises(ConverterError, match="b failed at item 2") as caught:
        core.feed("x")
    assert caught.value.partial_outputs == [
        ("c", ("b", ("a", "x", 0), 0), 0),  # b's output of the first item, through c
        ("c", ("b", ("a", "x", 1), 0), 0),  # b's output before it failed on the second
        ("c", "aborted", "ConverterError"),  # then c closes what it has open
    ]


def test_a_failure_in_finish_keeps_what_finish_and_the_cores_before_gave() -> None:
    core = chain(Stage("a", hold=True), Stage("b", fail_at=2, closes=True), Stage("c", closes=True))
    assert core.feed(1) == []
    with pytest.raises(ConverterError, match="b failed at item 2") as caught:
        core.finish()
    assert caught.value.partial_outputs == [
        ("c", ("b", ("a", 1, 0), 0), 0),  # a's held item, released by its finish
        ("c", ("b", ("a", "end"), 0), 0),  # b's partial output on a's end, where it failed
        ("c", "aborted", "ConverterError"),
    ]


class Recording:
    """A core that declares the pass-through contract (odd numbers) and records every item it is fed."""

    def __init__(self) -> None:
        self.fed: list[Any] = []

    def passes(self, item: Any) -> bool:
        return odd(item)

    def feed(self, item: Any) -> list[Any]:
        self.fed.append(item)
        return [item] if odd(item) else [("r", item)]

    def finish(self) -> list[Any]:
        return []


class Spread:
    """A core without the pass-through contract whose ``feed(n)`` gives ``0 .. n-1``."""

    def feed(self, item: int) -> list[int]:
        return list(range(item))

    def finish(self) -> list[int]:
        return [5]


def test_a_core_that_declares_pass_through_is_skipped_for_exactly_those_items() -> None:
    recording = Recording()
    core = chain(Stage("a", passes=True), recording, Stage("c"))
    outputs = [core.feed(number) for number in (1, 2, 3)]
    assert outputs == [[("c", 1, 0)], [("c", ("r", ("a", 2, 0)), 0)], [("c", 3, 0)]]
    assert recording.fed == [("a", 2, 0)]
    recording = Recording()
    core = chain(Spread(), recording, Stage("c"))  # several items at once, and at the end
    assert core.feed(3) == [("c", ("r", 0), 0), ("c", 1, 0), ("c", ("r", 2), 0)]
    assert core.finish() == [("c", 5, 0), ("c", "end")]
    assert recording.fed == [0, 2]


def test_a_core_failing_after_items_it_passed_fails_at_its_own_position() -> None:
    failing = Stage("b", passes=True, fail_at=1, closes=True)
    core = chain(Stage("a", passes=True), failing, Stage("c", closes=True))
    assert core.feed(1) == [("c", 1, 0)]  # passed by a and b: b has not been fed yet
    with pytest.raises(ConverterError, match="b failed at item 1") as caught:
        core.feed(2)
    assert caught.value.partial_outputs == [
        ("c", ("b", ("a", 2, 0), 0), 0),  # b's partial output, through c
        ("c", "aborted", "ConverterError"),  # then c closes what it has open
    ]


def test_a_foreign_exception_is_a_bug_and_passes_through_untouched() -> None:
    class Broken:
        def feed(self, item: Any) -> list[Any]:
            raise Bug("a defect")

        def finish(self) -> list[Any]:
            return []

    closing = Stage("c", closes=True)
    core = chain(Stage("a"), Broken(), closing)
    with pytest.raises(Bug, match="a defect") as caught:
        core.feed(1)
    assert not hasattr(caught.value, "partial_outputs")
    assert closing.fed == 0


def test_chain_of_one_core_is_that_core_and_of_none_is_refused() -> None:
    only = Stage("a")
    assert chain(only) is only
    with pytest.raises(ConfigurationError, match="at least one core"):
        chain()


@pytest.mark.anyio
async def test_drive_yields_partial_outputs_once_then_raises() -> None:
    first = drive(items([1, 2]), Stage("a", fail_at=2))
    events, error = await run(drive(first, Stage("b", closes=True)))
    assert events == [
        ("b", ("a", 1, 0), 0),
        ("b", ("a", 2, 0), 0),  # the partial output of a's failing feed, once
        ("b", "aborted", "ConverterError"),
    ]
    assert error == "ConverterError: a failed at item 2"


async def counting(closed: list[str]) -> AsyncIterator[int]:
    """0, 1, 2 ... 99; notes in ``closed`` when it is closed."""
    try:
        for value in range(100):
            yield value
    finally:
        closed.append("source")


@pytest.mark.anyio
async def test_leaving_the_loop_closes_the_source_at_once() -> None:
    closed: list[str] = []
    events = drive(counting(closed), Stage("a"))
    assert await events.__anext__() == ("a", 0, 0)
    await events.aclose()
    assert closed == ["source"]


@pytest.mark.anyio
async def test_drive_reads_an_aiostream_stream_in_its_context() -> None:
    """An operator's output piped into another is an aiostream Stream, iterated in its context (no
    'iterated outside of its context' warning: warnings are errors here)."""
    events, error = await run(drive(stream.iterate(items([1, 2])), Stage("a")))
    assert (events, error) == ([("a", 1, 0), ("a", 2, 0), ("a", "end")], None)


@pipable_operator
def tagged(source: AsyncIterable[Any], name: str) -> AsyncIterator[Any]:
    """A test operator, as the library's operators are written."""
    return operator_stream(source, Stage(name))


@pytest.mark.anyio
async def test_an_operator_stream_iterates_the_generator_in_its_context_and_closes_its_source() -> None:
    closed: list[str] = []
    events = tagged(counting(closed), "a") | tagged.pipe("b")
    async with events.stream() as streamer:
        iterator = aiter(streamer)
        assert inspect.isasyncgen(iterator)  # drive's own generator: no wrapper's __anext__ per item
        assert [await anext(iterator) for _ in range(2)] == [("b", ("a", 0, 0), 0), ("b", ("a", 1, 0), 0)]
        assert closed == []
    assert closed == ["source"]
    assert await collect(tagged(items([1, 2]), "a") | tagged.pipe("b")) == [
        ("b", ("a", 1, 0), 0),
        ("b", ("a", 2, 0), 0),
        ("b", ("a", "end"), 0),
        ("b", "end"),
    ]


@pytest.mark.anyio
async def test_to_chunks_in_its_context_is_drives_generator() -> None:
    chunks = to_chunks([b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'])
    async with chunks.stream() as streamer:
        iterator = aiter(streamer)
        assert inspect.isasyncgen(iterator)
        assert [chunk.content async for chunk in iterator] == ["hi", ""]


@pytest.mark.anyio
async def test_an_operator_stream_outside_its_context_is_aiostreams_streamer() -> None:
    streamer = streamcontext(tagged(items([1]), "a"))
    with pytest.warns(UserWarning, match="iterated outside of its context"):
        assert [event async for event in streamer] == [("a", 1, 0), ("a", "end")]
    async with streamcontext(tagged(items([1]), "a")) as left:
        pass
    with pytest.raises(RuntimeError, match="is closed and cannot be iterated"):
        async for _ in left:
            pass


def piped(source: Any, *, provider: Any = "auto", tool_format: Any = None) -> Stream[Any]:
    """The reference: the pipeline as the operators piped one after another."""
    chunks = to_chunks(source, provider=provider, id_factory=sequential_call_ids)
    if tool_format is not None:
        chunks = chunks | rewrite_delimiters.pipe(tool_format, id_factory=sequential_call_ids)
    segments = chunks | split_arguments.pipe()
    events = segments | emit_segments.pipe(segment_ids=counter_segment_ids(), call_ids=sequential_call_ids)
    return events | fold_invocations.pipe()


def fused(source: Any, *, provider: Any = "auto", tool_format: Any = None) -> Stream[PipelineEvent]:
    return process(
        source,
        provider=provider,
        tool_format=tool_format,
        id_factory=sequential_call_ids,
        segment_ids=counter_segment_ids(),
    )


async def outcome(events: Stream[Any]) -> tuple[list[dict[str, Any]], str | None]:
    received, error = await run(events)
    return [event.to_dict() for event in received], error


async def both(values: list[Any], fail_after: int | None = None, **options: Any) -> tuple[Any, Any]:
    reference = await outcome(piped(items(values, fail_after), **options))
    return reference, await outcome(fused(items(values, fail_after), **options))


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
    end = data.find(b"data: [DONE]")  # [DONE] ends the data: nothing after it is read
    end = len(data) if end < 0 else end
    cut = first_event + int(position * (end - first_event))
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
        await consume(fused(items([data[:cut], data[cut:]], fail_after=1)), received)
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
        with pytest.raises(ConfigurationError, match="unknown tool format 'no_such_format'"):
            make(items(["text"]), provider="text", tool_format="no_such_format")


@pytest.mark.anyio
async def test_process_streams_are_aiostream_streams_and_close_their_source() -> None:
    """``.stream()`` iterates the pipeline's own generator; leaving it closes the source at once."""
    closed: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            for piece in chunked(RECORDINGS[TEXT_THEN_CALL], 50):
                yield piece
        finally:
            closed.append("body")

    events = fused(body())
    assert isinstance(events, Stream)
    async with events.stream() as streamer:
        async for event in streamer:
            assert isinstance(event, SegmentEvent)
            break
    assert closed == ["body"]
    whole = [RECORDINGS[TEXT_THEN_CALL]]
    assert await outcome(fused(items(whole))) == await outcome(piped(items(whole)))
