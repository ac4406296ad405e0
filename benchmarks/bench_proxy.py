"""``streamfold proxy`` under load: concurrent streams through the proxy on one core, and the latency it adds.

Run: ``python -m benchmarks.bench_proxy`` (``--quick`` for a short run; ``--streams 1 10 50``;
``--sections latency throughput routes``).

Three processes on the two cores: the proxy alone on core 0 (``os.sched_setaffinity``), the fake upstream
and the client on core 1. The upstream is a Kimi-K2 model server in miniature: each stream is one chat
completion whose text chunks carry the upstream's send time (``CLOCK_MONOTONIC``, shared by every process)
as ``t<ns>,`` pieces: a fifth as prose, then a tool call section whose JSON argument string streams the
rest, so the proxy's rewriter moves every later piece into ``tool_calls`` deltas. The client (raw httpx,
so that its own cost stays small) notes when each piece arrives.

- **latency**: the upstream paces each stream at one chunk per ``--interval`` ms (a model at ~50 tokens/s);
  for every piece, client receive time minus upstream send time, direct (client to upstream) and through
  the proxy; the difference of the two percentiles is what the proxy adds (a second loopback hop, HTTP
  parsing and writing, decoding, rewriting, encoding).
- **throughput**: the upstream sends as fast as it can; chunks per second through the proxy, and "per
  core", the chunks per second that the proxy's CPU time per chunk allows on one core (the upstream and
  the client share the other core, and may be what limits the first figure).
- **routes**: the same streams through ``/v1/responses`` and ``/v1/messages`` (translated to the same Chat
  upstream), with the proxy's CPU per chunk beside the Chat route's.

Every row also gives the proxy's CPU time per chunk and the share of core 0 that other processes took
meanwhile (from ``/proc``): on a shared machine, a row where others took the proxy's core is not a
measure of the proxy.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

PROXY_CPU = 0
SECTIONS = ("latency", "throughput", "routes")
OTHERS_CPU = 1
_STAMP = re.compile(rb"t(\d+),")


# --- the fake upstream (a raw ASGI app: its own cost must stay small) -------------------------------------


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1735689600,
        "model": "kimi-k2-bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


_HEAD = _event(_chunk({"role": "assistant", "content": ""}))
_OPEN_CALL = _event(
    _chunk(
        {
            "content": "<|tool_calls_section_begin|><|tool_call_begin|>functions.log:0"
            '<|tool_call_argument_begin|>{"lines": "'
        }
    )
)
_CLOSE_CALL = _event(_chunk({"content": '"}<|tool_call_end|><|tool_calls_section_end|>'}))
_TAIL = (
    _event(_chunk({}, "stop"))
    + _event(
        {
            **_chunk({}),
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }
    )
    + b"data: [DONE]\n\n"
)
_TEXT_PREFIX = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1735689600,'
_TEXT_PREFIX += b'"model":"kimi-k2-bench","choices":[{"index":0,"delta":{"content":"t'
_TEXT_SUFFIX = b',"},"finish_reason":null}]}\n\n'


async def upstream_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``POST /v1/chat/completions``: ``x-bench-chunks`` chunks, one per ``x-bench-interval-ms`` (headers,
    which every route of the proxy forwards)."""
    import anyio

    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    json.loads(b"".join(parts))  # read like a server would, not used
    headers_in = dict(scope["headers"])
    count = int(headers_in[b"x-bench-chunks"])
    interval = float(headers_in[b"x-bench-interval-ms"]) / 1000
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": _HEAD, "more_body": True})
    prose = count // 5
    for number in range(count):
        if interval:
            await anyio.sleep(interval)
        if number == prose:
            await send({"type": "http.response.body", "body": _OPEN_CALL, "more_body": True})
        body = _TEXT_PREFIX + str(time.monotonic_ns()).encode() + _TEXT_SUFFIX
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": _CLOSE_CALL + _TAIL, "more_body": False})


# --- processes --------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _serve(role: str, port: int, upstream: str | None) -> None:
    """Child process: pin to a core and serve the upstream or the proxy until killed."""
    import uvicorn

    os.sched_setaffinity(0, {PROXY_CPU if role == "proxy" else OTHERS_CPU})
    if role == "proxy":
        from pipeline.proxy.app import serve

        assert upstream is not None
        serve(upstream=upstream, port=port, tool_format="kimi_k2", log_level="warning", access_log=False)
    else:
        # the same upstream whatever is installed (uvicorn would pick uvloop and httptools when present)
        uvicorn.run(
            upstream_app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            access_log=False,
            loop="asyncio",
            http="h11",
        )


