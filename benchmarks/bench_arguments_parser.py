"""The incremental arguments parser alone, against a jiter partial re-parse per delta.

Run: ``python -m benchmarks.bench_arguments_parser`` (``--quick`` skips the 20 MB row; ``--sizes 200000``;
``--jiter-budget 60`` seconds before the jiter run is cut and extrapolated).

Each row feeds the arguments text of one ``write_file`` call, ``{"path": ..., "content": <code>}``, in
4-character deltas (about one token each, as OpenAI streams them) to a fresh
:class:`~operators.arguments.splitter.JSONStreamParser` and calls ``finish()``; the string deltas and
values it
returns are built but not kept. The code is full of escapes once serialised: quotes, backslashes,
newlines, tabs, and non-ASCII text (``\\uXXXX`` escapes and surrogate pairs, as ``json.dumps`` writes by
default). Slicing the deltas is not timed; the parsed value is checked against ``json.loads`` after.

The comparisons are what the SDKs do for a partial view of the arguments, on the same deltas, in the same
run, at the smallest size only:

- openai-python's ``ChatCompletionStreamState`` (a strict ``write_file`` tool, so that it offers
  ``parsed_arguments``), fed the deltas as ``ChatCompletionChunk`` objects built before the clock starts;
  prints "not installed" without the ``openai`` package;
- a jiter re-parse of the whole buffer per delta (``jiter.from_json(buffer,
  partial_mode="trailing-strings")``), what pydantic-ai and LangChain-style helpers do.

Both are quadratic in the size of the arguments, so each is cut after ``--jiter-budget`` seconds, the rest
extrapolated from the deltas done (cost per delta grows linearly with the buffer, so the total grows with
the square of the number of deltas).

Targets: streamfold at least 100x faster than ``ChatCompletionStreamState`` at 200 KB, and its cost per
byte flat: ns/byte at 20 MB within 1.3x of 200 KB.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Sequence
from typing import Any

from benchmarks._data import CHUNK, CODE_LINES, code_lines, deltas
from operators.arguments.splitter import JSONStreamParser
from pipeline.models import ArgumentEvent, ArgumentValue

SIZES = (200_000, 2_000_000, 20_000_000)
_CODE_LINES = (*CODE_LINES, "\tdef method(self, /, *args: int) -> None: ...")


def arguments_text(size: int, seed: int = 1) -> str:
    """A ``write_file`` call's arguments text of about ``size`` characters, dense with escapes."""
    escaped_length = {line + "\n": len(json.dumps(line + "\n")) - 2 for line in _CODE_LINES}
    empty = json.dumps({"path": "src/generated.py", "content": ""})
    lines = code_lines(size - len(empty), seed=seed, lines=_CODE_LINES, cost=escaped_length.__getitem__)
    return json.dumps({"path": "src/generated.py", "content": "".join(lines)})


def time_parser(pieces: Sequence[str], repeat: int) -> tuple[float, object]:
    """Best time of ``repeat`` full runs over ``pieces``, and the root value the last run reported."""
    best = float("inf")
    last: list[ArgumentEvent] = []
    for _ in range(repeat):
        gc.collect()
        parser = JSONStreamParser()
        feed = parser.feed
        started = time.perf_counter()
        for piece in pieces:
            last = feed(piece)
        last = last + parser.finish()
        best = min(best, time.perf_counter() - started)
    roots = [event.value for event in last if isinstance(event, ArgumentValue) and event.path == ()]
    return best, roots[0] if roots else None


def time_jiter(pieces: Sequence[str], budget: float) -> tuple[float, bool] | None:
    """Time of a jiter re-parse per delta over ``pieces`` (extrapolated past ``budget`` seconds)."""
    try:
        import jiter
    except ImportError:
        return None
    gc.collect()
    buffer = b""
    done = 0
    started = time.perf_counter()
    for piece in pieces:
        buffer += piece.encode()
        jiter.from_json(buffer, partial_mode="trailing-strings")
        done += 1
        if done % 256 == 0 and time.perf_counter() - started > budget:
            break
    elapsed = time.perf_counter() - started
    if done == len(pieces):
        return elapsed, False
    return elapsed * (len(pieces) / done) ** 2, True


