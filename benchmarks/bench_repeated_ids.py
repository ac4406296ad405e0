"""One call id repeated N times: the cost per call of making segment ids unique must not grow with N.

Run: ``python -m benchmarks.bench_repeated_ids`` (``--calls 1000 10000 100000``, ``--repeat 3``).

A response with N finished tool calls, one chunk each, through the argument splitter (not timed) and fed
to the segment emitter core. Timed, in
nanoseconds per call (best of ``--repeat``, CPU time of this process):

- distinct: every call has its own id (``call_0``, ``call_1``, ...), the baseline;
- repeated: every call has the id ``call_1``, so the emitter renames them ``call_1_2``, ``call_1_3``, ...
  (this was quadratic: each rename probed ``_2``, ``_3``, ... from the start; 1,596 repeats took 1.8 s).

Flat columns from 1k to 100k calls (10x and 100x) mean the renaming costs constant time per call.
"""

from __future__ import annotations

import argparse
import gc
import time

from operators.arguments.splitter import ArgumentSplitter
from operators.segments import SegmentEmitter
from pipeline.models import ChunkResponse, SplitChunk, ToolCallDelta


def chunks(calls: int, *, repeated: bool) -> list[ChunkResponse | SplitChunk]:
    """N one-call chunks, each call finished, with one id for all or an id each, through the splitter."""
    splitter = ArgumentSplitter()
    return [
        split
        for i in range(calls)
        for split in splitter.feed(
            ChunkResponse(
                tool_calls=[ToolCallDelta(i, "call_1" if repeated else f"call_{i}", "f", "{}", True)]
            )
        )
    ]


def best_of(repeat: int, stream: list[ChunkResponse | SplitChunk]) -> float:
    """The best CPU time of feeding ``stream`` to a new emitter and finishing it."""
    times: list[float] = []
    for _ in range(repeat):
        emitter = SegmentEmitter(segment_ids=lambda kind: kind.value)
        gc.collect()
        start = time.process_time()
        for chunk in stream:
            emitter.feed(chunk)
        emitter.finish()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    print(f"{'calls':>9} {'distinct ns/call':>17} {'repeated ns/call':>17}")
    for calls in options.calls:
        distinct = best_of(options.repeat, chunks(calls, repeated=False)) * 1e9 / calls
        repeated = best_of(options.repeat, chunks(calls, repeated=True)) * 1e9 / calls
        print(f"{calls:>9} {distinct:>17.0f} {repeated:>17.0f}")


if __name__ == "__main__":
    main()