def _start(role: str, upstream: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    command = [sys.executable, "-m", "benchmarks.bench_proxy", "--serve", role, "--port", str(port)]
    if upstream:
        command += ["--upstream", upstream]
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the {role} did not start on port {port}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the client -------------------------------------------------------------------------------------------


_SCHEMA: dict[str, Any] = {"type": "object"}
ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/v1/chat/completions",
        {
            "model": "kimi-k2-bench",
            "messages": [{"role": "user", "content": "go"}],
            # with tools (tool_choice auto) the proxy rewrites, as a model server parses calls only then
            "tools": [{"type": "function", "function": {"name": "log", "parameters": _SCHEMA}}],
            "stream": True,
        },
    ),
    "responses": (
        "/v1/responses",
        {
            "model": "kimi-k2-bench",
            "input": "go",
            "tools": [{"type": "function", "name": "log", "parameters": _SCHEMA}],
            "stream": True,
        },
    ),
    "messages": (
        "/v1/messages",
        {
            "model": "kimi-k2-bench",
            "max_tokens": 4096,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": "log", "input_schema": _SCHEMA}],
            "stream": True,
        },
    ),
}
"""Each route's streamed request (the upstream gets the Chat request the proxy translates it to)."""
_WHOLE_EVENTS = (b".done", b"response.completed")
"""Responses events that repeat the text so far (its pieces are counted once, in the delta events)."""


