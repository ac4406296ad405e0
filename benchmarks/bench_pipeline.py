"""The full pipeline against the SDK helpers, on a ``write_file`` call streamed in 4-character deltas.

Run: ``python -m benchmarks.bench_pipeline`` (``--quick`` skips the 20 MB row; ``--sizes 200000 2000000``;
``--peer-repeat 3`` times each SDK helper three times too, as streamfold is by default).

Each row streams one OpenAI Chat Completions response whose only tool call writes a file of code full of
escapes (quotes, backslashes, tabs, newlines, non-ASCII). streamfold takes the SSE bytes as an HTTP body
would deliver them (16 KiB reads) and runs adapter, converter, splitter, emitter and folder, with the file
content streaming as decoded text. The others get the same deltas, already parsed into their SDK objects
(their parsing is not timed):

- openai-python ``ChatCompletionStreamState`` with a strict tool: it re-parses the accumulated arguments
  on every delta to offer ``parsed_arguments``;
- the anthropic SDK's ``accumulate_event`` on the equivalent Anthropic stream: it re-parses the
  accumulated ``partial_json`` on every delta;
- jiter partial re-parse per delta (what pydantic-ai and LangChain-style helpers do).

The quadratic ones run only on the sizes where they finish in reasonable time. Per-byte cost of streamfold
should stay flat from 200 KB to 20 MB. Times are CPU time of this process (nothing here waits), so that
other work on the machine does not count.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio

from benchmarks._data import CHUNK as CHUNK  # bench_stages reads the delta size from here
from benchmarks._data import code_lines, deltas

READ_SIZE = 16 * 1024


def code_text(size: int, seed: int = 1) -> str:
    """Python-looking code with heavy escaping, ``size`` characters long."""
    return "".join(code_lines(size, seed=seed))[:size]


def arguments_text(size: int) -> str:
    return json.dumps({"path": "src/generated.py", "content": code_text(size)})


def openai_chunk(**delta: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }


def openai_chunks(text: str) -> Iterator[dict[str, Any]]:
    function = {"name": "write_file", "arguments": ""}
    first = {"index": 0, "id": "call_bench", "type": "function", "function": function}
    yield openai_chunk(role="assistant", tool_calls=[first])
    for piece in deltas(text):
        yield openai_chunk(tool_calls=[{"index": 0, "function": {"arguments": piece}}])
    final = openai_chunk()
    final["choices"][0]["finish_reason"] = "tool_calls"
    yield final


def sse_blocks(text: str) -> Iterator[bytes]:
    """The SSE body, in 16 KiB reads, generated lazily so 20 MB of arguments never sit in memory as SSE."""
    buffer: list[bytes] = []
    size = 0
    for chunk in openai_chunks(text):
        event = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
        buffer.append(event)
        size += len(event)
        if size >= READ_SIZE:
            yield b"".join(buffer)
            buffer, size = [], 0
    buffer.append(b"data: [DONE]\n\n")
    yield b"".join(buffer)


def bench_streamfold(text: str) -> tuple[float, int]:
    from pipeline.compose import process
    from pipeline.models import ToolInvocation

    blocks = list(sse_blocks(text))
    events = 0

    async def source() -> AsyncIterator[bytes]:
        for block in blocks:
            yield block

    async def run() -> float:
        nonlocal events
        start = time.process_time()
        async with process(source(), provider="openai").stream() as items:
            async for item in items:
                events += 1
                if isinstance(item, ToolInvocation):
                    assert item.ok, item.error
                    assert item.arguments["content"]
        return time.process_time() - start

    return anyio.run(run), len(blocks)


def bench_openai_helper(text: str) -> float:
    from openai.lib.streaming.chat._completions import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    tool: Any = {
        "type": "function",
        "function": {
            "name": "write_file",
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
    }
    chunks = [ChatCompletionChunk.model_validate(chunk) for chunk in openai_chunks(text)]
    state: Any = ChatCompletionStreamState(input_tools=[tool])
    start = time.process_time()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return time.process_time() - start


def bench_anthropic_helper(text: str) -> float:
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    raw: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_bench", "name": "write_file", "input": {}},
        },
    ]
    raw.extend(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": piece},
        }
        for piece in deltas(text)
    )
    raw.append({"type": "content_block_stop", "index": 0})
    events = [adapter.validate_python(event) for event in raw]
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    start = time.process_time()
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    return time.process_time() - start


def bench_jiter(text: str) -> float:
    import jiter

    pieces = deltas(text)
    accumulated: list[str] = []
    start = time.process_time()
    for piece in pieces:
        accumulated.append(piece)
        jiter.from_json("".join(accumulated).encode(), partial_mode="trailing-strings")
    return time.process_time() - start


def timed(function: Callable[[str], Any], text: str) -> float:
    gc.collect()
    result = function(text)
    return float(result[0] if isinstance(result, tuple) else result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000, 20_000_000])
    parser.add_argument("--quick", action="store_true", help="only 200 KB and 2 MB")
    parser.add_argument(
        "--competitors-up-to", type=int, default=200_000, help="largest size for the SDK helpers"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="streamfold runs per size up to 2 MB (the best is shown)"
    )
    parser.add_argument(
        "--peer-repeat",
        type=int,
        default=1,
        help="runs of each SDK helper (the best is shown; one 200 KB run of the openai helper takes ~20 s)",
    )
    options = parser.parse_args()
    sizes = [size for size in options.sizes if not (options.quick and size > 2_000_000)]

    # A small run first: the pipeline's modules (pydantic among them) are imported on first use, which
    # would otherwise be timed as part of the first row.
    bench_streamfold(arguments_text(1_000))
    print(
        f"best of {options.repeat} streamfold runs (to 2 MB), of {options.peer_repeat} run(s) of each helper"
    )
    columns = f"{'args size':>12}{'deltas':>10}{'seconds':>10}{'MB/s':>9}{'ns/byte':>10}{'x':>8}"
    print(f"{'implementation':<36}{columns}")
    baseline: dict[int, float] = {}
    for size in sizes:
        text = arguments_text(size)
        runs = options.repeat if size <= 2_000_000 else 1
        seconds = min(timed(bench_streamfold, text) for _ in range(runs))
        baseline[size] = seconds
        rows = [("streamfold pipeline (SSE bytes in)", seconds)]
        if size <= options.competitors_up_to:
            for name, helper in (
                ("openai ChatCompletionStreamState", bench_openai_helper),
                ("anthropic accumulate_event", bench_anthropic_helper),
                ("jiter partial re-parse per delta", bench_jiter),
            ):
                rows.append((name, min(timed(helper, text) for _ in range(options.peer_repeat))))
        for name, elapsed in rows:
            per_byte = elapsed / len(text) * 1e9
            print(
                f"{name:<36}{len(text):>12,}{len(text) // CHUNK:>10,}{elapsed:>10.3f}"
                f"{len(text) / elapsed / 1e6:>9.2f}{per_byte:>10.0f}{elapsed / seconds:>8.1f}"
            )
    if len(baseline) > 1:
        smallest = min(baseline)
        per_byte_small = baseline[smallest] / smallest
        for size, seconds in sorted(baseline.items()):
            ratio = seconds / size / per_byte_small
            print(f"streamfold per-byte cost at {size:,} / at {smallest:,}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
