"""The approval gate: a ``start="approval"`` call asks a person (a ToolApprovalRequest right after its
invocation), runs once approved and after a safe finish, and is ``denied`` when refused or expired; the
next turn carries the denial to the model in each provider's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from pipeline.agent import (
    AgentRun,
    Approvals,
    ToolApproval,
    ToolApprovalRequest,
    ToolOutput,
    ToolRegistry,
    assistant_turn,
    run_approved,
    run_loop,
    run_tools,
)
from pipeline.compose import process
from pipeline.errors import ConfigurationError, ProviderError
from pipeline.models import PipelineEvent, ResponseEnd, ToolInvocation
from tests.agent_runs import END, call, collect, items
from tests.conftest import FIXTURES
from tests.guards import GUARD

PARALLEL = FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse"
LENGTH = ResponseEnd(finish_reason="length")
REFUSED = "denied: a person refused this call"


def request(
    call_id: str, name: str, expires_at: float | None = None, **arguments: Any
) -> ToolApprovalRequest:
    return ToolApprovalRequest(call_id=call_id, name=name, arguments=arguments, expires_at=expires_at)


def denied(call_id: str, name: str, output: str = REFUSED) -> ToolOutput:
    return ToolOutput(call_id=call_id, name=name, status="denied", output=output)


def guarded(ran: list[str]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(start="approval")
    async def delete(path: str) -> str:
        ran.append(f"delete {path}")
        return f"deleted {path}"

    @tools.tool(read_only=True)
    async def read(path: str) -> str:
        ran.append(f"read {path}")
        return f"text of {path}"

    return tools


async def decided_run(source: Any, tools: ToolRegistry, approvals: Approvals, decide: Any) -> list[Any]:
    """Every item of the run; ``decide(request)`` is called for each approval request as it comes."""
    got: list[Any] = []
    with anyio.fail_after(GUARD):
        async with run_tools(source, tools, approvals=approvals) as run:
            async for item in run:
                got.append(item)
                if isinstance(item, ToolApprovalRequest):
                    decide(item)
    return got


def strip_expiry(got: list[Any]) -> list[Any]:
    """The items with each request's ``expires_at`` checked (a wall-clock time) and set to None."""
    cleaned = []
    for item in got:
        if isinstance(item, ToolApprovalRequest):
            assert item.expires_at is not None
            item = request(item.call_id, item.name, **item.arguments)
        cleaned.append(item)
    return cleaned


def test_the_approval_gate_is_declared_on_the_tool() -> None:
    tools = ToolRegistry()
    tool = tools.add(lambda path: None, name="delete", start="approval")
    assert tool.start == "approval"
    assert request("c", "delete").approval_id == "approval_c"
    assert request("c", "delete").to_dict() == {
        "type": "TOOL_APPROVAL_REQUEST",
        "call_id": "c",
        "name": "delete",
        "arguments": {},
        "approval_id": "approval_c",
        "expires_at": None,
    }
    with pytest.raises(ConfigurationError) as error:
        Approvals(timeout=0)
    assert str(error.value) == "timeout must be a positive number of seconds or None, got 0"


@pytest.mark.anyio
async def test_an_approved_call_runs_after_the_safe_finish() -> None:
    ran: list[str] = []
    approvals = Approvals()

    def approve(item: ToolApprovalRequest) -> None:
        assert approvals.pending == {item.call_id: item}
        assert approvals.decide(item.call_id, True)
        assert not approvals.decide(item.call_id, False)  # decided once

    source = items(call("d", "delete", path="a.txt"), call("r", "read", path="b.txt"), END)
    got = await decided_run(source, guarded(ran), approvals, approve)
    got = strip_expiry(got)
    assert got[:3] == [
        call("d", "delete", path="a.txt"),
        request("d", "delete", path="a.txt"),
        call("r", "read", path="b.txt"),
    ]
    read = ToolOutput(call_id="r", name="read", output="text of b.txt")
    assert sorted(got[3:5], key=str) == sorted([read, END], key=str)  # the eager read: any time
    assert got[5:] == [ToolOutput(call_id="d", name="delete", output="deleted a.txt")]
    assert ran == ["read b.txt", "delete a.txt"]
    assert approvals.pending == {}


