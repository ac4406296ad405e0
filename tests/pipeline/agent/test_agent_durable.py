"""Durable agent runs (pipeline.agent.durable): a worker killed with SIGKILL in the middle of a tool or of
a model stream, a second worker that takes the lease once it expires and finishes the run, and a reader
that followed the run's log across the crash and saw every entry once, in order (real redis-server and
nats-server, workers in processes of their own). Also the leases alone, and recovery in one process."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from starlette.applications import Starlette

from pipeline.agent.durable import (
    ABANDONED,
    INTERRUPTED_CALL,
    INTERRUPTED_STREAM,
    STOPPED_CALL,
    LeaseHeld,
    LeaseLost,
    run_durable,
)
from pipeline.agent.leases import Lease, MemoryLease
from pipeline.fanout.serving._log import EventLog
from pipeline.fanout.serving.memory import MemoryEventLog
from pipeline.fanout.web import serving_routes
from pipeline.models import ResponseEnd, SegmentEvent, ToolInvocation, ToolOutput
from tests.durable_worker import make_tools, next_messages, open_backend, scripted_model
from tests.guards import GUARD
from tests.proxy_upstream import serving
from tests.servers import NatsServer, RedisServer, nats_server, redis_server

__all__ = ["nats_server", "redis_server"]

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "text": "copy a.txt"}]


@pytest.fixture(params=["redis", "nats"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        return "redis", redis.url
    nats: NatsServer = request.getfixturevalue("nats_server")
    return "nats", nats.url


class Worker:
    """``tests/durable_worker.py`` in a process of its own; its stdout read line by line."""

    def __init__(self, backend: tuple[str, str], run_id: str, mode: str, workdir: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        command = [sys.executable, "-m", "tests.durable_worker", *backend, run_id, mode, str(workdir)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)

    async def line(self) -> str:
        assert self.process.stdout is not None
        with anyio.fail_after(GUARD):
            raw: bytes = await anyio.to_thread.run_sync(self.process.stdout.readline)
        return raw.decode().strip()

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no cleanup, no lease release
        self.process.wait()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.kill()
        if worker.process.stdout is not None:
            worker.process.stdout.close()


async def follow(
    log: EventLog, run_id: str, into: list[tuple[int, Any]], mid_stream: anyio.Event | None = None
) -> None:
    """A browser's view of the run: every entry from the first, live, until the terminal one.
    ``mid_stream`` is set once the first model attempt's two deltas are read."""
    async for entry in log.read(run_id):
        into.append((entry.id, "END" if entry.end else msgspec.json.decode(entry.data or b"null")))
        if len(into) == 4 and mid_stream is not None:
            mid_stream.set()


def output(call_id: str, name: str, status: Any, text: str) -> dict[str, Any]:
    return ToolOutput(call_id=call_id, name=name, status=status, output=text).to_dict()


def step_zero_model() -> list[dict[str, Any]]:
    return [
        SegmentEvent.content("t0", "Reading ").to_dict(),
        SegmentEvent.content("t0", "a.txt. ").to_dict(),
        ToolInvocation("call_read", "read_file", {"path": "a.txt"}).to_dict(),
        ToolInvocation("call_write", "write_file", {"path": "b.txt", "text": "hello"}).to_dict(),
        ResponseEnd(finish_reason="tool_calls").to_dict(),
    ]


def the_rest(write: dict[str, Any], lease: int) -> list[Any]:
    """From step 0's first RUN_MESSAGES to the end."""
    tool_messages = [
        {"role": "tool", "call_id": "call_read", "status": "ok", "output": "hello"},
        {"role": "tool", "call_id": "call_write", "status": write["status"], "output": write["output"]},
    ]
    assistant = {"role": "assistant", "text": "Reading a.txt. ", "calls": ["call_read", "call_write"]}
    return [
        {"type": "RUN_MESSAGES", "step": 0, "messages": [assistant, *tool_messages]},
        {"type": "RUN_STEP", "step": 1, "attempt": 1, "lease": lease},
        SegmentEvent.content("t1", "Done.").to_dict(),
        ResponseEnd(finish_reason="stop").to_dict(),
        {
            "type": "RUN_MESSAGES",
            "step": 1,
            "messages": [{"role": "assistant", "text": "Done.", "calls": []}],
        },
        {"type": "RUN_END", "stop_reason": "no_calls"},
        "END",
    ]