def time_openai(pieces: Sequence[str], budget: float) -> tuple[float, bool] | None:
    """Time of openai-python's ``ChatCompletionStreamState`` over ``pieces`` (extrapolated past
    ``budget`` seconds); None without the ``openai`` package."""
    try:
        from openai.lib.streaming.chat._completions import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk
    except ImportError:
        return None
    properties = {"path": {"type": "string"}, "content": {"type": "string"}}
    parameters = {"type": "object", "properties": properties, "required": ["path", "content"]}
    tool: Any = {
        "type": "function",
        "function": {
            "name": "write_file",
            "strict": True,
            "parameters": {**parameters, "additionalProperties": False},
        },
    }

    def chunk(tool_call: dict[str, Any]) -> ChatCompletionChunk:
        delta = {"role": "assistant", "tool_calls": [tool_call]}
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        fields = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }
        return ChatCompletionChunk.model_validate(fields)

    first = chunk({"index": 0, "id": "call_1", "type": "function", "function": {"name": "write_file"}})
    chunks = [first] + [chunk({"index": 0, "function": {"arguments": piece}}) for piece in pieces]
    gc.collect()
    state: Any = ChatCompletionStreamState(input_tools=[tool])
    done = 0
    started = time.perf_counter()
    for item in chunks:
        state.handle_chunk(item)
        done += 1
        if done % 256 == 0 and time.perf_counter() - started > budget:
            break
    elapsed = time.perf_counter() - started
    if done == len(chunks):
        return elapsed, False
    return elapsed * (len(chunks) / done) ** 2, True


def row(name: str, size_bytes: int, seconds: float, note: str = "") -> str:
    return (
        f"{name:<28} {size_bytes / 1e6:>9.2f} {seconds:>10.3f} {size_bytes / 1e6 / seconds:>9.2f}"
        f" {seconds / size_bytes * 1e9:>9.1f}  {note}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    options.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="arguments sizes (chars)")
    options.add_argument("--quick", action="store_true", help="skip sizes above 2 MB")
    options.add_argument("--repeat", type=int, default=3, help="runs per size, best shown (x3 under 1 MB)")
    options.add_argument("--jiter-budget", type=float, default=30.0, help="seconds before jiter is cut")
    options.add_argument("--no-jiter", action="store_true", help="skip the peer comparisons")
    args = options.parse_args(argv)
    sizes = [size for size in args.sizes if not (args.quick and size > 2_000_000)]

    print(f"{CHUNK}-character deltas; MB = 10^6 bytes of UTF-8 JSON text; best of several runs\n")
    print(f"{'parser':<28} {'MB':>9} {'seconds':>10} {'MB/s':>9} {'ns/byte':>9}")
    per_byte: dict[int, float] = {}
    for size in sizes:
        text = arguments_text(size)
        size_bytes = len(text.encode())
        pieces = deltas(text)
        # Short runs are repeated more: on a shared machine the best of many is the stable figure.
        repeat = args.repeat * 3 if size < 1_000_000 else args.repeat if size <= 2_000_000 else 2
        repeat = max(1, repeat)
        seconds, root = time_parser(pieces, repeat)
        if root != json.loads(text):
            raise SystemExit(f"the parser's value for {size} chars differs from json.loads")
        per_byte[size] = seconds / size_bytes * 1e9
        print(row(f"streamfold {size // 1000} K", size_bytes, seconds), flush=True)
        if size == min(sizes) and not args.no_jiter:
            openai_time = time_openai(pieces, args.jiter_budget)
            if openai_time is None:
                print(f"{'openai ChatCompletionStreamState':<28} not installed")
            else:
                openai_seconds, extrapolated = openai_time
                note = f"{openai_seconds / seconds:.0f}x slower" + (", extrapolated" if extrapolated else "")
                print(row(f"openai-python {size // 1000} K", size_bytes, openai_seconds, note), flush=True)
            jiter_time = time_jiter(pieces, args.jiter_budget)
            if jiter_time is None:
                print(f"{'jiter':<28} not installed")
            else:
                jiter_seconds, extrapolated = jiter_time
                note = f"{jiter_seconds / seconds:.0f}x slower" + (", extrapolated" if extrapolated else "")
                print(row(f"jiter re-parse {size // 1000} K", size_bytes, jiter_seconds, note), flush=True)
        del pieces
    if len(per_byte) > 1:
        smallest, largest = min(per_byte), max(per_byte)
        ratio = per_byte[largest] / per_byte[smallest]
        verdict = "within" if ratio <= 1.3 else "OVER"
        sizes_named = f"{largest // 1000} K / {smallest // 1000} K"
        print(f"\nns/byte at {sizes_named}: {ratio:.2f} ({verdict} the 1.3x target)")


if __name__ == "__main__":
    main()