@pytest.mark.anyio
async def test_runs_sharing_approvals_never_share_a_decision() -> None:
    """Two runs with one ``Approvals`` and the same call id (a numbered id factory): a decision names a
    call by its id, so the second run's call is not run instead of waking with the first's decision
    (its run raised KeyError)."""
    ran: list[str] = []
    approvals = Approvals()
    with anyio.fail_after(GUARD):
        async with (
            run_tools(
                items(call("c0", "delete", path="first"), END), guarded(ran), approvals=approvals
            ) as first,
            run_tools(
                items(call("c0", "delete", path="second"), END), guarded(ran), approvals=approvals
            ) as second,
        ):
            firsts = aiter(first)
            one = [await anext(firsts), await anext(firsts)]
            other = [item async for item in second]
            assert approvals.decide("c0", True)
            one += [item async for item in firsts]
    assert strip_expiry(one) == [
        call("c0", "delete", path="first"),
        request("c0", "delete", path="first"),
        END,
        ToolOutput(call_id="c0", name="delete", output="deleted first"),
    ]
    not_run = ToolOutput(
        call_id="c0",
        name="delete",
        status="not_run",
        output="not run: another run waits for a decision on call id 'c0'",
    )
    assert other == [call("c0", "delete", path="second"), not_run, END]
    assert ran == ["delete first"]


@pytest.mark.anyio
async def test_an_approval_before_the_finish_still_waits_for_it() -> None:
    ran: list[str] = []
    approvals = Approvals()

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("d", "delete", path="a.txt")
        assert approvals.decide("d", True)  # requested before the invocation was passed on
        await anyio.wait_all_tasks_blocked()
        ran.append("end")
        yield END

    got = await decided_run(response(), guarded(ran), approvals, lambda item: None)
    assert ran == ["end", "delete a.txt"]
    assert got[-1] == ToolOutput(call_id="d", name="delete", output="deleted a.txt")


@pytest.mark.anyio
async def test_a_denied_call_is_not_run_and_says_why() -> None:
    ran: list[str] = []
    approvals = Approvals()
    reasons = iter(["not that file", None])
    got = await decided_run(
        items(call("d", "delete", path="a.txt"), call("e", "delete", path="b.txt"), END),
        guarded(ran),
        approvals,
        lambda item: approvals.decide(item.call_id, False, next(reasons)),
    )
    assert ran == []
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert outputs == [
        denied("d", "delete", "denied: not that file"),
        denied("e", "delete", REFUSED),
    ]
    assert got.index(outputs[0]) < got.index(END)  # answered as soon as it is denied


@pytest.mark.anyio
async def test_an_undecided_call_is_denied_when_its_time_is_up() -> None:
    ran: list[str] = []
    approvals = Approvals(timeout=0.05)
    got = await decided_run(
        items(call("d", "delete", path="a.txt"), END), guarded(ran), approvals, lambda item: None
    )
    assert ran == []
    assert strip_expiry(got) == [
        call("d", "delete", path="a.txt"),
        request("d", "delete", path="a.txt"),
        END,
        denied("d", "delete", "denied: no decision within 0.05 s"),
    ]
    assert not approvals.decide("d", True)  # too late
    assert approvals.pending == {}


@pytest.mark.anyio
async def test_an_unsafe_finish_runs_no_approved_call_and_stops_the_waiting() -> None:
    ran: list[str] = []
    why = "not run: the response ended with finish_reason 'length', not stop or tool_calls"
    approvals = Approvals()  # 600 s: the run must not wait for it
    got = await decided_run(
        items(call("d", "delete", path="a.txt"), call("e", "delete", path="b.txt"), LENGTH),
        guarded(ran),
        approvals,
        lambda item: item.call_id == "d" and approvals.decide("d", True),
    )
    assert ran == []
    assert [item for item in got if isinstance(item, ToolOutput)] == [
        ToolOutput(call_id="d", name="delete", status="not_run", output=why),
        ToolOutput(call_id="e", name="delete", status="not_run", output=why),
    ]
    assert approvals.pending == {}


@pytest.mark.anyio
async def test_a_failed_response_stops_the_waiting() -> None:
    approvals = Approvals()

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("d", "delete", path="a.txt")
        await anyio.wait_all_tasks_blocked()
        raise ProviderError("overloaded", kind="overloaded_error")

    got: list[Any] = []

    async def drain() -> None:
        with anyio.fail_after(GUARD):  # the 600 s wait ends with the response
            async with run_tools(response(), guarded([]), approvals=approvals) as run:
                async for item in run:
                    got.append(item)

    with pytest.raises(ProviderError):
        await drain()
    assert got[-1] == ToolOutput(
        call_id="d",
        name="delete",
        status="not_run",
        output="not run: the response failed before this call's turn",
    )


