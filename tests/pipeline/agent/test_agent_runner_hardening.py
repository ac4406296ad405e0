"""The runner against tools that misbehave: a CancelledError of their own, a cancellation ignored, a result
that cannot be sent. No sleep synchronises anything; ``fail_after`` is only a hang guard."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pydantic
import pytest

from operators.encode import AGUIEncoder
from pipeline.agent import ToolOutput, ToolRegistry, run_tools
from pipeline.errors import ConfigurationError
from pipeline.models import PipelineEvent
from tests.agent_runs import END, call, collect, items
from tests.guards import GUARD


def split(got: list[Any]) -> tuple[list[Any], list[ToolOutput]]:
    """The response's events in order, and the outputs by call id."""
    events = [item for item in got if not isinstance(item, ToolOutput)]
    outputs = sorted((item for item in got if isinstance(item, ToolOutput)), key=lambda o: o.call_id)
    return events, outputs


@pytest.mark.anyio
async def test_a_cancelled_error_the_run_did_not_cause_is_that_tools_error_output() -> None:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def raises_cancelled() -> str:
        raise asyncio.CancelledError("made up")

    @tools.tool(read_only=True)
    async def awaits_a_cancelled_future() -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future

    @tools.tool(read_only=True)
    async def fine() -> str:
        return "fine"

    sent: list[PipelineEvent] = [
        call("a", "raises_cancelled"),
        call("b", "awaits_a_cancelled_future"),
        call("c", "fine"),
        END,
    ]
    events, outputs = split(await collect(items(*sent), tools))
    assert events == sent
    assert outputs == [
        ToolOutput(
            call_id="a",
            name="raises_cancelled",
            status="error",
            output="tool 'raises_cancelled' raised CancelledError, though the run was not cancelled",
        ),
        ToolOutput(
            call_id="b",
            name="awaits_a_cancelled_future",
            status="error",
            output="tool 'awaits_a_cancelled_future' raised CancelledError, though the run was not cancelled",
        ),
        ToolOutput(call_id="c", name="fine", output="fine"),
    ]


class Stubborn:
    """A tool that swallows its cancellation and goes on waiting, until ``release``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.ended = asyncio.Event()
        self.swallowed = 0

    async def run(self) -> str:
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.swallowed += 1
            await self.release.wait()  # as if nothing happened
        finally:
            self.ended.set()
        return "late"

    async def finish(self) -> None:
        self.release.set()
        with anyio.fail_after(GUARD):
            await self.ended.wait()


@pytest.mark.anyio
async def test_a_tool_that_swallows_its_timeout_gets_timeout_and_is_abandoned_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = ToolRegistry()
    stubborn = Stubborn()
    tools.add(stubborn.run, name="stubborn", read_only=True, timeout=0.01)

    with caplog.at_level(logging.WARNING, logger="streamfold"):
        got = await collect(items(call("a", "stubborn"), END), tools, cancel_grace=0.01)
        still_running = not stubborn.ended.is_set()
        await stubborn.finish()
    assert still_running  # the block exited while the tool went on
    assert stubborn.swallowed == 1
    assert got == [
        call("a", "stubborn"),
        END,
        ToolOutput(
            call_id="a", name="stubborn", status="timeout", output="tool 'stubborn' timed out after 0.01 s"
        ),
    ]
    assert [record.getMessage() for record in caplog.records] == [
        "tool 'stubborn' (call 'a') ignored its cancellation for 0.01 s: abandoned, still running"
    ]


@pytest.mark.anyio
async def test_leaving_the_block_while_a_tool_swallows_cancellation_exits_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tools = ToolRegistry()
    stubborn = Stubborn()
    tools.add(stubborn.run, name="stubborn", read_only=True)  # no timeout

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("a", "stubborn")
        await anyio.sleep_forever()

    with caplog.at_level(logging.WARNING, logger="streamfold"):
        with anyio.fail_after(GUARD):
            async with run_tools(response(), tools, cancel_grace=0.01) as run:
                async for item in run:
                    assert item == call("a", "stubborn")
                    await anyio.wait_all_tasks_blocked()  # the tool waits
                    break
        still_running = not stubborn.ended.is_set()
        await stubborn.finish()
    assert still_running
    assert stubborn.swallowed == 1
    assert [record.getMessage() for record in caplog.records] == [
        "tool 'stubborn' (call 'a') ignored its cancellation for 0.01 s: abandoned, still running"
    ]


@pytest.mark.anyio
async def test_the_cancel_grace_is_checked() -> None:
    bads: list[Any] = [-1, float("nan"), float("inf"), True, "1"]
    for bad in bads:
        with pytest.raises(ConfigurationError) as error:
            async with run_tools(items(), ToolRegistry(), cancel_grace=bad):
                pass
        assert str(error.value) == f"cancel_grace must be a finite number of seconds >= 0, got {bad!r}"


@pytest.mark.anyio
async def test_a_result_that_cannot_be_sent_is_an_error_output_naming_the_tool_and_the_type() -> None:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def opaque() -> Any:
        return object()

    @tools.tool(read_only=True)
    def numbers() -> Any:
        return (n for n in range(3))

    @tools.tool(read_only=True)
    async def cycle() -> Any:
        loop: list[Any] = []
        loop.append(loop)
        return loop

    @tools.tool(read_only=True)
    async def keyed() -> Any:
        return {(1, 2): "pair"}

    @tools.tool(read_only=True)
    async def plain() -> Any:
        return {"a": [1, 2.5, None, True]}

    sent = [call(name[0], name) for name in ("opaque", "numbers", "cycle", "keyed", "plain")]
    events, outputs = split(await collect(items(*sent, END), tools))
    assert events == [*sent, END]

    def cannot(call_id: str, name: str, kind: str, why: str) -> ToolOutput:
        return ToolOutput(
            call_id=call_id,
            name=name,
            status="error",
            output=f"tool {name!r} returned a {kind}, which cannot be sent to the model as JSON: {why}",
        )

    assert outputs == [
        cannot("c", "cycle", "list", "maximum recursion depth exceeded while serializing an object"),
        cannot("k", "keyed", "dict", "Only dicts with str-like or number-like keys are supported"),
        cannot("n", "numbers", "generator", "Encoding objects of type generator is unsupported"),
        cannot("o", "opaque", "object", "Encoding objects of type object is unsupported"),
        ToolOutput(call_id="p", name="plain", output={"a": [1, 2.5, None, True]}),
    ]


@pytest.mark.anyio
async def test_a_result_holding_a_lone_surrogate_goes_out_with_the_logs_escape() -> None:
    """The runner accepts it (it can be sent: escaped), so its text and the AG-UI frame escape it too."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def lone() -> Any:
        return {"note": "a\ud800b"}

    got = await collect(items(call("a", "lone"), END), tools)
    output = ToolOutput(call_id="a", name="lone", output={"note": "a\ud800b"})
    assert got == [call("a", "lone"), END, output]
    assert output.text == '{"note":"a\\ud800b"}'
    frames = [msgspec.json.decode(frame.removeprefix(b"data: ")) for frame in AGUIEncoder().feed(output)]
    assert [frame["content"] for frame in frames if frame["type"] == "TOOL_CALL_RESULT"] == [
        '{"note":"a\\ud800b"}'
    ]


