"""``streamfold``: replay recorded streams through the pipeline, watch a demo, run the rewriting proxy.

::

    streamfold demo [--stream NAME] [--speed PIECES_PER_SECOND] [--plain]
    streamfold replay FILE [--provider auto|openai|openai-responses|anthropic|gemini|cohere|ollama|text]
                           [--tool-format none|kimi_k2|...] [--output pretty|jsonl|openai-sse]
                           [--speed PIECES_PER_SECOND] [--chunk-size N] [--plain]
    streamfold proxy --upstream URL [--host 127.0.0.1] [--port 8000] [--tool-format kimi_k2|auto|none|...]
                     [--unknown-tools text|drop|refuse|allow] [--workers N] [--graceful-shutdown SECONDS]
                     [--access-log json|plain|off] [--connect-timeout S] [--read-timeout S] [--max-...]
    streamfold serve [FILE | --demo [--stream NAME] | --upstream URL --model NAME] [--host] [--port] [--token]
    streamfold formats [--json]
    streamfold --version

Errors are one line on stderr: exit status 2 for a usage error (a bad option, a file that cannot be
read), 1 for bad input (a stream that does not decode, a provider error, a stream cut before its finish)
after everything before it was written.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast

import anyio

from operators.registry import (
    NO_REWRITE,
    PROVIDERS,
    ProviderOption,
    RegisteredFormat,
    ToolFormat,
    resolve_tool_format,
)
from pipeline._jsonenc import encode_json
from pipeline.cli._json_file import json_items
from pipeline.errors import ProviderError, StreamDecodeError, StreamfoldError
from pipeline.models import ChunkResponse, ResponseEnd

__all__ = ["TruncatedStreamError", "main", "serve_app"]

_DEMO_STREAMS = {
    "coding-agent": ("coding_agent.sse", "anthropic"),
    "anthropic-parallel": ("fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse", "anthropic"),
    "openai-parallel": ("openai-python_parallel_tool_calls_gpt4o.sse", "openai"),
    "gemini-thinking": ("fantasy_gemini-2.5-flash_thought_summary_then_function_call.sse", "gemini"),
}

_DESCRIPTION = (
    "Replay recorded LLM streams through the streamfold pipeline, watch a demo, run the rewriting proxy."
)
_SPEED_HELP = "pieces per second: {pieces}; 0: as fast as possible (default: %(default)s)"
"""The help of ``--speed``, one wording with the pieces each command paces (only the options it takes)."""
_FILE_PIECES = "provider events (SSE events, JSON lines, .json list items) or text deltas"
_REPLAY_SPEED_HELP = _SPEED_HELP.format(
    pieces=_FILE_PIECES.replace(" or ", ", ") + ", or --chunk-size pieces"
)
_SERVE_SPEED_HELP = _SPEED_HELP.format(pieces=_FILE_PIECES)
_DEMO_SPEED_HELP = _SPEED_HELP.format(pieces="the recording's provider events (SSE events)")
_TEXT_DELTA_SIZE = 4
"""Characters per delta of a text file replayed without ``--chunk-size``."""


class _InputError(Exception):
    """The file given cannot be read at all (missing, a directory, no permission): a usage error."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamfold")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _tool_format_names() -> str:
    from operators.delimiters import FORMATS

    return ", ".join(sorted({lexer.name for lexer in FORMATS.values()}))


def _tool_format(value: str) -> RegisteredFormat:
    """argparse type of ``--tool-format``: ``none`` or a delimiter format (aliases accepted, and formats
    registered at run time), checked by `operators.registry.resolve_tool_format`."""
    try:
        return RegisteredFormat(resolve_tool_format(value) or NO_REWRITE)
    except StreamfoldError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _proxy_tool_format(value: str) -> str:
    """argparse type of the proxy's ``--tool-format``: as ``--tool-format``."""
    return _tool_format(value)


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not (number >= 0 and math.isfinite(number)):
        raise argparse.ArgumentTypeError(f"expected seconds (a number >= 0), got {value!r}")
    return number


def _speed(value: str) -> float:
    try:
        speed = float(value)
    except ValueError:
        speed = math.nan
    if not (math.isfinite(speed) and speed >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}")
    return speed


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value!r}")
    return number


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {value!r}")
    return number


