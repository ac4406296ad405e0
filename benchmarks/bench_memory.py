"""Peak memory of ``process()`` over one long ``write_file`` call, with and without folding.

Run: ``python -m benchmarks.bench_memory`` (``--sizes 3000000 30000000``, ``--delta 64`` characters per
arguments delta, ``--trace`` to add tracemalloc's peak and the allocation sites alive at the call's end;
tracing is many times slower).

Each row runs in a fresh Python process: one OpenAI Chat Completions response whose only tool call writes
a file of code full of escapes and non-ASCII text (so the decoded content is a 4-byte-per-character
``str``), its SSE body generated lazily in 16 KiB reads so that the input never sits in memory. The
consumer keeps nothing but the final :class:`ToolInvocation`.

Columns:

- ``floor MiB``: the folded value itself (``sys.getsizeof`` of the arguments' strings and dict), what a
  folding consumer holds at the end anyway; 0 without folding.
- ``RSS MiB``: growth of the process's peak resident set over the run (after imports and a warm-up).
- ``traced MiB`` (``--trace``): tracemalloc's peak of the run.
- ``over floor``: peak minus floor. It must not grow with the input: flat from 3 MB to 30 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

from benchmarks._data import CODE_LINES

SIZES = (3_000_000, 30_000_000)
READ_SIZE = 16 * 1024
_PREFIX = '{"path": "src/generated.py", "content": "'


def arguments_pieces(size: int, delta: int) -> Iterator[str]:
    """The arguments text of a ``write_file`` call of about ``size`` characters, in ``delta``-character
    pieces, made as they are read."""
    escaped = [json.dumps(line + "\n")[1:-1] for line in CODE_LINES]
    rng = random.Random(3)
    pending = _PREFIX
    produced = 0
    while produced < size:
        pending += rng.choice(escaped)
        while len(pending) >= delta:
            yield pending[:delta]
            produced += delta
            pending = pending[delta:]
    yield pending + '"}'


def sse_body(size: int, delta: int) -> Iterator[bytes]:
    """The OpenAI Chat SSE body of the call, in reads of about ``READ_SIZE`` bytes."""

    def event(delta_fields: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta_fields, "finish_reason": finish_reason}
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    first = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "write_file", "arguments": ""},
    }
    buffer = [event({"role": "assistant", "tool_calls": [first]})]
    buffered = len(buffer[0])
    for piece in arguments_pieces(size, delta):
        buffer.append(event({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        buffered += len(buffer[-1])
        if buffered >= READ_SIZE:
            yield b"".join(buffer)
            buffer, buffered = [], 0
    buffer.append(event({}, "tool_calls"))
    buffer.append(b"data: [DONE]\n\n")
    yield b"".join(buffer)


def deep_size(value: Any) -> int:
    """Bytes of ``value`` and what it holds (dicts, lists, strings)."""
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(key) + deep_size(item) for key, item in value.items())
    elif isinstance(value, list):
        size += sum(deep_size(item) for item in value)
    return size


async def consume(size: int, delta: int, fold: bool) -> int:
    """Run the pipeline; the size of the folded arguments (0 without folding)."""
    from pipeline.compose import process
    from pipeline.models import ToolInvocation

    async def source() -> AsyncIterator[bytes]:
        for block in sse_body(size, delta):
            yield block

    folded: Any = None
    # Folding is the default: not naming it lets trees from before the option run the folding rows.
    stream = (
        process(source(), provider="openai") if fold else process(source(), provider="openai", fold=False)
    )
    async with stream.stream() as events:
        async for event in events:
            if isinstance(event, ToolInvocation):
                assert event.ok, event.error
                folded = event.arguments
                if tracemalloc.is_tracing():
                    print_sites(tracemalloc.take_snapshot())
    return deep_size(folded) if folded is not None else 0


def print_sites(snapshot: tracemalloc.Snapshot, count: int = 6) -> None:
    """The lines that allocated most of what is alive (to stderr, which the table prints)."""
    for statistic in snapshot.statistics("lineno")[:count]:
        print(f"    {statistic}", file=sys.stderr)


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def measure(size: int, delta: int, fold: bool, trace: bool) -> dict[str, Any]:
    """One row, in this process: call it in a fresh one."""
    anyio.run(consume, 10_000, delta, fold)  # imports and first-use caches, before the baseline
    before = peak_rss()
    if trace:
        tracemalloc.start()
    floor = anyio.run(consume, size, delta, fold)
    row: dict[str, Any] = {"floor": floor, "rss": peak_rss() - before}
    if trace:
        row["traced"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return row


def main() -> None:
    options = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    options.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="arguments sizes (chars)")
    options.add_argument("--delta", type=int, default=64, help="characters per arguments delta")
    options.add_argument("--trace", action="store_true", help="also tracemalloc's peak (slow)")
    options.add_argument("--row", nargs=2, metavar=("SIZE", "FOLD"), help=argparse.SUPPRESS)
    args = options.parse_args()
    if args.row:
        size, fold = int(args.row[0]), args.row[1] == "fold"
        print(json.dumps(measure(size, args.delta, fold, args.trace)))
        return
    mib = 1024 * 1024
    traced = f" {'traced MiB':>10}" if args.trace else ""
    print(f"{args.delta}-character deltas; peak growth over the run, each row in a fresh process\n")
    print(f"{'MB':>6} {'folding':>8} {'floor MiB':>10} {'RSS MiB':>8}{traced} {'over floor':>10}")
    for size in args.sizes:
        for fold in (True, False):
            command = [sys.executable, "-m", "benchmarks.bench_memory", "--delta", str(args.delta)]
            command += ["--row", str(size), "fold" if fold else "segments"] + (
                ["--trace"] if args.trace else []
            )
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                failure = (done.stderr.strip().splitlines() or ["failed"])[-1]
                print(f"{size / 1e6:>6.1f} {'yes' if fold else 'no':>8} {failure}", flush=True)
                continue
            row = json.loads(done.stdout.splitlines()[-1])
            if args.trace:
                print(done.stderr.rstrip())
            peak = row["traced"] if args.trace else row["rss"]
            traced_cell = f" {row['traced'] / mib:>10.1f}" if args.trace else ""
            print(
                f"{size / 1e6:>6.1f} {'yes' if fold else 'no':>8} {row['floor'] / mib:>10.1f}"
                f" {row['rss'] / mib:>8.1f}{traced_cell} {(peak - row['floor']) / mib:>10.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