class Reading(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)

    city: str
    at: datetime.date
    extra: Any = None


@pytest.mark.anyio
async def test_a_pydantic_result_is_sent_as_its_json_dump_or_is_an_error_output() -> None:
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def fine() -> Reading:
        return Reading(city="Paris", at=datetime.date(2026, 11, 27))

    @tools.tool(read_only=True)
    async def opaque() -> Reading:
        return Reading(city="Paris", at=datetime.date(2026, 11, 27), extra=object())

    _, outputs = split(await collect(items(call("f", "fine"), call("o", "opaque"), END), tools))
    assert outputs == [
        ToolOutput(call_id="f", name="fine", output={"city": "Paris", "at": "2026-11-27", "extra": None}),
        ToolOutput(
            call_id="o",
            name="opaque",
            status="error",
            output="tool 'opaque' returned a Reading, which cannot be sent to the model as JSON:"
            " Unable to serialize unknown type: <class 'object'>",
        ),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("max_buffer", [1, 64])
async def test_a_calls_approval_request_and_immediate_output_follow_it_at_once(max_buffer: int) -> None:
    """Outputs of other tools (read-only ones running meanwhile) never come between a call and what it
    gives at once: its approval request, or the output of a call that cannot run."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def read(n: int) -> int:
        return n

    @tools.tool(start="approval")
    async def delete(n: int) -> int:
        return n

    reads = [call(f"r{n}", "read", n=n) for n in range(3)]
    at_once = [call("d", "delete", n=0), call("bad", "read")]
    got = await collect(items(*reads, *at_once, END), tools, max_buffer=max_buffer)
    position = {id(item): at for at, item in enumerate(got)}
    for invocation in at_once:
        follower = got[position[id(invocation)] + 1]
        assert (type(follower).__name__, follower.call_id) in {
            ("ToolApprovalRequest", invocation.id),
            ("ToolOutput", invocation.id),
        }, [type(item).__name__ for item in got]


@pytest.mark.anyio
async def test_a_second_call_with_a_calls_id_is_not_run() -> None:
    """A hand-made source repeating a call id (`process()` renames repeated ids): the first call runs,
    the second is not run; each gets exactly one output (the run raised KeyError)."""
    ran: list[str] = []
    tools = ToolRegistry()

    @tools.tool
    async def write(path: str) -> str:
        ran.append(path)
        return "ok"

    @tools.tool(read_only=True)
    async def read(path: str) -> str:
        ran.append(path)
        return "ok"

    sent: list[PipelineEvent] = [
        call("a", "read", path="1"),
        call("a", "write", path="2"),
        call("a", "write", path="3"),
        END,
    ]
    events, outputs = split(await collect(items(*sent), tools))
    assert events == sent
    assert ran == ["1"]
    assert [(output.call_id, output.status) for output in outputs] == [
        ("a", "not_run"),
        ("a", "not_run"),
        ("a", "ok"),
    ]
    assert {output.output for output in outputs if output.status == "not_run"} == {
        "not run: another call of the response has id 'a'"
    }
