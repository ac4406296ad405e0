"""The proxy's operations: ``--tool-format auto``, ``/health``, ``/metrics``, JSON access logs, the CLI's
flags, graceful shutdown and several workers (real proxy on 127.0.0.1; CLI runs in a subprocess)."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli.main import main
from pipeline.proxy.autodetect import AutoToolRewriter, detect_tool_format
from pipeline.proxy.rewriter import ChatStreamRewriter
from tests.conftest import FIXTURES
from tests.delimiter_cases import collect, numbered_ids, pieces_at
from tests.guards import GUARD
from tests.pipeline.proxy.test_proxy import MESSAGES, TOOLS, proxied, read_back
from tests.proxy_upstream import (
    FakeUpstream,
    Scenario,
    chat_completion,
    chat_sse,
    closed_port,
    split_bytes,
    sse_events,
)

RAW = FIXTURES / "raw_model_output"
DETECTED = [
    ("kimi_k2", "vllm-test_kimi-k2_text_then_3_parallel_tools.txt"),
    ("deepseek_v3", "vllm-test_deepseek-v3_text_then_tool.txt"),
    ("deepseek_v31", "vllm-test_deepseek-v3.1_prefix_2_tools_suffix.txt"),
    ("qwen3_coder", "vllm-test_qwen3-coder_text_then_tool_xml_params.txt"),
    ("hermes", "vllm-test_hermes_qwen_text_then_tool_call.txt"),
    ("glm45", "vllm-test_glm-4.5_text_tool_text_tool.txt"),
]


def through(tool_format: str, text: str, cuts: list[int]) -> Any:
    core = ChatStreamRewriter(tool_format, id_factory=numbered_ids)
    body = chat_sse(pieces_at(text, cuts))
    out = b"".join(core.feed(piece) for piece in split_bytes(body, [53])) + core.finish()
    chunks, errors, done = read_back(out)
    assert (errors, done) == ([], True)
    return collect(chunks)


@pytest.mark.parametrize(("tool_format", "name"), DETECTED)
@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(0, 400), max_size=10).map(sorted))
def test_auto_gives_what_the_named_format_gives_at_any_split(
    tool_format: str, name: str, cuts: list[int]
) -> None:
    text = (RAW / name).read_text()
    assert detect_tool_format(text) == tool_format
    expected = through(tool_format, text, cuts)
    assert expected.calls, "the fixture has calls"
    assert through("auto", text, cuts) == expected


def test_auto_leaves_prose_and_unknown_text_alone_and_caps_what_it_holds() -> None:
    assert detect_tool_format("the <tool_call> tag wraps a call") is None
    assert detect_tool_format("a list [TOOL", final=False) == ""  # may be [TOOL_CALLS]: wait
    assert detect_tool_format("a list [TOOL") is None
    assert detect_tool_format("<tool_call>\n" + " " * 600, final=False) is None  # past the cap
    for text in ["plain text, no calls", "x <tool_call> y", "<|tool_calls_sec"]:
        assert through("auto", text, [3, 9]).content == text
    core = AutoToolRewriter()
    from pipeline.models import ChunkResponse

    assert core.feed(ChunkResponse(content="see <tool_call>")) == []  # held: Hermes, Qwen3-Coder or GLM?
    assert core.feed(ChunkResponse(content=" " * 600)) == [
        ChunkResponse(content="see <tool_call>"),
        ChunkResponse(content=" " * 600),
    ]
    assert core.format is None


@pytest.mark.anyio
async def test_auto_through_the_proxy_streamed_and_whole() -> None:
    text = (RAW / "vllm-test_qwen3-coder_text_then_tool_xml_params.txt").read_text()
    upstream = FakeUpstream()
    upstream.add("stream", Scenario(split_bytes(chat_sse(list(text)), [40])))
    upstream.add("whole", Scenario([chat_completion(text)], media_type="application/json"))
    async with proxied(upstream, tool_format="auto") as client:
        async with client.chat.completions.stream(model="stream", messages=MESSAGES, tools=TOOLS) as events:
            streamed = await events.get_final_completion()
        whole = await client.chat.completions.create(model="whole", messages=MESSAGES, tools=TOOLS)
    for completion in (streamed, whole):
        message = completion.choices[0].message
        assert message.content == "Sure! Let me check the weather for you."
        calls = [call for call in message.tool_calls or () if call.type == "function"]
        assert [(call.function.name, json.loads(call.function.arguments)) for call in calls] == [
            ("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})
        ]


# --- /health, /metrics, access log -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_health_metrics_and_json_access_log(caplog: pytest.LogCaptureFixture) -> None:
    text = (RAW / "vllm-test_kimi-k2_text_then_3_parallel_tools.txt").read_text()
    upstream = FakeUpstream()
    upstream.add("calls", Scenario(split_bytes(chat_sse([text]), [1 << 20])))
    upstream.add("broken", Scenario([b'{"error": {"message": "no"}}'], status=503))
    caplog.set_level(logging.INFO, logger="streamfold.proxy.access")
    async with proxied(upstream) as client, httpx.AsyncClient() as http:
        base = str(client.base_url).removesuffix("/v1/")
        health = (await http.get(base + "/health")).json()
        assert (health["status"], health["streams_open"]) == ("ok", 0)
        async with client.chat.completions.stream(model="calls", messages=MESSAGES, tools=TOOLS) as events:
            completion = await events.get_final_completion()
        assert len(completion.choices[0].message.tool_calls or ()) == 3
        assert (await http.post(base + "/v1/chat/completions", json={"model": "broken"})).status_code == 503
        metrics = (await http.get(base + "/metrics")).text
    lines = set(metrics.splitlines())
    assert {
        'streamfold_proxy_requests_total{route="chat",status="200"} 1',
        'streamfold_proxy_requests_total{route="chat",status="503"} 1',
        "streamfold_proxy_streams_open 0",
        "streamfold_proxy_tool_calls_total 3",
        'streamfold_proxy_upstream_errors_total{code="upstream_status_503"} 1',
        "streamfold_proxy_added_latency_seconds_count 1",
    } <= lines
    core = ChatStreamRewriter("kimi_k2", strip_usage=True)  # the client did not ask for the usage
    written = (core.feed(chat_sse([text])) + core.finish()).count(b"\n\n")  # events, [DONE] included
    assert f"streamfold_proxy_chunks_total {written}" in lines
    records = [json.loads(record.getMessage()) for record in caplog.records if record.name.endswith("access")]
    chat = [record for record in records if record["route"] == "chat"]
    assert [(r["method"], r["path"], r["status"], r.get("model"), r.get("stream")) for r in chat] == [
        ("POST", "/v1/chat/completions", 200, "calls", True),
        ("POST", "/v1/chat/completions", 503, "broken", None),
    ]
    assert (chat[0]["tool_calls"], chat[1]["error"]) == (3, "upstream_status_503")
    assert all(record["duration_ms"] >= 0 and record["client"].startswith("127.0.0.1:") for record in chat)


# --- the CLI: flags, graceful shutdown, workers ------------------------------------------------------------


def test_help_lists_the_choices_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["proxy", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for expected in [
        "(default: kimi_k2)",
        "auto (detected per answer from the model's markers: `streamfold formats` lists them)",
        "{text,drop,refuse,allow}",
        "--workers N processes (default: 1)",
        "--graceful-shutdown SECONDS",
        "(default: 30.0)",
        "{json,plain,off}",
        "--read-timeout SECONDS between two upstream reads, not the whole stream (default: 600.0)",
        "--max-request-bytes N",
        "/v1/chat/completions, /v1/responses (OpenAI Responses) and /v1/messages (Anthropic Messages)",
        "/health and /metrics (Prometheus text) report on the proxy",
    ]:
        assert expected in out


@contextlib.asynccontextmanager
async def cli_proxy(
    upstream_url: str, *flags: str
) -> AsyncIterator[tuple[Any, int, list[bytes], anyio.Event]]:
    """``streamfold proxy`` in a subprocess; yields it, its port, its stderr so far (kept reading) and an
    event set when it logs that it is shutting down."""
    port = closed_port()
    command = [sys.executable, "-m", "pipeline.cli.main", "proxy", "--upstream", upstream_url]
    command += ["--port", str(port), *flags]
    async with await anyio.open_process(command, stderr=subprocess.PIPE) as process:
        assert process.stderr is not None
        log: list[bytes] = []
        with anyio.fail_after(GUARD):
            while b"Uvicorn running on" not in b"".join(log) and b"Started parent process" not in b"".join(
                log
            ):
                log.append(await process.stderr.receive())
        shutting_down = anyio.Event()
        drained = anyio.Event()
        async with anyio.create_task_group() as tasks:

            async def drain() -> None:
                assert process.stderr is not None
                with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                    async for data in process.stderr:
                        log.append(data)
                        if b"Shutting down" in data:
                            shutting_down.set()
                drained.set()

            tasks.start_soon(drain)
            try:
                yield process, port, log, shutting_down
            finally:
                if process.returncode is None:
                    process.kill()
                # The log is whole when the context ends: the process's exit can be seen before its last
                # lines are read (the access log line of a stream that ended just before it).
                with anyio.move_on_after(10):
                    await drained.wait()
                tasks.cancel_scope.cancel()


@pytest.mark.anyio
async def test_sigterm_lets_an_open_stream_finish_and_the_access_log_is_json() -> None:
    from tests.proxy_upstream import serving

    upstream = FakeUpstream()
    scenario = Scenario(sse_events(chat_sse(["hello", " world"])), pause_after=2)
    upstream.add("slow", scenario)
    async with (
        serving(upstream.app) as upstream_url,
        cli_proxy(upstream_url, "--graceful-shutdown", "60") as (
            process,
            port,
            log,
            shutting_down,
        ),
    ):
        body = {"model": "slow", "messages": MESSAGES, "stream": True}
        async with (
            httpx.AsyncClient(timeout=30) as http,
            http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response,
        ):
            pieces = response.aiter_bytes()
            first = await anext(pieces)
            assert b"role" in first
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(GUARD):
                await shutting_down.wait()
            scenario.release.set()
            rest = b"".join([piece async for piece in pieces])
        with anyio.fail_after(GUARD):
            assert await process.wait() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
    assert (first + rest).endswith(b"data: [DONE]\n\n")
    records = [json.loads(line) for line in b"".join(log).splitlines() if line.startswith(b"{")]
    assert [(r["path"], r["status"], r["stream"]) for r in records] == [("/v1/chat/completions", 200, True)]


@pytest.mark.anyio
async def test_graceful_shutdown_is_bounded() -> None:
    from tests.proxy_upstream import serving

    upstream = FakeUpstream()
    upstream.add("stuck", Scenario(sse_events(chat_sse(["a", "b"])), pause_after=2))
    async with (
        serving(upstream.app) as upstream_url,
        cli_proxy(upstream_url, "--graceful-shutdown", "0.2") as (
            process,
            port,
            _,
            _,
        ),
    ):
        body = {"model": "stuck", "messages": MESSAGES, "stream": True}
        async with (
            httpx.AsyncClient(timeout=30) as http,
            http.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as response,
        ):
            pieces = response.aiter_bytes()
            await anext(pieces)
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(GUARD):
                assert await process.wait() in (
                    0,
                    -signal.SIGTERM,
                )  # the stuck stream was cut after the bound


@pytest.mark.anyio
async def test_several_workers_serve_from_one_port() -> None:
    from tests.proxy_upstream import serving

    upstream = FakeUpstream()
    async with (
        serving(upstream.app) as upstream_url,
        cli_proxy(upstream_url, "--workers", "2") as (
            process,
            port,
            _,
            _,
        ),
    ):
        pids: set[int] = set()
        with anyio.fail_after(60):
            while len(pids) < 2:  # fresh connections land on either worker
                async with httpx.AsyncClient() as http:
                    try:
                        pids.add((await http.get(f"http://127.0.0.1:{port}/health")).json()["pid"])
                    except httpx.TransportError:
                        await anyio.sleep(0.05)  # a worker still starting
        assert process.pid not in pids
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(GUARD):
            await process.wait()


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_connections_to_the_workers_listener_send_without_delay(host: str) -> None:
    """The workers' shared listener gives connections whose small writes go out at once (TCP_NODELAY),
    on the plain asyncio loop as on uvloop: uvicorn's own listener leaves Nagle's algorithm on there."""
    import asyncio
    import socket

    import uvicorn

    from pipeline.proxy._serving import tcp_listener

    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    accepted: list[int] = []
    taken = anyio.Event()

    async def take(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        taken.set()

    config = uvicorn.Config("pipeline.proxy.app:app_from_environment", host=host, port=0)
    with tcp_listener(config) as listener:
        server = await asyncio.start_server(take, sock=listener)
        async with server:
            _reader, writer = await asyncio.open_connection(host, listener.getsockname()[1])
            writer.close()
            with anyio.fail_after(GUARD):
                await taken.wait()
    assert accepted == [1]
    assert listener.proto == socket.IPPROTO_TCP
