"""``streamfold``: replay recorded streams through the pipeline, watch a demo, run the rewriting proxy.

::

    streamfold demo [--stream NAME] [--speed CHUNKS_PER_SECOND] [--plain]
    streamfold replay FILE [--provider auto|openai|openai-responses|anthropic|gemini|cohere|text]
                           [--tool-format api_tool_call|kimi_k2|...] [--output pretty|jsonl|openai-sse]
    streamfold proxy --upstream URL [--host 127.0.0.1] [--port 8000] [--tool-format NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any

import anyio

from pipeline.errors import StreamfoldError
from pipeline.models import ChunkResponse

__all__ = ["main"]

DEMO_STREAMS = {
    "coding-agent": ("coding_agent.sse", "anthropic"),
    "anthropic-parallel": ("fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse", "anthropic"),
    "openai-parallel": ("openai-python_parallel_tool_calls_gpt4o.sse", "openai"),
    "gemini-thinking": ("fantasy_gemini-2.5-flash_thought_summary_then_function_call.sse", "gemini"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamfold", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="replay a bundled stream through the whole pipeline, live")
    demo.add_argument("--stream", choices=sorted(DEMO_STREAMS), default="coding-agent")
    demo.add_argument("--speed", type=float, default=120.0, help="chunks per second (0: as fast as possible)")
    demo.add_argument("--plain", action="store_true", help="plain lines, as on a dumb terminal")

    replay = commands.add_parser("replay", help="run a recorded stream file through the pipeline")
    replay.add_argument("file", type=Path)
    replay.add_argument("--provider", default="auto")
    replay.add_argument("--tool-format", default="api_tool_call")
    replay.add_argument("--output", choices=("pretty", "jsonl", "openai-sse"), default="pretty")
    replay.add_argument("--speed", type=float, default=0.0, help="chunks per second (0: as fast as possible)")
    replay.add_argument("--chunk-size", type=int, default=None, help="re-chunk the bytes (text: delta size)")
    replay.add_argument("--plain", action="store_true", help="pretty output as plain lines, no live view")

    proxy = commands.add_parser("proxy", help="an OpenAI-compatible proxy rewriting delimiter tool calls")
    proxy.add_argument(
        "--upstream", required=True, help="base URL of the model server, e.g. http://host:8000"
    )
    proxy.add_argument("--host", default="127.0.0.1")
    proxy.add_argument("--port", type=int, default=8000)
    proxy.add_argument("--tool-format", default="kimi_k2")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``streamfold`` console script; returns the exit status."""
    arguments = _parser().parse_args(argv)
    try:
        match arguments.command:
            case "demo":
                anyio.run(_demo, arguments)
            case "replay":
                anyio.run(_replay, arguments)
            case "proxy":
                from pipeline.proxy import serve

                serve(
                    upstream=arguments.upstream,
                    host=arguments.host,
                    port=arguments.port,
                    tool_format=arguments.tool_format,
                )
    except StreamfoldError as exc:
        print(f"streamfold: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except (FileNotFoundError, IsADirectoryError) as exc:
        print(f"streamfold: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


async def _paced(pieces: Sequence[Any], speed: float) -> AsyncIterator[Any]:
    for piece in pieces:
        if speed > 0:
            await anyio.sleep(1 / speed)
        yield piece


def _sse_event_pieces(data: bytes) -> list[bytes]:
    """Split SSE bytes at event boundaries, so pacing follows the provider's events."""
    pieces = data.split(b"\n\n")
    return [piece + b"\n\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def _source(
    path: Path, *, provider: str, speed: float, chunk_size: int | None
) -> tuple[AsyncIterator[Any], str]:
    data = path.read_bytes()
    if provider == "text" or (path.suffix in {".txt", ".json"} and provider == "auto"):
        if path.suffix == ".json":
            deltas: list[str] = json.loads(data)
        else:
            text, step = data.decode(), chunk_size or 4
            deltas = [text[i : i + step] for i in range(0, len(text), step)]
        return _paced(deltas, speed), "text"
    if chunk_size:
        pieces = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
    elif path.suffix == ".jsonl":
        pieces = data.splitlines(keepends=True)
    else:
        pieces = _sse_event_pieces(data)
    return _paced(pieces, speed), provider


async def _run(
    source: AsyncIterator[Any],
    out: IO[str],
    *,
    provider: str,
    tool_format: str,
    output: str,
    plain: bool = False,
) -> None:
    from pipeline.compose import process

    if output == "openai-sse":
        await _openai_sse(source, out, provider=provider, tool_format=tool_format)
        return
    events = process(source, provider=provider, tool_format=tool_format)
    if output == "jsonl":
        async with events.stream() as items:
            async for event in items:
                out.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
        return
    from pipeline.render import make_renderer

    renderer = make_renderer(out, force_plain=plain)
    try:
        async with events.stream() as items:
            async for item in items:
                renderer.feed(item)
    finally:
        renderer.close()


async def _openai_sse(source: AsyncIterator[Any], out: IO[str], *, provider: str, tool_format: str) -> None:
    """Re-encode the (rewritten) chunks as OpenAI Chat Completions SSE, as the proxy answers."""
    from aiostream import Stream

    from operators.openai_encode import encode_openai_chat
    from pipeline.compose import to_chunks

    chunks: Stream[ChunkResponse] = to_chunks(source, provider=provider)
    if tool_format not in ("api_tool_call", ""):
        from operators.delimiters import rewrite_delimiters

        chunks = chunks | rewrite_delimiters.pipe(tool_format)
    async with (chunks | encode_openai_chat.pipe()).stream() as lines:
        async for line in lines:
            out.write(line)
    out.write("data: [DONE]\n\n")


async def _replay(arguments: argparse.Namespace) -> None:
    source, provider = _source(
        arguments.file, provider=arguments.provider, speed=arguments.speed, chunk_size=arguments.chunk_size
    )
    await _run(
        source,
        sys.stdout,
        provider=provider,
        tool_format=arguments.tool_format,
        output=arguments.output,
        plain=arguments.plain,
    )


async def _demo(arguments: argparse.Namespace) -> None:
    name, provider = DEMO_STREAMS[arguments.stream]
    resource = resources.files("pipeline") / "demo" / name
    pieces = _sse_event_pieces(resource.read_bytes())
    await _run(
        _paced(pieces, arguments.speed),
        sys.stdout,
        provider=provider,
        tool_format="api_tool_call",
        output="pretty",
        plain=arguments.plain,
    )


if __name__ == "__main__":
    raise SystemExit(main())
