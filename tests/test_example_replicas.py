"""examples/replicas: one producer process and two web replicas (real processes) on a real Redis; a
browser tab reads through a round-robin balancer, the replica serving it is killed mid-stream, and the
tab reconnects (Last-Event-ID) to the other one and continues without a gap."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from tests.browser import chromium
from tests.pipeline.fanout.test_serve_page import READ_VIEW, expected_view
from tests.servers import RedisServer, free_port, redis_server
from tests.test_examples import load

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parent.parent
GUARD = 90


@asynccontextmanager
async def started(argv: list[str], ready: bytes, env: dict[str, str]) -> AsyncIterator[Process]:
    """A process whose output (stdout and stderr merged) shows ``ready``; killed at the end if alive."""
    process = await anyio.open_process(
        argv, env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT, stderr=subprocess.STDOUT
    )
    try:
        assert process.stdout is not None
        seen = bytearray()
        with anyio.fail_after(60):
            async for piece in process.stdout:
                seen += piece
                if ready in seen:
                    break
        assert ready in seen, bytes(seen).decode(errors="replace")
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await process.aclose()


def replica(port: int, redis: str, name: str) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [sys.executable, "-m", "uvicorn", "examples.replicas.web:app", "--host", "127.0.0.1"]
    return (
        [*argv, "--port", str(port), "--log-level", "info", "--no-access-log"],
        b"Uvicorn running on",
        {"STREAMFOLD_REDIS_URL": redis, "REPLICA_NAME": name},
    )


async def test_a_tab_moves_to_the_other_replica_without_a_gap(redis_server: RedisServer) -> None:
    ports = [free_port(), free_port()]
    backends = [f"127.0.0.1:{port}" for port in ports]
    balancer = load("replicas/balancer").Balancer(backends)
    want = await expected_view("coding-agent")
    producer = [sys.executable, "examples/replicas/producer.py", "--redis", redis_server.url]
    async with (
        started(*replica(ports[0], redis_server.url, "a")) as replica_a,
        started(*replica(ports[1], redis_server.url, "b")) as replica_b,
        await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as listener,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(listener.serve, balancer.handle)
        address = listener.extra(anyio.abc.SocketAttribute.local_address)
        async with (
            started([*producer, "--response-id", "tab-test", "--pace", "0.03"], b"started tab-test", {}),
            chromium() as browser,
        ):
            page = await browser.new_page()
            with anyio.fail_after(GUARD):
                await page.navigate(f"http://127.0.0.1:{address[1]}/?response=tab-test")
                seen = await page.evaluate("window.streamfoldSeen(20)")
                serving_tab = balancer.serving(b"/events")
                assert len(serving_tab) == 1
                victim = replica_a if serving_tab[0] == backends[0] else replica_b
                victim.kill()  # the replica holding the tab's stream dies mid-stream
                view = await page.evaluate(READ_VIEW)
        tasks.cancel_scope.cancel()
    assert seen < 150  # it was mid-stream
    survivor = backends[1] if serving_tab[0] == backends[0] else backends[0]
    assert balancer.serving(b"/events") == [serving_tab[0], survivor]
    assert view["state"] == "done"
    assert view["badge"] == "done (reconnected 1x)"
    assert "reconnected; resumed after event" in view["log"]
    assert [{"type": s["type"], "body": s["body"]} for s in view["segments"]] == want["segments"]
    assert [text.split(": ", 1)[1].split("(")[0] for text in view["invocations"]] == want["invocations"]
