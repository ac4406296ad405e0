"""A start refused before its model is called: a full in-memory log answers 503 with ``Retry-After``;
a repeated AG-UI ``runId`` is answered from the run it names (resumed from its start), never by a
second model call. Real uvicorn; the AG-UI runs on every backend (real Redis and NATS servers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from pipeline.errors import EventLogFull, ResponseExists
from pipeline.fanout.protocols import chat_routes
from pipeline.fanout.serving._log import EventLog, Retention
from pipeline.fanout.serving.manager import ResponseManager
from pipeline.fanout.serving.memory import RETRY_AFTER_FULL, MemoryEventLog
from pipeline.fanout.web import serving_routes
from tests.guards import GUARD
from tests.pipeline.fanout.test_serving_ids import log, nats_server, redis_server
from tests.pipeline.fanout.test_serving_web import Gated
from tests.pipeline.fanout.test_ui_routes import demo_items, direct, split
from tests.pipeline.fanout.test_web import serving
from tests.serving_conformance import new_id

__all__ = ["log", "nats_server", "redis_server"]

pytestmark = pytest.mark.anyio

FULL = {
    "type": "ERROR",
    "error": "EventLogFull",
    "message": f"no room for a new response: 1 responses are running (max_responses); retry in"
    f" {RETRY_AFTER_FULL} s",
}


class Recorder:
    """A starter (the model call) that records its calls and gives ``items``."""

    def __init__(self, items: list[Any] | None = None, first: int | None = None) -> None:
        self.calls: list[Any] = []
        self.items = items or [{"n": 0}]
        self.gates: list[Gated] = []
        self.first = len(self.items) if first is None else first

    async def __call__(self, body: Any) -> Gated:
        self.calls.append(body)
        self.gates.append(Gated(self.items, self.first))
        return self.gates[-1]


async def test_the_memory_log_says_it_is_full_before_a_create() -> None:
    log = MemoryEventLog(max_responses=1)
    first, second = new_id(), new_id()
    await log.check_create(first)
    await log.create(first)
    with pytest.raises(EventLogFull, match="max_responses") as full:
        await log.check_create(second)
    assert (full.value.response_id, full.value.retry_after) == (second, RETRY_AFTER_FULL)
    with pytest.raises(EventLogFull):
        await log.create(second)
    await log.end(first)
    await log.check_create(second)  # an ended response makes room: create evicts it
    await log.create(second)


async def test_the_manager_refuses_before_making_the_source() -> None:
    made: list[str] = []

    def factory() -> Gated:
        made.append("called")
        return Gated([], 0)

    async with ResponseManager(MemoryEventLog(max_responses=1)) as manager:
        running = await manager.start(Gated([{"n": 0}], 0), response_id="taken")
        with pytest.raises(ResponseExists, match="'taken' already exists"):
            await manager.start(factory, response_id="taken")
        with pytest.raises(EventLogFull):
            await manager.start(factory)
        assert made == []
        await manager.stop(running)
        await manager.wait(await manager.start(factory))
        assert made == ["called"]


@pytest.mark.parametrize("route", ["/responses", "/api/chat", "/agent"])
async def test_a_full_memory_log_answers_503_with_retry_after_before_the_model_is_called(
    route: str,
) -> None:
    start = Recorder()
    bodies = {
        "/responses": {"source": "x"},
        "/api/chat": {"id": "chat-1", "messages": [], "trigger": "submit-message"},
        "/agent": {"threadId": "thread-1", "runId": "run-1", "messages": []},
    }
    async with ResponseManager(MemoryEventLog(max_responses=1)) as manager:
        routes = [
            *serving_routes(manager, start=start),
            *chat_routes(manager, start, path="/api/chat"),
            *chat_routes(manager, start, path="/agent", protocol="agui"),
        ]
        async with (
            serving(Starlette(routes=routes)) as address,
            httpx.AsyncClient(base_url=f"http://{address}") as client,
        ):
            running = await manager.start(Gated([{"n": 0}], 0))
            with anyio.fail_after(GUARD):
                refused = await client.post(route, json=bodies[route])
            assert (refused.status_code, refused.json()) == (503, FULL)
            assert refused.headers["retry-after"] == str(RETRY_AFTER_FULL)
            assert start.calls == []
            await manager.stop(running)
            with anyio.fail_after(GUARD):
                accepted = await client.post(route, json=bodies[route])
            assert accepted.status_code in (200, 201)
            assert start.calls == [bodies[route]]


@asynccontextmanager
async def agent(
    log: EventLog, first: int
) -> AsyncIterator[tuple[ResponseManager, httpx.AsyncClient, Recorder]]:
    """An AG-UI chat route over ``log``; its starter gives the demo's items, holding after ``first``."""
    start = Recorder(await demo_items(), first)
    async with (
        ResponseManager(log) as manager,
        serving(
            Starlette(routes=chat_routes(manager, start, path="/agent", protocol="agui", policy="block"))
        ) as address,
        httpx.AsyncClient(base_url=f"http://{address}") as client,
    ):
        yield manager, client, start


