"""Each sync core of the full pipeline alone, on the input of :mod:`benchmarks.bench_pipeline`.

Run: ``python -m benchmarks.bench_stages`` (``--sizes 200000 2000000``, ``--repeat 3``).

The stages' inputs are captured once by running the cores in a row (SSE payload decoder, OpenAI chat
converter, argument splitter, segment emitter, invocation folder); then each core is timed alone, fed its
captured inputs by a plain loop, and the adapter core that ``process()`` runs in place of the first two (the
SSE framer chained with the converter). Also timed: the async ``drive``
loop around a core that does nothing, which is the cost of one stage's async generator hop per item; one
operator around that core as users iterate it (``async with ....stream()``), beside the same operator
returning ``drive``'s generator for aiostream to wrap in its own streamer (which checks its context with four
Python calls per item); a source (``from_dicts`` over the converter's input dicts) iterated the same way,
beside a plain async generator over them (the floor) and beside the same source left to aiostream's streamer;
and the whole pipeline as ``bench_pipeline`` runs it. Costs are in nanoseconds per 4-character argument delta
(the unit of the issue's targets), best of ``--repeat`` runs, in CPU time of this process (other work on the
machine inflates wall-clock time), with the garbage collector enabled as in real use.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

import aiostream
import anyio
from aiostream import Stream, pipable_operator

from benchmarks.bench_pipeline import CHUNK, arguments_text, bench_streamfold, sse_blocks
from operators.adapter.sources import from_dicts
from pipeline.stage import drive, operator_stream


def stage_factories() -> list[tuple[str, Callable[[], Any]]]:
    """The cores of ``process(source, provider="openai")`` in order, as factories of fresh instances."""
    from operators.adapter.sse import SSEPayloadDecoder
    from operators.arguments.splitter import ArgumentSplitter
    from operators.convert.openai_chat import OpenAIChatConverter
    from operators.invocations import InvocationFolder
    from operators.segments import SegmentEmitter

    return [
        ("SSE framing + JSON decode", SSEPayloadDecoder),
        ("OpenAI chat converter", OpenAIChatConverter),
        ("argument splitter", ArgumentSplitter),
        ("segment emitter", SegmentEmitter),
        ("invocation folder", InvocationFolder),
    ]


def adapter_core() -> Any:
    """What ``process(source, provider="openai")`` runs in place of the first two cores: the SSE framer
    chained with the converter."""
    from operators.auto import auto_adapter

    return auto_adapter(provider="openai", framing="sse")


def collect(core: Any, items: Iterable[Any]) -> list[Any]:
    outputs: list[Any] = []
    feed = core.feed
    for item in items:
        outputs.extend(feed(item))
    outputs.extend(core.finish())
    return outputs


def run_core(core: Any, items: Iterable[Any]) -> int:
    """Feed every item and finish; the outputs are counted and dropped, as a next stage would."""
    count = 0
    feed = core.feed
    for item in items:
        count += len(feed(item))
    return count + len(core.finish())


def capture(blocks: list[bytes]) -> list[list[Any]]:
    """The inputs of every stage, and the final outputs last. They are frozen out of the garbage
    collector's sight, so that timing one stage does not pay for traversing all stages' captured items."""
    inputs: list[list[Any]] = [list(blocks)]
    for _, factory in stage_factories():
        inputs.append(collect(factory(), inputs[-1]))
    gc.collect()
    gc.freeze()
    return inputs


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times: list[float] = []
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


class _Passthrough:
    def feed(self, item: object) -> list[object]:
        return [item]

    def finish(self) -> list[object]:
        return []


async def _each(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def drive_hop(items: list[Any]) -> None:
    """One ``drive`` stage around a core that passes every item through: the async cost of a stage."""

    async def run() -> None:
        async for _ in drive(_each(items), _Passthrough()):
            pass

    anyio.run(run)


@pipable_operator
def _passthrough_operator(source: AsyncIterable[Any]) -> AsyncIterator[Any]:
    """A streamfold operator around a core that passes every item through."""
    return operator_stream(source, _Passthrough())


@pipable_operator
def _generator_operator(source: AsyncIterable[Any]) -> AsyncIterator[Any]:
    """The same operator returning ``drive``'s plain generator, which aiostream wraps in its own streamer."""
    return drive(source, _Passthrough())


