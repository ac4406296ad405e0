"""Live chat traffic: one SSE event per read, short text deltas, two small tool calls.

Run: ``python -m benchmarks.bench_live`` (``--deltas 2000``, ``--repeat 5``).

This is what an agent sees from a chat model answering live: each network read carries one SSE event of a
few characters of text. The rows, all in the same run on the same bytes, in microseconds of CPU time per
event (best of ``--repeat``):

- floor: split each read into its SSE ``data:`` payload and ``msgspec``-decode it, in a bare loop; no
  library could read the stream for less;
- floor, async: the same, pulling each read from an async generator (the cost of the async source);
- streamfold ``process()``: SSE bytes in, segment events, invocations and the response end out; then
  with ``telemetry=`` (OpenTelemetry API alone: no-op; and the SDK recording into memory), where installed;
- streamfold operators piped with ``|``: the same stages as separate async operators.

Then each sync core of ``process()`` alone on the same traffic (its inputs captured once by running the
cores in a row, then fed by a plain loop that drops each output, as a next stage would: kept, the outputs
cost the allocator fresh memory, about 15% more on the first core), so that a change in one core shows in
its own row; and the fused SSE + converter core that ``process()`` runs in place of the first two (live
events decoded straight into the converter's types).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import msgspec

from benchmarks.bench_stages import adapter_core, collect, run_core, stage_factories

SENTENCE = "The quick brown fox jumps over the lazy dog while the agent streams its answer live"
WORDS = SENTENCE.split()


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-live",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def live_events(deltas: int) -> list[bytes]:
    """One SSE event per read: text deltas of a word each, then two small tool calls, then [DONE]."""
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": " " + WORDS[n % len(WORDS)]}) for n in range(deltas)]
    for index, (name, arguments) in enumerate(
        [("get_weather", '{"city": "Paris", "unit": "celsius"}'), ("get_time", '{"zone": "Europe/Paris"}')]
    ):
        first = {"index": index, "id": f"call_{index}", "type": "function", "function": {"name": name}}
        events.append(chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]}))
        for start in range(0, len(arguments), 8):
            piece = arguments[start : start + 8]
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    events.append(chunk({}, "tool_calls"))
    events.append(b"data: [DONE]\n\n")
    return events


def floor_sync(events: list[bytes]) -> float:
    decode = msgspec.json.decode
    start = time.process_time()
    for read in events:
        for line in read.split(b"\n"):
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                decode(line[6:])
    return time.process_time() - start


async def _source(events: list[bytes]) -> AsyncIterator[bytes]:
    for read in events:
        yield read


def floor_async(events: list[bytes]) -> float:
    async def run() -> float:
        decode = msgspec.json.decode
        start = time.process_time()
        async for read in _source(events):
            for line in read.split(b"\n"):
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    decode(line[6:])
        return time.process_time() - start

    return anyio.run(run)


def streamfold_process(events: list[bytes], telemetry: Any = None) -> float:
    from pipeline import process

    async def run() -> float:
        count = 0
        start = time.process_time()
        async with process(_source(events), provider="openai", telemetry=telemetry).stream() as items:
            async for _ in items:
                count += 1
        elapsed = time.process_time() - start
        assert count > len(events) // 2, count
        return elapsed

    return anyio.run(run)


def telemetry_rows() -> list[tuple[str, Callable[[list[bytes]], float]]]:
    """``process(telemetry=...)`` with the OpenTelemetry API alone (no-op spans and instruments) and with
    the SDK recording into memory, where installed (the ``telemetry`` extra; the SDK is a test dependency)."""
    try:
        from pipeline.telemetry import Telemetry
    except ImportError:
        return []
    rows: list[tuple[str, Callable[[list[bytes]], float]]] = [
        ("  telemetry=, OTel API no-op", functools.partial(streamfold_process, telemetry=Telemetry()))
    ]
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return rows
    sdk = Telemetry(
        tracer_provider=TracerProvider(),
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
    )
    rows.append(("  telemetry=, OTel SDK in memory", functools.partial(streamfold_process, telemetry=sdk)))
    return rows


def streamfold_piped(events: list[bytes]) -> float:
    from aiostream import stream

    from operators import convert_openai_chat, emit_segments, fold_invocations, split_arguments, sse_events

    async def run() -> float:
        count = 0
        start = time.process_time()
        pipeline = (
            stream.iterate(_source(events))
            | sse_events.pipe()
            | convert_openai_chat.pipe()
            | split_arguments.pipe()
            | emit_segments.pipe()
            | fold_invocations.pipe()
        )
        async with pipeline.stream() as items:
            async for _ in items:
                count += 1
        elapsed = time.process_time() - start
        assert count > len(events) // 2, count
        return elapsed

    return anyio.run(run)


def core_rows(events: list[bytes], repeat: int) -> list[tuple[str, float]]:
    """Seconds of CPU time of each core alone on its captured inputs (best of ``repeat``), then of the
    fused SSE + converter core that ``process()`` runs instead of the first two."""
    inputs: list[list[Any]] = [list(events)]
    for _, factory in stage_factories():
        inputs.append(collect(factory(), inputs[-1]))
    cores = [*stage_factories(), ("SSE framer+converter (process)", adapter_core)]
    inputs[len(cores) - 1] = inputs[0]  # (the folder's outputs are not an input of any core)
    rows = []
    for position, (name, factory) in enumerate(cores):
        times = []
        for _ in range(repeat):
            core = factory()
            gc.collect()
            start = time.process_time()
            run_core(core, inputs[position])
            times.append(time.process_time() - start)
        rows.append((f"  core: {name}", min(times)))
    return rows


def best(function: Callable[[list[bytes]], float], events: list[bytes], repeat: int) -> float:
    function(events[:50])  # warm-up: imports and first-call costs are not the steady state
    times = []
    for _ in range(repeat):
        gc.collect()
        times.append(function(events))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    events = live_events(args.deltas)
    rows = [
        ("floor: split + msgspec decode", floor_sync),
        ("floor, async source", floor_async),
        ("streamfold process()", streamfold_process),
        *telemetry_rows(),
        ("streamfold operators piped", streamfold_piped),
    ]
    print(
        f"{len(events):,} SSE events, one per read; microseconds of CPU time per event, best of {args.repeat}"
    )
    print(f"{'implementation':<34} {'us/event':>9} {'x floor':>8}")
    floor = None
    for name, function in rows:
        per_event = best(function, events, args.repeat) / len(events) * 1e6
        floor = floor or per_event
        print(f"{name:<34} {per_event:>9.2f} {per_event / floor:>8.2f}")
    assert floor is not None
    rows_ = core_rows(events, args.repeat)
    total = 0.0
    for name, seconds in rows_[:-1]:
        per_event = seconds / len(events) * 1e6
        total += per_event
        print(f"{name:<34} {per_event:>9.2f} {per_event / floor:>8.2f}")
    print(f"{'  sum of the sync cores':<34} {total:>9.2f} {total / floor:>8.2f}")
    name, seconds = rows_[-1]
    print(f"{name:<34} {seconds / len(events) * 1e6:>9.2f} {seconds / len(events) * 1e6 / floor:>8.2f}")


if __name__ == "__main__":
    main()
