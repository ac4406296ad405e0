"""The tool gate: side-effecting tools start only after a ``stop`` / ``tool_calls`` finish (vercel/ai#19063);
the calls of a response that ends any other way are ``not_run``, saying why. Overlap and order are proven
with events and ``wait_all_tasks_blocked``; ``fail_after`` is only a hang guard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from pipeline.agent import ToolOutput, ToolRegistry, run_tools
from pipeline.compose import process
from pipeline.errors import ConfigurationError, ProviderError
from pipeline.models import PipelineEvent, ResponseEnd
from tests.agent_runs import END, call, collect, items
from tests.conftest import FIXTURES
from tests.guards import GUARD

PARALLEL = FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse"
ADD, MULTIPLY = "toolu_01UYxUYC2zRPY8wiutnF48eP", "toolu_01VaRx1jpWCvPhi7L4kywAcd"


def not_run(call_id: str, name: str, why: str) -> ToolOutput:
    return ToolOutput(call_id=call_id, name=name, status="not_run", output=f"not run: {why}")


def ending(stop_reason: str) -> bytes:
    """The recording (``add`` then ``multiply``, both complete) with another ``stop_reason``."""
    data = PARALLEL.read_bytes()
    assert data.count(b'"stop_reason":"tool_use"') == 1
    return data.replace(b'"stop_reason":"tool_use"', f'"stop_reason":"{stop_reason}"'.encode())


def arithmetic(ran: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool  # side effects: the default gate, after a safe finish
    async def add(a: int, b: int) -> int:
        ran.append("add")
        return a + b

    @tools.tool(read_only=True)  # eager
    async def multiply(a: int, b: int) -> int:
        ran.append("multiply")
        return a * b

    return tools


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"), [("max_tokens", "length"), ("refusal", "content_filter")]
)
async def test_a_complete_side_effecting_call_is_not_run_when_the_response_ends_unsafely(
    stop_reason: str, finish_reason: str
) -> None:
    ran: list[str] = []
    got = await collect(process(ending(stop_reason), provider="anthropic"), arithmetic(ran))
    assert ran == ["multiply"]  # the read-only tool ran eagerly; its output stands
    end = next(item for item in got if isinstance(item, ResponseEnd))
    assert end.finish_reason == finish_reason
    why = f"the response ended with finish_reason {finish_reason!r}, not stop or tool_calls"
    declined = not_run(ADD, "add", why)
    outputs = sorted((item for item in got if isinstance(item, ToolOutput)), key=lambda o: o.name)
    assert outputs == [declined, ToolOutput(call_id=MULTIPLY, name="multiply", output=6)]
    assert got.index(declined) == got.index(end) + 1  # answered as soon as the finish is known


@pytest.mark.anyio
async def test_after_a_safe_finish_the_held_call_runs() -> None:
    ran: list[str] = []
    got = await collect(process(PARALLEL.read_bytes(), provider="anthropic"), arithmetic(ran))
    assert ran == ["multiply", "add"]
    end = next(item for item in got if isinstance(item, ResponseEnd))
    assert end.finish_reason == "tool_calls"
    added = ToolOutput(call_id=ADD, name="add", output=5)
    assert got.index(end) < got.index(added)


def write_and_send(log: list[str]) -> ToolRegistry:
    """Two side-effecting tools that log their calls: ``write`` held until the finish (the default),
    ``send`` eager (started as folded: the caller takes the risk)."""
    tools = ToolRegistry()

    @tools.tool
    async def write(label: str) -> str:
        log.append(f"write {label}")
        return label

    @tools.tool(start="eager")
    async def send(label: str) -> str:
        log.append(f"send {label}")
        return label

    return tools


@pytest.mark.anyio
async def test_a_side_effecting_tool_starts_only_once_the_response_has_ended() -> None:
    log: list[str] = []
    tools = write_and_send(log)

    @tools.tool(read_only=True, start="after_finish")  # read-only, but held
    async def look(label: str) -> str:
        log.append(f"look {label}")
        return label

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("s", "send", label="S")
        await anyio.wait_all_tasks_blocked()
        yield call("w", "write", label="W")
        yield call("l", "look", label="L")
        await anyio.wait_all_tasks_blocked()
        log.append("end")
        yield END

    got = await collect(response(), tools)
    assert log[:2] == ["send S", "end"]
    assert sorted(log[2:]) == ["look L", "write W"]
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert outputs[0] == ToolOutput(call_id="s", name="send", output="S")
    assert got.index(END) < got.index(outputs[1])
    assert sorted(outputs[1:], key=lambda output: output.call_id) == [
        ToolOutput(call_id="l", name="look", output="L"),
        ToolOutput(call_id="w", name="write", output="W"),
    ]


@pytest.mark.anyio
async def test_held_side_effecting_calls_keep_their_call_order_with_eager_ones() -> None:
    log: list[str] = []
    tools = write_and_send(log)

    # The eager side-effecting call after a held one waits for it: one at a time, in call order.
    got = await collect(items(call("w", "write", label="W"), call("s", "send", label="S"), END), tools)
    assert log == ["write W", "send S"]
    assert got == [
        call("w", "write", label="W"),
        call("s", "send", label="S"),
        END,
        ToolOutput(call_id="w", name="write", output="W"),
        ToolOutput(call_id="s", name="send", output="S"),
    ]
    # Declined, the held call no longer holds the next one back.
    log.clear()
    length = ResponseEnd(finish_reason="length")
    got = await collect(items(call("w", "write", label="W"), call("s", "send", label="S"), length), tools)
    assert log == ["send S"]
    assert got == [
        call("w", "write", label="W"),
        call("s", "send", label="S"),
        length,
        not_run("w", "write", "the response ended with finish_reason 'length', not stop or tool_calls"),
        ToolOutput(call_id="s", name="send", output="S"),
    ]


@pytest.mark.anyio
async def test_a_response_that_does_not_say_how_it_ended_runs_no_held_call() -> None:
    ran: list[str] = []
    tools = arithmetic(ran)
    unsaid = ResponseEnd()
    got = await collect(items(call("a", "add", a=1, b=2), unsaid), tools)
    assert got == [
        call("a", "add", a=1, b=2),
        unsaid,
        not_run("a", "add", "the response ended without a finish_reason"),
    ]
    got = await collect(items(call("a", "add", a=1, b=2)), tools)
    assert got == [
        call("a", "add", a=1, b=2),
        not_run("a", "add", "the response's events ended without a ResponseEnd"),
    ]
    assert ran == []


@pytest.mark.anyio
@pytest.mark.parametrize("on_failure", ["finish", "cancel"])
async def test_a_held_call_of_a_failed_response_is_not_run(on_failure: str) -> None:
    ran: list[str] = []

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("a", "add", a=1, b=2)
        await anyio.wait_all_tasks_blocked()
        raise ProviderError("overloaded", kind="overloaded_error")

    got: list[Any] = []

    async def drain() -> None:
        with anyio.fail_after(GUARD):
            async with run_tools(response(), arithmetic(ran), on_failure=on_failure) as run:  # type: ignore[arg-type]
                async for item in run:
                    got.append(item)

    with pytest.raises(ProviderError, match="overloaded"):
        await drain()
    assert ran == []
    assert got == [
        call("a", "add", a=1, b=2),
        not_run("a", "add", "the response failed before this call's turn"),
    ]


def test_the_gate_follows_read_only_unless_given() -> None:
    tools = ToolRegistry()
    tools.add(lambda: None, name="reader", read_only=True)
    tools.add(lambda: None, name="writer")
    tools.add(lambda: None, name="eager_writer", start="eager")
    tools.add(lambda: None, name="held_reader", read_only=True, start="after_finish")
    assert {tool.name: tool.start for tool in tools} == {
        "reader": "eager",
        "writer": "after_finish",
        "eager_writer": "eager",
        "held_reader": "after_finish",
    }
    with pytest.raises(ConfigurationError) as error:
        tools.add(lambda: None, name="bad", start="soon")  # type: ignore[arg-type]
    assert str(error.value) == "tool 'bad': start must be one of eager, after_finish, approval; got 'soon'"