def _parser() -> argparse.ArgumentParser:
    from operators.delimiters.reasoning_tags import REASONING_FORMATS
    from pipeline.proxy.policy import UNKNOWN_TOOLS

    parser = argparse.ArgumentParser(prog="streamfold", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"streamfold {_version()}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{demo,replay,proxy,serve,formats}"
    )

    demo = commands.add_parser(
        "demo",
        help="replay a bundled stream through the whole pipeline, live",
        description="Replay a bundled recorded response through the whole pipeline, live (no network).",
    )
    demo.add_argument(
        "--stream",
        choices=sorted(_DEMO_STREAMS),
        default="coding-agent",
        help="which recording (default: %(default)s)",
    )
    demo.add_argument("--speed", type=_speed, default=120.0, metavar="RATE", help=_DEMO_SPEED_HELP)
    demo.add_argument("--plain", action="store_true", help="plain lines, as on a dumb terminal")

    formats = _tool_format_names()
    replay = commands.add_parser(
        "replay",
        help="run a recorded stream file through the pipeline",
        description=(
            "Run a recorded stream through the pipeline. FILE: SSE (.sse) or JSON Lines (.jsonl) as the"
            " provider sent it, plain model text (.txt), a .json list of text deltas (strings) or of"
            " provider events (objects), or a .json body (an HTTP error body, read as the provider sent it)."
        ),
    )
    replay.add_argument("file", type=Path, metavar="FILE")
    replay.add_argument(
        "--provider",
        choices=("auto", *PROVIDERS),
        default="auto",
        help="the wire format (default: auto, detected from the first event)",
    )
    replay.add_argument(
        "--tool-format",
        type=_tool_format,
        default=NO_REWRITE,
        metavar="NAME",
        help="how the model writes tool calls in the text: none (the default: structured by the provider)"
        f" or {formats}",
    )
    replay.add_argument(
        "--reasoning-tags",
        choices=tuple(REASONING_FORMATS),
        default=None,
        help="reasoning written in the text becomes reasoning: think (<think>...</think>: DeepSeek-R1, Qwen3,"
        " QwQ, GLM, MiniMax), kimi (◁think▷...◁/think▷), granite, hunyuan, ernie, step3, step3p5, seed_oss"
        " or harmony (the analysis channel); default: none",
    )
    replay.add_argument(
        "--start-in-reasoning",
        action="store_true",
        default=None,
        help="with --reasoning-tags: the response begins inside reasoning (the chat template opened the tag;"
        " ernie, step3, step3p5 and seed_oss do by default)",
    )
    replay.add_argument(
        "--output",
        choices=("pretty", "jsonl", "openai-sse"),
        default="pretty",
        help="pretty: a live view; jsonl: one event per line; openai-sse: as the proxy answers"
        " (default: pretty)",
    )
    replay.add_argument("--speed", type=_speed, default=0.0, metavar="RATE", help=_REPLAY_SPEED_HELP)
    replay.add_argument(
        "--chunk-size",
        type=_positive,
        default=None,
        metavar="N",
        help=f"re-chunk the bytes into N-byte pieces (text: N-character deltas; default {_TEXT_DELTA_SIZE})",
    )
    replay.add_argument("--plain", action="store_true", help="pretty output as plain lines, no live view")

    proxy = commands.add_parser(
        "proxy",
        help="an OpenAI-compatible proxy rewriting delimiter tool calls",
        description=(
            "A proxy in front of an OpenAI-compatible model server whose tool calls arrive as delimiter"
            " tokens in the text: /v1/chat/completions, /v1/responses (OpenAI Responses) and /v1/messages"
            " (Anthropic Messages) answer with standard tool calls, /health and /metrics (Prometheus text)"
            " report on the proxy, and any other path is relayed as it is (needs the server extra)."
        ),
    )
    proxy.add_argument(
        "--upstream", required=True, metavar="URL", help="base URL of the model server, e.g. http://host:8000"
    )
    proxy.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    proxy.add_argument("--port", type=_port, default=8000, help="port to listen on (default: %(default)s)")
    proxy.add_argument(
        "--tool-format",
        type=_proxy_tool_format,
        default="kimi_k2",
        metavar="NAME",
        help=f"how the model writes tool calls in the text (default: %(default)s): {formats}; auto"
        " (detected per answer from the model's markers: `streamfold formats` lists them); or none (no"
        " rewriting)",
    )
    proxy.add_argument(
        "--unknown-tools",
        choices=UNKNOWN_TOOLS,
        default=UNKNOWN_TOOLS[0],
        help="a call to a tool the request does not offer: given back as the text the model wrote,"
        " dropped, refused with an error, or allowed (default: %(default)s)",
    )
    proxy.add_argument(
        "--workers", type=_positive_int, default=1, metavar="N", help="processes (default: %(default)s)"
    )
    proxy.add_argument(
        "--graceful-shutdown",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long open streams may take to finish (default: %(default)s)",
    )
    proxy.add_argument(
        "--access-log",
        choices=("json", "plain", "off"),
        default="json",
        help="json: one JSON object per request on stderr; plain: uvicorn's lines (default: %(default)s)",
    )
    proxy.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
        help="server log level (default: %(default)s)",
    )
    proxy.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="to connect to the upstream (default: %(default)s)",
    )
    proxy.add_argument(
        "--read-timeout",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="between two upstream reads, not the whole stream (default: %(default)s)",
    )
    proxy.add_argument(
        "--max-connections",
        type=_positive_int,
        default=512,
        metavar="N",
        help="open connections to the upstream (default: %(default)s)",
    )
    proxy.add_argument(
        "--max-request-bytes",
        type=_positive_int,
        default=32 * 1024 * 1024,
        metavar="N",
        help="a client's request body, 413 beyond (default: %(default)s)",
    )
    proxy.add_argument(
        "--max-response-bytes",
        type=_positive_int,
        default=64 * 1024 * 1024,
        metavar="N",
        help="a whole upstream answer, 502 beyond (default: %(default)s)",
    )
    proxy.add_argument(
        "--max-event-size",
        type=_positive_int,
        default=8 * 1024 * 1024,
        metavar="N",
        help="one upstream SSE event, the stream ends with an error beyond (default: %(default)s)",
    )
    proxy.add_argument(
        "--keep-alive",
        type=_positive_int,
        default=75,
        metavar="SECONDS",
        help="an idle client connection stays open (default: %(default)s)",
    )
    proxy.add_argument(
        "--reasoning-tags",
        choices=[*REASONING_FORMATS, "none"],
        default="none",
        help="split reasoning the model writes between <think> tags (kimi: ◁think▷; granite, hunyuan, ernie,"
        " step3, step3p5, seed_oss, harmony: theirs) out of the text, into reasoning_content / reasoning"
        " items / thinking blocks (default: %(default)s)",
    )
    formats_command = commands.add_parser(
        "formats",
        help="list the tool-call formats, the models that write them, and how auto tells them",
        description="List every tool-call format --tool-format accepts, the models that write it, and"
        " the markers --tool-format auto tells it by.",
    )
    formats_command.add_argument("--json", action="store_true", help="one JSON object per format")

    serve = commands.add_parser(
        "serve",
        help="a web page showing a response live (a demo, a file, or a live upstream)",
        description=(
            "Serve a web page that shows a response live in the browser, over the serving routes, with"
            " reconnect: a bundled recorded stream (--demo, no network), a recorded FILE, or a live"
            " OpenAI-compatible --upstream (needs the server extra)."
        ),
    )
    serve.add_argument("file", type=Path, nargs="?", metavar="FILE", help="a recorded stream to replay")
    serve.add_argument("--demo", action="store_true", help="replay a bundled recorded stream (no network)")
    serve.add_argument(
        "--stream",
        choices=sorted(_DEMO_STREAMS),
        default="coding-agent",
        help="which bundled recording, with --demo (default: %(default)s)",
    )
    serve.add_argument("--upstream", metavar="URL", help="an OpenAI-compatible server (or streamfold proxy)")
    serve.add_argument("--model", default="default", help="the model to ask, with --upstream")
    serve.add_argument(
        "--provider",
        choices=("auto", *PROVIDERS),
        default="auto",
        help="the recorded file's wire format (default: %(default)s)",
    )
    serve.add_argument(
        "--tool-format",
        type=_tool_format,
        default=NO_REWRITE,
        metavar="NAME",
        help=f"how the model writes tool calls in the text: {formats}, or none (the default)",
    )
    serve.add_argument("--speed", type=_speed, default=60.0, metavar="RATE", help=_SERVE_SPEED_HELP)
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    serve.add_argument("--port", type=_port, default=8765, help="port to listen on (default: %(default)s)")
    serve.add_argument(
        "--token",
        help="serve every client presenting this token (Authorization: Bearer, or the page opened as"
        " /?token=TOKEN) rather than this machine's only; needed to listen on another interface"
        " (default: $STREAMFOLD_SERVE_TOKEN)",
    )
    return parser


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``streamfold`` console script; returns the exit status."""
    arguments = _parser().parse_args(argv)
    where = f"{arguments.file}: " if arguments.command == "replay" else ""
    try:
        _COMMANDS[arguments.command](arguments)
    except StreamfoldError as exc:
        print(f"streamfold: {where}{type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except _InputError as exc:
        print(f"streamfold: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


def _proxy(arguments: argparse.Namespace) -> None:
    """``streamfold proxy``: serve the rewriting proxy until stopped."""
    from pipeline._extras import needs_extra

    with needs_extra("server", "streamfold proxy"):
        import httpx

        from pipeline.proxy.app import serve

        serve(
            upstream=arguments.upstream,
            host=arguments.host,
            port=arguments.port,
            tool_format=arguments.tool_format,
            unknown_tools=arguments.unknown_tools,
            workers=arguments.workers,
            graceful_shutdown=arguments.graceful_shutdown,
            access_log=arguments.access_log,
            log_level=arguments.log_level,
            timeout_keep_alive=arguments.keep_alive,
            timeout=httpx.Timeout(arguments.read_timeout, connect=arguments.connect_timeout, pool=60.0),
            max_connections=arguments.max_connections,
            max_request_bytes=arguments.max_request_bytes,
            max_response_bytes=arguments.max_response_bytes,
            max_event_size=arguments.max_event_size,
            reasoning_tags=arguments.reasoning_tags,
        )


def _formats(arguments: argparse.Namespace) -> None:
    """``streamfold formats``: the registry's names, as a table or JSON."""
    from pipeline.cli.formats import render_formats

    sys.stdout.write(render_formats(as_json=arguments.json))


