"""Closing many open tool calls at once: the cost per call must not grow with the number of calls.

Run: ``python -m benchmarks.bench_close_calls`` (``--calls 10000 100000``, ``--repeat 3``).

An OpenAI Chat stream announces N calls, one chunk each (``{"index": i, "id": ..., "name": "f",
"arguments": "{}"}``), then one chunk with ``finish_reason: tool_calls`` that finishes all N at once. Timed,
in nanoseconds per call (best of ``--repeat``, CPU time of this process):

- floor: a plain loop that builds the one ``ToolCallDelta(i, finished=True)`` per call the closing chunk
  must hold, the least any converter can do;
- close: the converter core's ``feed`` of the closing chunk alone (it was quadratic: one scan of the
  chunk's deltas per open call);
- stream: the converter over the whole stream (announcing and closing);
- pipeline: the chunks through the splitter, segment emitter and invocation folder cores, as
  ``process()`` runs them after the converter.

Flat columns from 10k to 100k calls mean linear time.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

from operators.arguments.splitter import ArgumentSplitter
from operators.convert.openai_chat import OpenAIChatConverter
from operators.invocations import InvocationFolder
from operators.segments import SegmentEmitter
from pipeline.models import ChunkResponse, ToolCallDelta


def events(calls: int) -> list[dict[str, Any]]:
    """N announcing chunks, then the finish chunk."""
    stream = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": i, "id": f"call_{i}", "function": {"name": "f", "arguments": "{}"}}
                        ]
                    },
                }
            ]
        }
        for i in range(calls)
    ]
    stream.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return stream


def best_of(repeat: int, setup: Callable[[], Any], run: Callable[[Any], object]) -> float:
    """The best CPU time of ``run(setup())`` (setup not timed)."""
    times: list[float] = []
    for _ in range(repeat):
        state = setup()
        gc.collect()
        start = time.process_time()
        run(state)
        times.append(time.process_time() - start)
    return min(times)


def measure(calls: int, repeat: int) -> dict[str, float]:
    stream = events(calls)
    head, closing = stream[:-1], stream[-1]

    def floor(_: object) -> None:
        [ToolCallDelta(i, finished=True) for i in range(calls)]

    def announced() -> OpenAIChatConverter:
        converter = OpenAIChatConverter()
        for event in head:
            converter.feed(event)
        return converter

    def whole(_: object) -> None:
        converter = OpenAIChatConverter()
        for event in stream:
            converter.feed(event)
        converter.finish()

    chunks: list[ChunkResponse] = []
    converter = OpenAIChatConverter()
    for event in stream:
        chunks.extend(converter.feed(event))
    chunks.extend(converter.finish())

    def pipeline(_: object) -> None:
        splitter, emitter, folder = ArgumentSplitter(), SegmentEmitter(), InvocationFolder()
        for chunk in chunks:
            for split in splitter.feed(chunk):
                for event in emitter.feed(split):
                    folder.feed(event)
        for split in splitter.finish():
            for event in emitter.feed(split):
                folder.feed(event)
        for event in emitter.finish():
            folder.feed(event)

    scale = 1e9 / calls
    return {
        "floor": best_of(repeat, lambda: None, floor) * scale,
        "close": best_of(repeat, announced, lambda core: core.feed(closing)) * scale,
        "stream": best_of(repeat, lambda: None, whole) * scale,
        "pipeline": best_of(repeat, lambda: None, pipeline) * scale,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    columns = ("floor", "close", "stream", "pipeline")
    print(f"{'calls':>9} " + " ".join(f"{name + ' ns/call':>17}" for name in columns))
    for calls in options.calls:
        row = measure(calls, options.repeat)
        print(f"{calls:>9} " + " ".join(f"{row[name]:>17.0f}" for name in columns))


if __name__ == "__main__":
    main()