def run_input(thread: str, run: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": [], "tools": [], "context": [], "state": {}}


async def test_a_repeated_ag_ui_run_id_resumes_the_run_without_a_second_model_call(log: EventLog) -> None:
    items = await demo_items()
    thread, run = new_id(), new_id()
    async with agent(log, first=3) as (manager, client, start):
        with anyio.fail_after(GUARD):
            async with client.stream("POST", "/agent", json=run_input(thread, run)) as first:
                assert first.status_code == 200
                # the client retries while the run goes on: the same run, from its start
                async with client.stream("POST", "/agent", json=run_input(thread, run)) as retried:
                    assert retried.status_code == 200
                    assert retried.headers["x-streamfold-response-id"] == run
                    start.gates[0].release.set()
                    again = b"".join([piece async for piece in retried.aiter_bytes()])
                body = b"".join([piece async for piece in first.aiter_bytes()])
            await manager.wait(run)
            after_the_end = await client.post("/agent", json=run_input(thread, run))
    want = direct("agui", run, items, thread_id=thread)
    assert [frame for _, frame in split(body)] == want
    assert [frame for _, frame in split(again)] == want
    assert after_the_end.status_code == 200
    assert [frame for _, frame in split(after_the_end.content)] == want
    assert len(start.calls) == 1


async def test_the_run_id_of_an_expired_run_is_409_without_a_model_call() -> None:
    log = MemoryEventLog(retention=Retention(ttl_after_end=0))
    thread, run = new_id(), new_id()
    async with agent(log, first=0) as (manager, client, start):
        with anyio.fail_after(GUARD):
            async with client.stream("POST", "/agent", json=run_input(thread, run)) as first:
                start.gates[0].release.set()
                await first.aread()
            await manager.wait(run)
            assert await log.status(run) is None  # expired at once
            again = await client.post("/agent", json=run_input(thread, run))
    assert (again.status_code, again.json()) == (
        409,
        {
            "type": "ERROR",
            "error": "ResponseExists",
            "message": f"run {run!r} has ended and is no longer retained; a runId names one run",
        },
    )
    assert len(start.calls) == 1


async def test_a_run_id_repeated_in_another_thread_is_409(log: EventLog) -> None:
    run = new_id()
    async with agent(log, first=0) as (_, client, start):
        with anyio.fail_after(GUARD):
            async with client.stream("POST", "/agent", json=run_input(new_id(), run)) as first:
                assert first.status_code == 200
                start.gates[0].release.set()
                await first.aread()
            conflict = await client.post("/agent", json=run_input(new_id(), run))
    assert (conflict.status_code, conflict.json()) == (
        409,
        {
            "type": "ERROR",
            "error": "ResponseExists",
            "message": f"run {run!r} exists in another thread; a runId names one run",
        },
    )
    assert len(start.calls) == 1