async def _paced(pieces: Sequence[Any], speed: float, failure: Exception | None = None) -> AsyncIterator[Any]:
    """The pieces at ``speed`` a second; then ``failure`` is raised, if any (after what came before)."""
    for piece in pieces:
        if speed > 0:
            await anyio.sleep(1 / speed)
        yield piece
    if failure is not None:
        raise failure


def _sse_event_pieces(data: bytes) -> list[bytes]:
    """Split SSE bytes at event boundaries, so pacing follows the provider's events."""
    pieces = data.split(b"\n\n")
    return [piece + b"\n\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _InputError(f"{path}: {exc.strerror or exc}") from None


def _text_deltas(data: bytes, step: int) -> tuple[list[str], StreamDecodeError | None]:
    """The text in ``step``-character deltas; bytes that are not UTF-8 end it with an error (the text
    before them is still replayed)."""
    failure = None
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        text = data[: exc.start].decode()
        failure = StreamDecodeError(
            f"the text is not valid UTF-8: byte 0x{data[exc.start]:02x} at byte offset {exc.start}",
            offset=exc.start,
        )
    return [text[i : i + step] for i in range(0, len(text), step)], failure


def _source(
    path: Path, *, provider: str, speed: float, chunk_size: int | None
) -> tuple[AsyncIterator[Any], str]:
    data = _read(path)
    if path.suffix == ".json":
        items, provider = json_items(data, provider)
        return _paced(items, speed), provider
    if provider == "text" or (path.suffix == ".txt" and provider == "auto"):
        deltas, failure = _text_deltas(data, chunk_size or _TEXT_DELTA_SIZE)
        return _paced(deltas, speed, failure), "text"
    return _paced(_pieces(data, path.suffix, chunk_size), speed), provider


def _pieces(data: bytes, suffix: str, chunk_size: int | None) -> list[bytes]:
    """A recorded stream cut into the reads that replay it: ``chunk_size`` bytes each, else one line of a
    ``.jsonl`` file or one SSE event each."""
    if chunk_size:
        return [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
    if suffix == ".jsonl":
        return data.splitlines(keepends=True)
    return _sse_event_pieces(data)


async def _run(
    source: AsyncIterator[Any],
    out: IO[str],
    *,
    provider: str,
    tool_format: str,
    output: str,
    plain: bool = False,
    reasoning_tags: str | None = None,
    start_in_reasoning: bool | None = None,
) -> None:
    from pipeline.compose import process

    if output == "openai-sse":
        await _openai_sse(
            source,
            out,
            provider=provider,
            tool_format=tool_format,
            reasoning_tags=reasoning_tags,
            start_in_reasoning=start_in_reasoning,
        )
        return
    # argparse checked both names (--provider's choices, --tool-format's type)
    events = process(
        source,
        provider=cast(ProviderOption, provider),
        tool_format=cast(ToolFormat, tool_format),
        reasoning_tags=reasoning_tags,
        start_in_reasoning=start_in_reasoning,
    )
    last: Any = None
    if output == "jsonl":
        async with events.stream() as items:
            async for last in items:
                out.write(encode_json(last.to_dict()).decode() + "\n")
    else:
        from pipeline.cli.render import make_renderer

        renderer = make_renderer(out, force_plain=plain)
        try:
            async with events.stream() as items:
                async for last in items:
                    renderer.feed(last)
        finally:
            renderer.close()
    if isinstance(last, ResponseEnd) and last.finish_reason is None:
        raise _truncated()


class TruncatedStreamError(StreamfoldError):
    """``replay``: the stream ended without a finish reason, cut before its end (every ``--output``
    reports it so: on stderr, exit status 1; ``openai-sse`` also writes the proxy's error event)."""


_TRUNCATED = "the upstream stream ended without a finish_reason"


def _truncated() -> TruncatedStreamError:
    return TruncatedStreamError(f"{_TRUNCATED} (truncated)")


def _error_event(message: str, code: str) -> dict[str, Any]:
    """The proxy's error event: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}


def _stream_error(exc: StreamfoldError) -> dict[str, Any]:
    """The error event the proxy sends for the same failure."""
    if isinstance(exc, ProviderError):
        upstream = exc.payload.get("error")
        if isinstance(upstream, Mapping) and upstream.get("message"):
            return {"error": {"type": "upstream_error", **upstream}}
        return _error_event(exc.message, exc.kind or "upstream_error_event")
    return _error_event(f"the upstream stream could not be read: {exc}", "invalid_upstream_response")


async def _openai_sse(
    source: AsyncIterator[Any],
    out: IO[str],
    *,
    provider: str,
    tool_format: str,
    reasoning_tags: str | None = None,
    start_in_reasoning: bool | None = None,
) -> None:
    """Re-encode the (rewritten) chunks as OpenAI Chat Completions SSE, as the proxy answers: ``[DONE]``
    after a complete response; an error event and no ``[DONE]`` after a failure or a stream that ended
    without a finish reason (then `TruncatedStreamError`: the exit status is 1)."""
    from aiostream import Stream

    from operators.encode.openai_chat import OpenAIChunkEncoder
    from pipeline.compose import to_chunks

    def write(dicts: Sequence[Mapping[str, Any]]) -> None:
        for item in dicts:
            out.write("data: " + encode_json(item).decode() + "\n\n")

    chunks: Stream[ChunkResponse] = to_chunks(source, provider=cast(ProviderOption, provider))
    if reasoning_tags is not None:
        from operators.delimiters.reasoning_tags import split_reasoning_tags

        chunks = chunks | split_reasoning_tags.pipe(
            style=reasoning_tags, start_in_reasoning=start_in_reasoning
        )
    delimiter_format = resolve_tool_format(tool_format)
    if delimiter_format is not None:
        from operators.delimiters import rewrite_delimiters

        chunks = chunks | rewrite_delimiters.pipe(delimiter_format)
    encoder = OpenAIChunkEncoder()
    try:
        async with chunks.stream() as items:
            async for chunk in items:
                write(encoder.feed(chunk))
    except StreamfoldError as exc:
        write([_stream_error(exc)])
        raise
    write(encoder.finish())
    if encoder.finish_reason is None:
        write([_error_event(_TRUNCATED, "upstream_truncated")])
        raise _truncated()
    out.write("data: [DONE]\n\n")


def _replay(arguments: argparse.Namespace) -> None:
    """``streamfold replay``: a recorded response through the pipeline."""
    source, provider = _source(
        arguments.file, provider=arguments.provider, speed=arguments.speed, chunk_size=arguments.chunk_size
    )
    run = functools.partial(
        _run,
        source,
        sys.stdout,
        provider=provider,
        tool_format=arguments.tool_format,
        output=arguments.output,
        plain=arguments.plain,
        reasoning_tags=arguments.reasoning_tags,
        start_in_reasoning=arguments.start_in_reasoning,
    )
    anyio.run(run)


def _demo(arguments: argparse.Namespace) -> None:
    """``streamfold demo``: a bundled recording, paced as it streamed."""
    name, provider = _DEMO_STREAMS[arguments.stream]
    resource = resources.files("pipeline.cli") / "demo" / name
    pieces = _sse_event_pieces(resource.read_bytes())
    run = functools.partial(
        _run,
        _paced(pieces, arguments.speed),
        sys.stdout,
        provider=provider,
        tool_format=NO_REWRITE,
        output="pretty",
        plain=arguments.plain,
    )
    anyio.run(run)


def _serve_token(arguments: argparse.Namespace) -> str | None:
    """The ``serve`` command's token (``--token``, else ``$STREAMFOLD_SERVE_TOKEN``), or None; without one
    only a loopback ``--host`` is allowed (every other client would be refused)."""
    from pipeline.cli.serve import TOKEN_ENV, is_loopback_host

    token: str | None = arguments.token or os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback_host(arguments.host):
        raise _InputError(
            f"serve: --host {arguments.host} is not a loopback address; without a token only clients on"
            f" this machine are served: pass --token TOKEN (or set {TOKEN_ENV}) to serve others"
        )
    return token


def serve_app(arguments: argparse.Namespace) -> Any:
    """The ``serve`` command's app for its parsed arguments (a usage error raises ``_InputError``)."""
    from pipeline.cli.serve import create_serve_app, recorded_source, upstream_source
    from pipeline.proxy._shared import shown_url

    token = _serve_token(arguments)

    chosen = [name for name, given in (("FILE", arguments.file), ("--demo", arguments.demo)) if given]
    if arguments.upstream:
        chosen.append("--upstream")
    if len(chosen) > 1:
        raise _InputError(f"serve: give one of FILE, --demo, --upstream, not {' and '.join(chosen)}")
    if arguments.upstream:
        return create_serve_app(
            upstream_source(arguments.upstream, model=arguments.model, tool_format=arguments.tool_format),
            mode="upstream",
            label=f"{arguments.model} at {shown_url(arguments.upstream)}",  # the page shows it
            token=token,
        )
    if arguments.file is not None:
        path: Path = arguments.file
        _read(path)  # a missing file is a usage error now, not a failed response later

        def read_file() -> tuple[AsyncIterator[Any], str]:
            return _source(path, provider=arguments.provider, speed=arguments.speed, chunk_size=None)

        return create_serve_app(
            recorded_source(read_file, tool_format=arguments.tool_format),
            mode="file",
            label=path.name,
            token=token,
        )
    name, provider = _DEMO_STREAMS[arguments.stream]

    def read_demo() -> tuple[AsyncIterator[Any], str]:
        resource = resources.files("pipeline.cli") / "demo" / name
        return _paced(_sse_event_pieces(resource.read_bytes()), arguments.speed), provider

    return create_serve_app(
        recorded_source(read_demo), mode="demo", label=f"demo: {arguments.stream}", token=token
    )


def _serve(arguments: argparse.Namespace) -> None:
    from pipeline._extras import needs_extra

    with needs_extra("server", "streamfold serve"):
        from pipeline.cli.serve import run

        app = serve_app(arguments)
        run(app, host=arguments.host, port=arguments.port, token=_serve_token(arguments))


_COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "demo": _demo,
    "replay": _replay,
    "proxy": _proxy,
    "serve": _serve,
    "formats": _formats,
}
"""Each subcommand -> what runs it."""


if __name__ == "__main__":
    raise SystemExit(main())