async def _copies(items: list[Any]) -> AsyncIterator[dict[str, Any]]:
    """What ``from_dicts`` yields, as a plain async generator."""
    for item in items:
        yield dict(item)


_dicts_in_aiostreams_streamer = aiostream.operator(_copies)
"""``from_dicts`` as an async generator operator, which aiostream wraps in its own streamer."""


def generator_loop(items: list[Any]) -> None:
    """A plain async generator over ``items``, iterated: the floor of a source."""

    async def run() -> None:
        async for _ in _copies(items):
            pass

    anyio.run(run)


def stream_loop(make: Callable[[], Stream[Any]]) -> None:
    """An aiostream stream iterated as users do (``async with ....stream()``, then ``async for``)."""

    async def run() -> None:
        async with make().stream() as streamer:
            async for _ in streamer:
                pass

    anyio.run(run)


def report(size: int, repeat: int) -> None:
    text = arguments_text(size)
    delta_count = len(text) // CHUNK
    inputs = capture(list(sse_blocks(text)))

    def row(label: str, seconds: float, items_in: int | None = None, items_out: int | None = None) -> None:
        counts = "".join(f"{'':>12}" if count is None else f"{count:>12,}" for count in (items_in, items_out))
        print(f"{label:<28}{counts}{seconds / delta_count * 1e9:>10.0f}")

    print(f"arguments: {len(text):,} characters, {delta_count:,} deltas of {CHUNK} characters")
    print(f"{'stage':<28}{'items in':>12}{'items out':>12}{'ns/delta':>10}")
    seconds_of: list[float] = []
    for position, (name, factory) in enumerate(stage_factories()):
        stage_inputs = inputs[position]

        def run(factory: Callable[[], Any] = factory, stage_inputs: list[Any] = stage_inputs) -> None:
            run_core(factory(), stage_inputs)

        seconds_of.append(best_of(repeat, run))
        row(name, seconds_of[-1], len(stage_inputs), len(inputs[position + 1]))
    total = sum(seconds_of)
    row("sum of the sync cores", total)
    adapter = best_of(repeat, lambda: run_core(adapter_core(), inputs[0]))
    row("SSE framer + converter (process)", adapter, len(inputs[0]), len(inputs[2]))
    row("sum, as process() runs them", total - seconds_of[0] - seconds_of[1] + adapter)
    chunks = inputs[2]  # about one item per delta, as between most stages
    dicts = inputs[1]
    hops: list[tuple[str, list[Any], Callable[[], None]]] = [
        ("one drive() hop", chunks, lambda: drive_hop(chunks)),
        (
            "one operator (streamfold)",
            chunks,
            lambda: stream_loop(lambda: _passthrough_operator(_each(chunks))),
        ),
        (
            "same, aiostream's streamer",
            chunks,
            lambda: stream_loop(lambda: _generator_operator(_each(chunks))),
        ),
        ("plain async generator", dicts, lambda: generator_loop(dicts)),
        ("source (from_dicts)", dicts, lambda: stream_loop(lambda: from_dicts(dicts))),
        (
            "same, aiostream's streamer",
            dicts,
            lambda: stream_loop(lambda: _dicts_in_aiostreams_streamer(dicts)),
        ),
    ]
    for label, items, runner in hops:
        row(label, best_of(repeat, runner), len(items))
    gc.unfreeze()
    row("whole pipeline (wall clock)", min(bench_streamfold(text)[0] for _ in range(repeat)))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    for size in options.sizes:
        report(size, options.repeat)


if __name__ == "__main__":
    main()