def expected(mode: str) -> list[Any]:
    start: list[Any] = [
        {"type": "RUN_START", "messages": USER},
        {"type": "RUN_STEP", "step": 0, "attempt": 1, "lease": 1},
    ]
    read = output("call_read", "read_file", "ok", "hello")
    wrote = output("call_write", "write_file", "ok", "wrote 5 characters to b.txt")
    if mode == "crash-model":
        abandoned = {ABANDONED: INTERRUPTED_STREAM, "step": 0, "attempt": 1}
        return [
            *start,
            *step_zero_model()[:2],
            ResponseEnd(metadata=abandoned).to_dict(),
            {"type": "RUN_STEP", "step": 0, "attempt": 2, "lease": 2},
            *step_zero_model(),
            read,
            wrote,
            *the_rest(wrote, 2),
        ]
    if mode == "crash-tool":
        interrupted = output("call_write", "write_file", "cancelled", INTERRUPTED_CALL)
        return [*start, *step_zero_model(), read, interrupted, *the_rest(interrupted, 2)]
    return [*start, *step_zero_model(), read, wrote, *the_rest(wrote, 2)]


def starts(items: list[Any]) -> list[tuple[str, int]]:
    return [(item["call_id"], item["lease"]) for item in items if _is_start(item)]


def _is_start(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "TOOL_STARTED"


@pytest.mark.parametrize("mode", ["crash-tool", "crash-tool-idempotent", "crash-model"])
async def test_a_run_survives_its_worker_killed(
    backend: tuple[str, str], mode: str, tmp_path: Path, workers: list[Worker]
) -> None:
    (tmp_path / "a.txt").write_text("hello")
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    log, lease = await open_backend(*backend)
    seen: list[tuple[int, Any]] = []
    async with anyio.create_task_group() as reader:
        workers.append(Worker(backend, run_id, mode, tmp_path))
        assert await workers[0].line() == "blocked"
        mid_stream = anyio.Event()
        reader.start_soon(follow, log, run_id, seen, mid_stream)
        with anyio.fail_after(GUARD):
            await mid_stream.wait()  # the model blocks after two deltas, which the worker then logs
        workers[0].kill()
        finish = "finish-idempotent" if mode.endswith("idempotent") else "finish"
        workers.append(Worker(backend, run_id, finish, tmp_path))
        assert await workers[1].line() == "done no_calls"
        reader.cancel_scope.deadline = anyio.current_time() + GUARD  # it ends with the terminal entry
    after: list[tuple[int, Any]] = []
    await follow(log, run_id, after)
    assert seen == after  # the live reader saw the log as it stands: nothing twice, nothing missing
    assert [number for number, _ in seen] == list(range(1, len(seen) + 1))
    items = [item for _, item in seen]
    assert [item for item in items if not _is_start(item)] == expected(mode)
    want_starts = {
        "crash-tool": [("call_read", 1), ("call_write", 1)],
        "crash-tool-idempotent": [("call_read", 1), ("call_write", 1), ("call_write", 2)],
        "crash-model": [("call_read", 2), ("call_write", 2)],
    }[mode]
    assert starts(items) == want_starts
    for call_id, _ in want_starts:  # a tool's start is logged before its output
        first_start = next(
            n for n, item in enumerate(items) if _is_start(item) and item["call_id"] == call_id
        )
        outputs = [n for n, item in enumerate(items) if item != "END" and item.get("call_id") == call_id]
        assert first_start < outputs[-1]
    wrote = (tmp_path / "b.txt").exists()
    assert wrote == (mode != "crash-tool")  # a non-idempotent call cut mid-way is not run again
    await log.aclose()
    await _close(lease)


async def logged_until(log: EventLog, run_id: str, done: Any = None) -> list[Any]:
    """The run's entries from the first, read live until ``done(entries)`` holds (None: to the end)."""
    items: list[Any] = []
    with anyio.fail_after(GUARD):
        async for entry in log.read(run_id):
            items.append("END" if entry.end else msgspec.json.decode(entry.data or b"null"))
            if done is not None and done(items):
                return items
    assert done is None, f"the run ended before the entries awaited: {items}"
    return items


def write_started(items: list[Any]) -> bool:
    """The read's output and the write's start are logged: the worker is inside ``write_file``."""
    read_done = any(isinstance(item, dict) and item.get("call_id") == "call_read" for item in items[4:])
    return read_done and any(_is_start(item) and item["call_id"] == "call_write" for item in items)


STOPPED_END: list[Any] = [{"type": "RUN_END", "stop_reason": "stopped"}, "END"]


@pytest.mark.parametrize("mode", ["crash-tool", "crash-model"])
async def test_a_stop_requested_from_another_process_ends_the_run_stopped(
    backend: tuple[str, str], mode: str, tmp_path: Path, workers: list[Worker]
) -> None:
    """The stop of the served routes, through the log: the worker blocked in a tool or in the model's
    stream gives the cut calls a ``cancelled`` output, ends the run ``stopped`` and returns."""
    (tmp_path / "a.txt").write_text("hello")
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    log, lease = await open_backend(*backend)
    workers.append(Worker(backend, run_id, mode, tmp_path))
    assert await workers[0].line() == "blocked"
    if mode == "crash-tool":
        await logged_until(log, run_id, write_started)
    else:
        await logged_until(log, run_id, lambda items: len(items) == 4)  # the two deltas
    await log.request_stop(run_id)
    assert await workers[0].line() == "done stopped"
    items = [item for item in await logged_until(log, run_id) if not _is_start(item)]
    start = expected("finish")[:2]
    if mode == "crash-tool":
        read = output("call_read", "read_file", "ok", "hello")
        stopped = output("call_write", "write_file", "cancelled", STOPPED_CALL)
        assert items == [*start, *step_zero_model(), read, stopped, *STOPPED_END]
    else:
        assert items == [*start, *step_zero_model()[:2], *STOPPED_END]
    status = await log.status(run_id)
    assert status is not None
    assert status.state == "stopped"
    assert not (tmp_path / "b.txt").exists()
    await log.aclose()
    await _close(lease)


async def _close(lease: Lease) -> None:
    close = getattr(lease, "aclose", None)
    if close is not None:
        await close()


# --- the leases ------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "redis", "nats"])
async def lease_store(request: pytest.FixtureRequest) -> AsyncIterator[Lease]:
    if request.param == "memory":
        yield MemoryLease()
        return
    kind = request.param
    server: Any = request.getfixturevalue(f"{kind}_server")
    log, lease = await open_backend(kind, server.url)
    await log.aclose()
    yield lease
    await _close(lease)


async def test_one_worker_holds_a_lease_until_it_expires(lease_store: Lease) -> None:
    run_id = f"lease-{uuid.uuid4().hex[:8]}"
    with anyio.fail_after(GUARD):
        first = await lease_store.acquire(run_id, "a", 0.5)
        assert first is not None
        assert await lease_store.acquire(run_id, "b", 0.5) is None
        assert await lease_store.renew(run_id, "a", first, 0.5)
        assert not await lease_store.renew(run_id, "b", first, 0.5)
        await anyio.sleep(0.8)  # let the lease expire
        second = await lease_store.acquire(run_id, "b", 5)
        assert second is not None
        assert second > first
        assert not await lease_store.renew(run_id, "a", first, 0.5)  # fenced: the old holder lost it
        await lease_store.release(run_id, "a", first)  # not the holder: nothing happens
        assert await lease_store.acquire(run_id, "c", 5) is None
        await lease_store.release(run_id, "b", second)
        assert await lease_store.acquire(run_id, "c", 5) is not None


async def test_the_redis_token_counter_expires_after_the_last_take_or_renewal(
    redis_server: RedisServer,
) -> None:
    from pipeline.agent.leases import RedisLease

    lease = RedisLease(redis_server.url, token_ttl=30)
    counter = "streamfold:{run-t}:lease-token"
    try:
        token = await lease.acquire("run-t", "a", 5)
        assert token == 1
        assert 0 < await lease.client.pttl(counter) <= 30_000
        await lease.client.pexpire(counter, 1_000)
        assert await lease.renew("run-t", "a", token, 5)
        assert 1_000 < await lease.client.pttl(counter) <= 30_000  # renewed with the lease
    finally:
        await lease.aclose()


# --- recovery in one process (the memory log) ---------------------------------------------------------


@pytest.mark.parametrize(("max_steps", "stop_reason", "turns"), [(10, "no_calls", 2), (1, "max_steps", 1)])
async def test_a_finished_run_is_returned_from_its_log_without_calling_the_model(
    tmp_path: Path, max_steps: int, stop_reason: str, turns: int
) -> None:
    (tmp_path / "a.txt").write_text("hello")
    log, lease = MemoryEventLog(), MemoryLease()
    tools = make_tools(tmp_path, block_in_write=False, idempotent=False)
    with anyio.fail_after(GUARD):
        first = await run_durable(
            "r", log, lease, scripted_model(block_mid_stream=False), USER, tools,
            next_messages=next_messages, owner="a", max_steps=max_steps,
        )  # fmt: skip
        again = await run_durable(
            "r", log, lease, _no_model, USER, tools, next_messages=next_messages, owner="b",
            max_steps=max_steps,
        )  # fmt: skip
    assert first.stop_reason == again.stop_reason == stop_reason
    assert again.messages == first.messages
    assert len(again.turns) == turns


async def _no_model(messages: list[Any]) -> Any:
    raise AssertionError("the model was called for a finished run")


class TakenLease(MemoryLease):
    """A lease another worker takes as soon as its holder first tries to renew it."""

    async def renew(self, run_id: str, owner: str, token: int, ttl: float) -> bool:
        return False


async def test_a_worker_whose_lease_is_taken_stops_writing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    log, lease = MemoryEventLog(), TakenLease()
    tools = make_tools(tmp_path, block_in_write=True, idempotent=False)  # the run would wait forever
    with anyio.fail_after(GUARD), pytest.raises(LeaseLost):
        await run_durable(
            "r", log, lease, scripted_model(block_mid_stream=False), USER, tools,
            next_messages=next_messages, owner="a", lease_ttl=0.3,
        )  # fmt: skip
    status = await log.status("r")
    assert status is not None
    assert status.state == "running"  # it did not end a run it no longer held
    written = status.last_id
    await anyio.sleep(0.3)  # a worker that lost its lease writes nothing more
    status = await log.status("r")
    assert status is not None
    assert status.last_id == written


async def test_a_second_worker_meets_a_held_lease(tmp_path: Path) -> None:
    log, lease = MemoryEventLog(), MemoryLease()
    await lease.acquire("r", "a", 30)
    tools = make_tools(tmp_path, block_in_write=False, idempotent=False)
    with pytest.raises(LeaseHeld):
        await run_durable("r", log, lease, _no_model, USER, tools, next_messages=next_messages, owner="b")


async def test_a_run_whose_worker_died_after_its_last_entry_is_ended(tmp_path: Path) -> None:
    log, lease = MemoryEventLog(), MemoryLease()
    await log.create("r")
    entries = [
        {"type": "RUN_START", "messages": USER},
        {"type": "RUN_STEP", "step": 0, "attempt": 1, "lease": 1},
        SegmentEvent.content("t1", "Done.").to_dict(),
        ResponseEnd(finish_reason="stop").to_dict(),
        {"type": "RUN_MESSAGES", "step": 0, "messages": [{"role": "assistant", "text": "Done."}]},
        {"type": "RUN_END", "stop_reason": "no_calls"},
    ]
    await log.append("r", [msgspec.json.encode(entry) for entry in entries])
    tools = make_tools(tmp_path, block_in_write=False, idempotent=False)
    run = await run_durable("r", log, lease, _no_model, USER, tools, next_messages=next_messages, owner="b")
    assert run.stop_reason == "no_calls"
    assert run.messages == [*USER, {"role": "assistant", "text": "Done."}]
    status = await log.status("r")
    assert status is not None
    assert (status.state, status.last_id) == ("done", 7)


async def test_a_failed_model_call_fails_the_run(tmp_path: Path) -> None:
    log, lease = MemoryEventLog(), MemoryLease()
    tools = make_tools(tmp_path, block_in_write=False, idempotent=False)

    async def broken(messages: list[Any]) -> AsyncIterator[Any]:
        raise RuntimeError("the provider went away")
        yield  # pragma: no cover

    with pytest.raises(RuntimeError, match="went away"):
        await run_durable("r", log, lease, broken, USER, tools, next_messages=next_messages, owner="a")
    status = await log.status("r")
    assert status is not None
    assert status.state == "failed"
    assert await lease.acquire("r", "b", 1) is not None  # the lease was let go


async def test_a_stop_posted_to_the_served_routes_stops_a_run_in_its_tool(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    log, lease = MemoryEventLog(), MemoryLease()
    tools = make_tools(tmp_path, block_in_write=True, idempotent=False)  # it would wait forever
    await log.create("r", meta={"durable": True})  # queued
    runs: list[Any] = []

    async def worker() -> None:
        model = scripted_model(block_mid_stream=False)
        run = await run_durable("r", log, lease, model, USER, tools, next_messages=next_messages, owner="a")
        runs.append(run)

    async with serving(Starlette(routes=serving_routes(log))) as url, anyio.create_task_group() as group:
        group.start_soon(worker)
        await logged_until(log, "r", write_started)
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{url}/responses/r/stop", json={})
        assert answer.status_code == 200
        group.cancel_scope.deadline = anyio.current_time() + GUARD  # the worker returns by itself
    (run,) = runs
    assert (run.stop_reason, run.messages, run.turns) == ("stopped", USER, [])
    items = [item for item in await logged_until(log, "r") if not _is_start(item)]
    read = output("call_read", "read_file", "ok", "hello")
    stopped = output("call_write", "write_file", "cancelled", STOPPED_CALL)
    assert items == [*expected("finish")[:2], *step_zero_model(), read, stopped, *STOPPED_END]
    status = await log.status("r")
    assert status is not None
    assert status.state == "stopped"
    assert not (tmp_path / "b.txt").exists()


async def test_a_run_stopped_before_a_worker_takes_it_stops_at_once(tmp_path: Path) -> None:
    log, lease = MemoryEventLog(), MemoryLease()
    await log.create("r", meta={"durable": True})  # queued, as chat_routes over DurableRuns queues it
    await log.request_stop("r")
    tools = make_tools(tmp_path, block_in_write=True, idempotent=False)
    model = scripted_model(block_mid_stream=True)  # a run that went on would block in the stream
    with anyio.fail_after(GUARD):
        run = await run_durable("r", log, lease, model, USER, tools, next_messages=next_messages, owner="a")
    assert run.stop_reason == "stopped"
    items = await logged_until(log, "r")
    assert items[0] == {"type": "RUN_START", "messages": USER}
    assert items[-2:] == STOPPED_END
    assert not any(isinstance(item, dict) and item.get("type") == "RUN_MESSAGES" for item in items)
