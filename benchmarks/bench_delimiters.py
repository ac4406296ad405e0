"""The delimiter-token rewriter on a long Kimi-K2 stream.

Run: ``python -m benchmarks.bench_delimiters`` (``--sizes 1000000 10000000``; ``--no-async`` skips the
operator rows; ``--repeat 3`` keeps the fastest of three runs, which filters out the noise of a shared
machine).

The stream is model output as Kimi-K2 writes it: paragraphs of prose (with the odd ``<`` and ``|`` that
look like the start of a marker) interleaved with tool sections of one to three calls whose JSON
arguments hold strings with escapes, non-ASCII text and marker-like text. It is cut into 4-character
content deltas (about one token each), built before timing. Each row runs the whole stream through a
fresh :class:`~operators.delimiters.DelimiterRewriter` (``feed`` per delta, then ``finish``), or through
the ``rewrite_delimiters`` operator over an aiostream source; the output is folded after timing and
checked (text and every call's arguments) against what the generator wrote.

The rewriter is linear: the target is ns/byte at 10 MB within 1.3x of 1 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import time
from collections.abc import Sequence

from aiostream import stream, streamcontext

from operators.delimiters import DelimiterRewriter, rewrite_delimiters
from pipeline.models import ChunkResponse

CHUNK = 4
SIZES = (1_000_000, 10_000_000)
TARGET_RATIO = 1.3
_PROSE = (
    "Let me look at the repository layout first. ",
    "The function returns a list of <items> | results, so 2 < 3 holds. ",
    "I'll read the configuration and then update the tests accordingly.\n",
    "Les résultats sont stockés dans un cache; 東京の天気も確認します。 ",
    "Done with this step <| next one |> follows.\n",
)
_VALUES = (
    'print("hello, \\"world\\"")\n',
    "C:\\Users\\dev\\file.txt",
    "naïve café → ☕ and emoji 🎉",
    "literal <|tool_call_end|> inside a string",
    "SELECT * FROM t WHERE name = 'x'",
)


def kimi_stream(size: int, seed: int = 7) -> tuple[str, str, list[tuple[str, str, str]]]:
    """About ``size`` characters of Kimi-K2 output; the expected content and calls ``(id, name, args)``."""
    rng = random.Random(seed)
    parts: list[str] = []
    content: list[str] = []
    calls: list[tuple[str, str, str]] = []
    total = 0
    while total < size:
        prose = "".join(rng.choice(_PROSE) for _ in range(rng.randint(3, 12)))
        parts.append(prose)
        content.append(prose)
        section = ["<|tool_calls_section_begin|>"]
        for _ in range(rng.randint(1, 3)):
            name = rng.choice(("read_file", "write_file", "search", "run_shell"))
            call_id = f"functions.{name}:{len(calls)}"
            arguments = json.dumps(
                {
                    "path": f"src/module_{rng.randint(0, 999)}.py",
                    "content": "".join(rng.choice(_VALUES) for _ in range(rng.randint(2, 30))),
                    "options": {
                        "overwrite": rng.random() < 0.5,
                        "lines": [rng.randint(1, 99) for _ in range(4)],
                    },
                },
                ensure_ascii=rng.random() < 0.5,
            )
            section.append(
                f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"
            )
            calls.append((call_id, name, arguments))
        section.append("<|tool_calls_section_end|>")
        text = "".join(section)
        parts.append(text)
        total += len(prose) + len(text)
    return "".join(parts), "".join(content), calls


def deltas(text: str) -> list[ChunkResponse]:
    return [ChunkResponse(content=text[start : start + CHUNK]) for start in range(0, len(text), CHUNK)]


def fold(chunks: Sequence[ChunkResponse]) -> tuple[str, list[tuple[str, str, str]]]:
    content = "".join(chunk.content for chunk in chunks)
    calls: dict[int, list[str]] = {}
    ids: dict[int, tuple[str, str]] = {}
    for chunk in chunks:
        for delta in chunk.tool_calls or ():
            if delta.index not in ids:
                ids[delta.index] = (delta.call_id or "", delta.name or "")
                calls[delta.index] = []
            if delta.arguments_delta:
                calls[delta.index].append(delta.arguments_delta)
    return content, [(*ids[index], "".join(calls[index])) for index in sorted(ids)]


def run_core(items: list[ChunkResponse]) -> tuple[float, list[ChunkResponse]]:
    rewriter = DelimiterRewriter("kimi_k2", id_factory=str)
    out: list[ChunkResponse] = []
    extend = out.extend
    feed = rewriter.feed
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for item in items:
            extend(feed(item))
        extend(rewriter.finish())
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, out


async def _run_operator(items: list[ChunkResponse]) -> tuple[float, list[ChunkResponse]]:
    out: list[ChunkResponse] = []
    append = out.append
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        async with streamcontext(
            rewrite_delimiters(stream.iterate(items), "kimi_k2", id_factory=str)
        ) as chunks:
            async for chunk in chunks:
                append(chunk)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed, out


def run_operator(items: list[ChunkResponse]) -> tuple[float, list[ChunkResponse]]:
    return asyncio.run(_run_operator(items))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="stream sizes in characters"
    )
    parser.add_argument("--no-async", action="store_true", help="skip the async operator rows")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the fastest counts")
    args = parser.parse_args(argv)
    runners = [("DelimiterRewriter.feed", run_core)]
    if not args.no_async:
        runners.append(("rewrite_delimiters (async)", run_operator))
    print(
        f"{'stream':>10} {'path':<28} {'deltas':>10} {'calls':>7} {'seconds':>8} {'MB/s':>7} {'ns/byte':>8}"
    )
    per_byte: dict[str, list[float]] = {}
    for size in args.sizes:
        text, content, calls = kimi_stream(size)
        items = deltas(text)
        size_bytes = len(text.encode())
        for label, runner in runners:
            elapsed, out = runner(items)
            if fold(out) != (content, calls):
                raise SystemExit(
                    f"{label} at {size} characters did not reproduce the stream's text and calls"
                )
            del out
            for _ in range(args.repeat - 1):
                elapsed = min(elapsed, runner(items)[0])
            ns_per_byte = elapsed * 1e9 / size_bytes
            per_byte.setdefault(label, []).append(ns_per_byte)
            print(
                f"{size_bytes / 1e6:>8.1f}MB {label:<28} {len(items):>10} {len(calls):>7} {elapsed:>8.2f} "
                f"{size_bytes / elapsed / 1e6:>7.2f} {ns_per_byte:>8.1f}"
            )
    status = 0
    for label, values in per_byte.items():
        if len(values) > 1:
            ratio = values[-1] / values[0]
            verdict = "ok" if ratio <= TARGET_RATIO else f"ABOVE the {TARGET_RATIO}x target"
            print(f"{label}: ns/byte at the largest size / smallest = {ratio:.2f} ({verdict})")
            status = status or int(ratio > TARGET_RATIO)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