async def _one_stream(
    client: Any, url: str, chunks: int, interval_ms: float, delays: list[int], route: str = "chat"
) -> int:
    """One streamed request; appends each piece's delay (ns) to ``delays``; returns the pieces seen."""
    path, body = ROUTES[route]
    headers = {"x-bench-chunks": str(chunks), "x-bench-interval-ms": str(interval_ms)}
    seen = 0
    async with client.stream("POST", url + path, json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            now = time.monotonic_ns()
            data = line.encode()
            if any(marker in data for marker in _WHOLE_EVENTS):
                continue
            for stamp in _STAMP.findall(data):
                delays.append(now - int(stamp))
                seen += 1
    return seen


async def _run(
    url: str, streams: int, chunks: int, interval_ms: float, route: str = "chat"
) -> tuple[list[int], float, int]:
    """``streams`` concurrent streams; returns the delays, the wall time and the pieces received."""
    import anyio
    import httpx

    delays: list[int] = []
    counts: list[int] = []
    limits = httpx.Limits(max_connections=streams + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one() -> None:
            counts.append(await _one_stream(client, url, chunks, interval_ms, delays, route))

        start = time.monotonic()
        async with anyio.create_task_group() as tasks:
            for _ in range(streams):
                tasks.start_soon(one)
        elapsed = time.monotonic() - start
    expected = streams * chunks
    if sum(counts) != expected:
        raise AssertionError(f"received {sum(counts)} pieces of {expected}")
    return delays, elapsed, sum(counts)


def _core_busy(cpu: int) -> float:
    """Busy seconds of core ``cpu`` since boot (everything but idle and iowait), from /proc/stat."""
    with open("/proc/stat") as stat:
        for line in stat:
            if line.startswith(f"cpu{cpu} "):
                ticks = [int(field) for field in line.split()[1:]]
                return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"no cpu{cpu} in /proc/stat")


class _ProxyCore:
    """The proxy's CPU time during a block, and the share of its core that other processes took."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.proxy = 0.0
        self.others_share = 0.0

    def __enter__(self) -> _ProxyCore:
        self._start = (time.monotonic(), _cpu_seconds(self.pid), _core_busy(PROXY_CPU))
        return self

    def __exit__(self, *exc: object) -> None:
        wall, proxy, busy = self._start
        self.proxy = _cpu_seconds(self.pid) - proxy
        others = _core_busy(PROXY_CPU) - busy - self.proxy
        self.others_share = max(0.0, others) / (time.monotonic() - wall)


def _percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1e6


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--chunks", type=int, default=400, help="chunks per paced stream")
    parser.add_argument("--interval", type=float, default=20.0, help="ms between chunks of a paced stream")
    parser.add_argument("--burst-chunks", type=int, default=40000, help="chunks per row, unpaced")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="the tables to measure"
    )
    parser.add_argument(
        "--route-streams", type=int, default=10, help="concurrent streams of the routes table"
    )
    parser.add_argument("--serve", choices=("upstream", "proxy"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.serve:
        _serve(arguments.serve, arguments.port, arguments.upstream)
        return
    if arguments.quick:
        arguments.chunks, arguments.burst_chunks = 100, 10000

    import anyio

    os.sched_setaffinity(0, {OTHERS_CPU})
    upstream, upstream_url = _start("upstream")
    proxy, proxy_url = _start("proxy", upstream_url)
    try:
        print(f"proxy: {_http_stack()}")
        for route in ROUTES:  # warm up both servers and the connection pools
            anyio.run(_run, proxy_url, 1, 20, 0.0, route)
        if "latency" in arguments.sections:
            _latency(arguments, proxy.pid, proxy_url, upstream_url)
        if "throughput" in arguments.sections:
            _throughput(arguments, proxy.pid, proxy_url)
        if "routes" in arguments.sections:
            _routes(arguments, proxy.pid, proxy_url)
    finally:
        for process in (proxy, upstream):
            process.terminate()
            process.wait(timeout=10)


def _http_stack() -> str:
    """What uvicorn serves the proxy with here (it takes uvloop and httptools when they are installed), and
    the proxy's upstream transport (aiohttp when installed, else httpx's own, on h11)."""
    from importlib.util import find_spec

    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    http = "httptools" if find_spec("httptools") else "h11"
    upstream = "aiohttp (llhttp)" if find_spec("aiohttp") else "h11"
    return f"uvicorn, {loop} loop, {http}; upstream client httpx on {upstream}"


def _latency(arguments: argparse.Namespace, pid: int, proxy_url: str, upstream_url: str) -> None:
    """Paced Chat streams, direct and through the proxy: the latency the proxy adds."""
    import anyio

    print(f"latency: {arguments.chunks} chunks per stream, one every {arguments.interval:g} ms")
    columns = ("direct p50", "direct p99", "proxy p50", "proxy p99", "added p50", "added p99")
    print(
        f"{'streams':>7} | "
        + " | ".join(f"{column:>10}" for column in columns)
        + " | CPU µs/chunk | others on core 0"
    )
    for streams in arguments.streams:
        direct, _, _ = anyio.run(_run, upstream_url, streams, arguments.chunks, arguments.interval)
        with _ProxyCore(pid) as load:
            through, _, received = anyio.run(_run, proxy_url, streams, arguments.chunks, arguments.interval)
        d50, d99 = _percentile(direct, 0.5), _percentile(direct, 0.99)
        p50, p99 = _percentile(through, 0.5), _percentile(through, 0.99)
        row = (d50, d99, p50, p99, p50 - d50, p99 - d99)
        print(
            f"{streams:>7} | "
            + " | ".join(f"{value:>10.3f}" for value in row)
            + f" | {load.proxy / received * 1e6:>12.0f} | {load.others_share:>15.0%}"
        )
    print()


def _throughput(arguments: argparse.Namespace, pid: int, proxy_url: str) -> None:
    """Unpaced Chat streams: chunks per second through the proxy."""
    import anyio

    print(f"throughput: as fast as the upstream sends ({arguments.burst_chunks} chunks in all per row)")
    print(f"{'streams':>7} | {'chunks/s':>9} | {'CPU µs/chunk':>12} | {'per core':>9} | others on core 0")
    for streams in arguments.streams:
        chunks = max(50, arguments.burst_chunks // streams)
        with _ProxyCore(pid) as load:
            _, elapsed, received = anyio.run(_run, proxy_url, streams, chunks, 0.0)
        cost = load.proxy / received
        print(
            f"{streams:>7} | {received / elapsed:>9.0f} | {cost * 1e6:>12.1f} | {1 / cost:>9.0f} | "
            f"{load.others_share:>15.0%}"
        )
    print()


def _routes(arguments: argparse.Namespace, pid: int, proxy_url: str) -> None:
    """The same streams through each front door: the proxy's CPU per chunk, paced and unpaced."""
    import anyio

    streams = arguments.route_streams
    print(
        f"routes: {streams} streams, paced ({arguments.chunks} chunks, one every {arguments.interval:g} ms) "
        f"and unpaced ({arguments.burst_chunks} chunks in all)"
    )
    print(
        f"{'route':>9} | {'paced CPU µs/chunk':>18} | {'unpaced chunks/s':>16} | "
        f"{'unpaced CPU µs/chunk':>20} | x chat (paced, unpaced) | others on core 0"
    )
    chat: tuple[float, float] | None = None
    for route in ROUTES:
        with _ProxyCore(pid) as paced:
            _, _, received = anyio.run(_run, proxy_url, streams, arguments.chunks, arguments.interval, route)
        paced_cost = paced.proxy / received * 1e6
        with _ProxyCore(pid) as unpaced:
            _, elapsed, burst = anyio.run(
                _run, proxy_url, streams, max(50, arguments.burst_chunks // streams), 0.0, route
            )
        unpaced_cost = unpaced.proxy / burst * 1e6
        chat = chat or (paced_cost, unpaced_cost)
        ratios = f"{paced_cost / chat[0]:.2f}, {unpaced_cost / chat[1]:.2f}"
        others = max(paced.others_share, unpaced.others_share)
        print(
            f"{route:>9} | {paced_cost:>18.0f} | {burst / elapsed:>16.0f} | {unpaced_cost:>20.1f} "
            f"| {ratios:>23} | {others:>15.0%}"
        )
    print()


if __name__ == "__main__":
    main()