@pytest.mark.anyio
async def test_without_approvals_the_call_awaits_the_next_request() -> None:
    ran: list[str] = []
    tools = guarded(ran)
    with anyio.fail_after(GUARD):
        async with run_tools(items(call("d", "delete", path="a.txt"), END), tools) as run:
            got = [item async for item in run]
    assert got == [call("d", "delete", path="a.txt"), request("d", "delete", path="a.txt"), END]
    assert run.awaiting == {"d": request("d", "delete", path="a.txt")}
    assert ran == []
    # an unsafe finish answers it at once: nobody is asked about a call that cannot run
    got = await collect(items(call("d", "delete", path="a.txt"), LENGTH), tools)
    assert got[-1] == ToolOutput(
        call_id="d",
        name="delete",
        status="not_run",
        output="not run: the response ended with finish_reason 'length', not stop or tool_calls",
    )


@pytest.mark.anyio
async def test_the_next_request_s_decisions_run_or_deny_the_calls() -> None:
    ran: list[str] = []
    tools = guarded(ran)
    decisions = [
        ToolApproval(call_id="d", name="delete", arguments={"path": "a.txt"}, approved=True),
        ToolApproval(call_id="e", name="delete", arguments={"path": "b.txt"}, approved=False, reason="no"),
        ToolApproval(call_id="r", name="read", arguments={"path": "c.txt"}, approved=True),
        ToolApproval(call_id="u", name="format_disk", approved=True),
        ToolApproval(call_id="i", name="delete", arguments={"path": 3}, approved=True),
        ToolApproval(call_id="d", name="delete", arguments={"path": "a.txt"}, approved=True),  # again
    ]
    with anyio.fail_after(GUARD):
        outputs = [output async for output in run_approved(decisions, tools)]
    assert ran == ["delete a.txt"]
    assert outputs[:4] == [
        ToolOutput(call_id="d", name="delete", output="deleted a.txt"),
        denied("e", "delete", "denied: no"),
        denied("r", "read", "denied: tool 'read' does not run on an approval"),
        ToolOutput(
            call_id="u", name="format_disk", status="unknown_tool", output="no tool named 'format_disk'"
        ),
    ]
    assert (outputs[4].call_id, outputs[4].status) == ("i", "invalid_arguments")
    assert len(outputs) == 5  # the repeated decision ran nothing twice


@pytest.mark.anyio
async def test_run_loop_stops_at_a_call_awaiting_approval() -> None:
    calls: list[list[Any]] = []

    async def call_model(messages: list[Any]) -> AsyncIterator[PipelineEvent]:
        calls.append(messages)
        yield call("d", "delete", path="a.txt")
        yield END

    def next_messages(events: Any, outputs: Any) -> list[Any]:
        raise AssertionError("no next turn while a call awaits approval")

    with anyio.fail_after(GUARD):
        run: AgentRun = await run_loop(call_model, ["hi"], guarded([]), next_messages=next_messages)
    assert run.stop_reason == "awaiting_approval"
    assert run.messages == ["hi"]
    assert run.turns[0].events == [call("d", "delete", path="a.txt"), END]
    assert run.turns[0].outputs == []


def test_a_denial_goes_back_to_the_model_as_a_failed_call_in_every_format() -> None:
    async def events() -> list[Any]:
        got: list[Any] = []
        async with process(PARALLEL.read_bytes(), provider="anthropic").stream() as stream:
            got.extend([event async for event in stream])
        return got

    got = anyio.run(events)
    first, second = (e for e in got if isinstance(e, ToolInvocation))
    outputs = [denied(first.id, first.name, "denied: not now"), ToolOutput(call_id=second.id, output=6)]
    assert assistant_turn(got, "anthropic").tool_results(outputs) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": first.id,
                    "content": "denied: not now",
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": second.id, "content": "6"},
            ],
        }
    ]
    assert assistant_turn(got, "openai_chat").tool_results(outputs) == [
        {"role": "tool", "tool_call_id": first.id, "content": "denied: not now"},
        {"role": "tool", "tool_call_id": second.id, "content": "6"},
    ]
    assert assistant_turn(got, "openai_responses").tool_results(outputs) == [
        {"type": "function_call_output", "call_id": first.id, "output": "denied: not now"},
        {"type": "function_call_output", "call_id": second.id, "output": "6"},
    ]
    gemini = assistant_turn(got, "gemini").tool_results(outputs)
    assert [part["functionResponse"]["response"] for part in gemini[0]["parts"]] == [
        {"error": "denied: not now"},
        {"output": 6},
    ]


@pytest.mark.anyio
async def test_the_gate_latency_benchmark_measures_every_gate() -> None:
    from benchmarks.bench_tool_gates import GATES, measure, table

    results = await measure(2, warmup=0)
    assert list(results) == list(GATES)
    assert all(len(values) == 2 and min(values) > 0 for values in results.values())
    assert table(results).splitlines()[0] == "| gate | median µs | p99 µs |"
