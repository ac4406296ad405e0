"""The eager tool runner and the loop: ordering, parallel and serial tools, timeouts, failures, cancellation.

Overlap is proven with anyio Events (a serial runner would deadlock, which the ``fail_after`` guards turn
into a failure); no sleep synchronises anything.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.agent import AgentRun, ToolOutput, ToolRegistry, run_loop, run_tools
from pipeline.compose import process
from pipeline.errors import ConfigurationError, ProviderError
from pipeline.fanout.hub import fan_out
from pipeline.fanout.web import to_wire
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    ToolCallError,
    ToolInvocation,
)
from tests.agent_runs import END, call, collect, items
from tests.conftest import FIXTURES
from tests.guards import GUARD

PARALLEL = FIXTURES / "anthropic" / "fantasy_claude-sonnet-4_text_then_2_parallel_tool_use.sse"
FINAL_TEXT = FIXTURES / "anthropic" / "anthropic-sdk-python_claude-haiku-4-5_text_after_tool_result.sse"
TRUNCATED = (
    FIXTURES / "anthropic" / "anthropic-sdk-python_claude-3-7-sonnet_tool_use_truncated_max_tokens.sse"
)


async def drain(source: Any, tools: ToolRegistry, got: list[Any], **options: Any) -> None:
    """Run ``source``'s tools, appending every item to ``got`` (kept when the response fails)."""
    with anyio.fail_after(GUARD):
        async with run_tools(source, tools, **options) as run:
            async for item in run:
                got.append(item)


def ok(call_id: str, name: str, output: Any) -> ToolOutput:
    return ToolOutput(call_id=call_id, name=name, output=output)


def arithmetic(*, read_only: bool = True) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(read_only=read_only)
    async def add(a: int, b: int) -> int:
        return a + b

    @tools.tool(read_only=read_only)
    def multiply(a: int, b: int) -> int:
        return a * b

    return tools


@pytest.mark.anyio
async def test_a_recorded_response_passes_through_with_one_output_after_each_invocation() -> None:
    def recorded() -> Any:
        return process(PARALLEL.read_bytes(), provider="anthropic", segment_ids=lambda _: "text-1")

    async with recorded().stream() as stream:
        plain = [event async for event in stream]
    got = await collect(recorded(), arithmetic())

    assert [item for item in got if not isinstance(item, ToolOutput)] == plain
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert sorted(outputs, key=lambda output: output.name) == [
        ok("toolu_01UYxUYC2zRPY8wiutnF48eP", "add", 5),
        ok("toolu_01VaRx1jpWCvPhi7L4kywAcd", "multiply", 6),
    ]
    for output in outputs:
        invocation = next(
            i for i, item in enumerate(got) if isinstance(item, ToolInvocation) and item.id == output.call_id
        )
        assert invocation < got.index(output)


@pytest.mark.anyio
async def test_a_tool_starts_while_the_model_is_still_streaming() -> None:
    """Regression for the run-after-the-stream behaviour: the response cannot go on until the tool ran."""
    tools = ToolRegistry()
    started = anyio.Event()

    @tools.tool(read_only=True)
    async def look(q: str) -> str:
        started.set()
        return f"saw {q}"

    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("c1", "look", q="x")
        await started.wait()
        await anyio.wait_all_tasks_blocked()  # the tool's task has delivered its output
        yield SegmentEvent.start("t1", SegmentType.TEXT)
        yield END

    got = await collect(response(), tools)
    assert got == [
        call("c1", "look", q="x"),
        ok("c1", "look", "saw x"),
        SegmentEvent.start("t1", SegmentType.TEXT),
        END,
    ]


@pytest.mark.anyio
async def test_read_only_tools_run_in_parallel() -> None:
    tools = ToolRegistry()
    first_in, second_in = anyio.Event(), anyio.Event()

    @tools.tool(read_only=True)
    async def first() -> str:
        first_in.set()
        await second_in.wait()  # only returns if `second` runs at the same time
        return "first"

    @tools.tool(read_only=True)
    async def second() -> str:
        second_in.set()
        await first_in.wait()
        return "second"

    got = await collect(items(call("a", "first"), call("b", "second"), END), tools)
    assert got[:3] == [call("a", "first"), call("b", "second"), END]
    assert sorted(got[3:], key=lambda output: output.call_id) == [
        ok("a", "first", "first"),
        ok("b", "second", "second"),
    ]


@pytest.mark.anyio
async def test_side_effecting_tools_run_one_at_a_time_in_call_order_beside_read_only_ones() -> None:
    tools = ToolRegistry()
    log: list[str] = []
    gate = anyio.Event()

    @tools.tool(start="eager")  # side effects, started while the response streams
    async def write(label: str) -> str:
        log.append(f"{label} start")
        if label == "A":
            await gate.wait()
        log.append(f"{label} end")
        return label

    @tools.tool(read_only=True)
    async def read() -> str:
        log.append("read")
        return "read"

    with anyio.fail_after(GUARD):
        async with run_tools(
            items(call("a", "write", label="A"), call("b", "write", label="B"), call("r", "read"), END), tools
        ) as run:
            got = []
            async for item in run:
                got.append(item)
                if item == END:
                    await anyio.wait_all_tasks_blocked()
                    assert log == ["A start", "read"]  # B waits for A; the read-only call did not
                    gate.set()
    assert log == ["A start", "read", "A end", "B start", "B end"]
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert outputs == [ok("r", "read", "read"), ok("a", "write", "A"), ok("b", "write", "B")]
    assert got[-2:] == outputs[1:]  # after the ResponseEnd, the outputs still running


@pytest.mark.anyio
async def test_calls_that_cannot_run_give_error_outputs_and_provider_calls_none() -> None:
    tools = arithmetic()

    @tools.tool
    async def explode() -> None:
        raise RuntimeError("disk full")

    @tools.tool(timeout=0.01)
    async def hang() -> None:
        await anyio.sleep_forever()

    invalid_json = ToolInvocation("j", "add", {}, ToolCallError("invalid_json", "bad at 3", '{"a"'))
    truncated = ToolInvocation("t", "add", {"a": 1}, ToolCallError("truncated", "ends at 7", '{"a": 1'))
    server = ToolInvocation("s", "web_search", {"query": "x"}, provider_executed=True)
    got = await collect(
        items(
            invalid_json,
            truncated,
            call("v", "add", a="one", b=2),
            call("u", "nope"),
            server,
            call("e", "explode"),
            call("h", "hang"),
            END,
        ),
        tools,
    )
    by_id = {item.call_id: item for item in got if isinstance(item, ToolOutput)}
    assert set(by_id) == {"j", "t", "v", "u", "e", "h"}  # none for the provider-executed call
    assert by_id["j"] == ToolOutput(
        call_id="j", name="add", status="invalid_arguments", output="invalid_json: bad at 3"
    )
    assert by_id["t"] == ToolOutput(
        call_id="t", name="add", status="not_run", output="not run: truncated: ends at 7"
    )
    assert by_id["v"].status == "invalid_arguments"
    assert "Input should be a valid integer" in str(by_id["v"].output)
    assert by_id["u"] == ToolOutput(
        call_id="u", name="nope", status="unknown_tool", output="no tool named 'nope'"
    )
    assert by_id["e"] == ToolOutput(
        call_id="e", name="explode", status="error", output="tool 'explode' raised RuntimeError: disk full"
    )
    assert by_id["h"] == ToolOutput(
        call_id="h", name="hang", status="timeout", output="tool 'hang' timed out after 0.01 s"
    )
    # outputs that need no tool come right after their invocation
    assert got[:4] == [invalid_json, by_id["j"], truncated, by_id["t"]]


@pytest.mark.anyio
async def test_a_truncated_recorded_call_is_never_run() -> None:
    tools = ToolRegistry()
    ran: list[str] = []

    @tools.tool
    async def make_file(filename: str, lines_of_text: list[str]) -> str:
        ran.append(filename)
        return "made"

    got = await collect(process(TRUNCATED.read_bytes(), provider="anthropic"), tools)
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert ran == []
    assert [(output.call_id, output.status) for output in outputs] == [
        ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "not_run")
    ]
    assert str(outputs[0].output).startswith("not run: truncated: the arguments end at offset 149")
    assert isinstance(got[-2], ToolOutput)
    assert isinstance(got[-1], ResponseEnd)


def failing_response(started: anyio.Event) -> AsyncIterator[PipelineEvent]:
    async def response() -> AsyncIterator[PipelineEvent]:
        yield call("a", "slow")
        yield call("b", "after")
        await started.wait()
        raise ProviderError("overloaded", kind="overloaded_error")

    return response()


@pytest.mark.anyio
async def test_when_the_response_fails_running_tools_finish_and_queued_ones_never_start() -> None:
    tools = ToolRegistry()
    started, ran_after = anyio.Event(), []

    @tools.tool(start="eager")
    async def slow() -> str:
        started.set()
        await anyio.wait_all_tasks_blocked()  # the failure has arrived meanwhile
        return "finished"

    @tools.tool(start="eager")
    async def after() -> str:
        ran_after.append("after")
        return "after"

    got: list[Any] = []
    with pytest.raises(ProviderError, match="overloaded"):
        await drain(failing_response(started), tools, got)
    assert ran_after == []
    assert got == [
        call("a", "slow"),
        call("b", "after"),
        ok("a", "slow", "finished"),
        ToolOutput(
            call_id="b",
            name="after",
            status="not_run",
            output="not run: the response failed before this call's turn",
        ),
    ]


@pytest.mark.anyio
async def test_on_failure_cancel_cancels_running_tools_and_reports_them() -> None:
    tools = ToolRegistry()
    started, cancelled = anyio.Event(), anyio.Event()

    @tools.tool(start="eager")
    async def slow() -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "never"

    @tools.tool(start="eager")
    async def after() -> str:
        return "after"

    got: list[Any] = []
    with pytest.raises(ProviderError):
        await drain(failing_response(started), tools, got, on_failure="cancel")
    assert cancelled.is_set()
    assert got[2:] == [
        ToolOutput(
            call_id="a", name="slow", status="cancelled", output="cancelled: the response failed while it ran"
        ),
        ToolOutput(
            call_id="b",
            name="after",
            status="not_run",
            output="not run: the response failed before this call's turn",
        ),
    ]


@pytest.mark.anyio
async def test_an_interrupted_recorded_stream_gives_not_run_then_the_error() -> None:
    data = PARALLEL.read_bytes()
    cut = data.index(b'"partial_json":"{\\"a\\": 2')  # inside the first call's arguments

    async def broken() -> AsyncIterator[bytes]:
        yield data[:cut]
        raise OSError("connection reset")

    got: list[Any] = []
    with pytest.raises(OSError, match="connection reset"):
        await drain(process(broken(), provider="anthropic"), arithmetic(), got)
    output = got[-1]
    assert isinstance(got[-2], ToolInvocation)
    assert got[-2].error is not None
    assert (output.call_id, output.status) == ("toolu_01UYxUYC2zRPY8wiutnF48eP", "not_run")
    assert str(output.output).startswith("not run: interrupted:")


@pytest.mark.anyio
async def test_leaving_the_block_cancels_running_tools_and_closes_the_source() -> None:
    tools = ToolRegistry()
    cancelled, closed = anyio.Event(), anyio.Event()

    @tools.tool(read_only=True)
    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async def response() -> AsyncIterator[PipelineEvent]:
        try:
            yield call("a", "forever")
            await anyio.sleep_forever()
        finally:
            closed.set()

    before = len(asyncio.all_tasks())
    with anyio.fail_after(GUARD):
        async with run_tools(response(), tools) as run:
            async for item in run:
                assert item == call("a", "forever")
                break
    assert cancelled.is_set()
    assert closed.is_set()
    assert len(asyncio.all_tasks()) == before


@pytest.mark.anyio
async def test_options_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="on_failure"):
        async with run_tools(items(), ToolRegistry(), on_failure="ignore"):  # type: ignore[arg-type]
            pass
    with pytest.raises(ConfigurationError, match="max_buffer"):
        async with run_tools(items(), ToolRegistry(), max_buffer=0):
            pass
    with pytest.raises(ConfigurationError, match="ToolRegistry"):
        async with run_tools(items(), {}):  # type: ignore[arg-type]
            pass


@pytest.mark.anyio
async def test_a_hub_multicasts_tool_outputs_and_they_serialise() -> None:
    async with run_tools(items(call("a", "add", a=1, b=2), END), arithmetic()) as run, fan_out(run) as hub:
        got = [item async for item in hub.subscribe()]
    assert got[0] == call("a", "add", a=1, b=2)
    assert sorted(item.to_dict()["type"] for item in got[1:]) == ["RESPONSE_END", "TOOL_OUTPUT"]
    assert ok("a", "add", 3) in got


def chat_messages(events: Sequence[PipelineEvent], outputs: Sequence[ToolOutput]) -> list[dict[str, Any]]:
    """A minimal OpenAI Chat builder for the test: the assistant's calls, then one tool message each."""
    calls = [
        {"id": e.id, "type": "function", "function": {"name": e.name, "arguments": str(e.arguments)}}
        for e in events
        if isinstance(e, ToolInvocation)
    ]
    assistant: dict[str, Any] = {"role": "assistant", "content": None}
    if calls:
        assistant["tool_calls"] = calls
    return [assistant, *({"role": "tool", "tool_call_id": o.call_id, "content": o.text} for o in outputs)]


@pytest.mark.anyio
async def test_the_loop_runs_turns_until_no_calls() -> None:
    seen: list[list[Any]] = []
    streamed: list[str] = []
    recordings = [PARALLEL, FINAL_TEXT]

    def call_model(messages: list[Any]) -> Any:
        seen.append(messages)
        return process(recordings[len(seen) - 1].read_bytes(), provider="anthropic")

    async def on_event(item: Any) -> None:
        if isinstance(item, ToolOutput | ToolInvocation):
            streamed.append(type(item).__name__)

    user = [{"role": "user", "content": "2+3 and 2*3?"}]
    with anyio.fail_after(GUARD):
        result = await run_loop(
            call_model, user, arithmetic(), next_messages=chat_messages, on_event=on_event
        )
    assert isinstance(result, AgentRun)
    assert result.stop_reason == "no_calls"
    assert len(result.turns) == 2
    assert seen[0] == user
    second = seen[1]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert {(m["tool_call_id"], m["content"]) for m in second[2:]} == {
        ("toolu_01UYxUYC2zRPY8wiutnF48eP", "5"),
        ("toolu_01VaRx1jpWCvPhi7L4kywAcd", "6"),
    }
    assert result.messages[:4] == second
    assert result.messages[4] == {"role": "assistant", "content": None}
    assert sorted(streamed) == ["ToolInvocation", "ToolInvocation", "ToolOutput", "ToolOutput"]
    assert user == [{"role": "user", "content": "2+3 and 2*3?"}]  # not modified


@pytest.mark.anyio
async def test_the_loop_stops_at_the_step_limit() -> None:
    async def call_model(messages: list[Any]) -> Any:
        return process(PARALLEL.read_bytes(), provider="anthropic")

    result = await run_loop(call_model, [], arithmetic(), next_messages=chat_messages, max_steps=2)
    assert result.stop_reason == "max_steps"
    assert len(result.turns) == 2
    assert [len(turn.outputs) for turn in result.turns] == [2, 2]
    with pytest.raises(ConfigurationError, match="max_steps"):
        await run_loop(call_model, [], arithmetic(), next_messages=chat_messages, max_steps=0)


@pytest.mark.anyio
async def test_a_sync_tool_that_times_out_gives_timeout_and_the_stream_goes_on() -> None:
    tools = ToolRegistry()
    release = threading.Event()

    @tools.tool(timeout=0.01)
    def blocking() -> str:
        release.wait(GUARD)  # a thread cannot be interrupted: the runner stops waiting for it
        return "late"

    try:
        got = await collect(items(call("a", "blocking"), END), tools)
    finally:
        release.set()
    assert got == [
        call("a", "blocking"),
        END,
        ToolOutput(
            call_id="a", name="blocking", status="timeout", output="tool 'blocking' timed out after 0.01 s"
        ),
    ]


def test_tool_output_is_on_the_web_wire_as_its_dict() -> None:
    output = ToolOutput(call_id="a", name="add", status="error", output="tool 'add' raised ValueError: x")
    assert to_wire(output) == output.to_dict()


BEHAVIOURS = ("ok", "raise", "invalid", "unknown", "truncated")


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.tuples(st.booleans(), st.sampled_from(BEHAVIOURS)), max_size=8),
    fail_at=st.none() | st.integers(min_value=0, max_value=8),
    on_failure=st.sampled_from(["finish", "cancel"]),
    finish=st.sampled_from(["stop", "tool_calls", "length", "content_filter", None]),
)
def test_every_invocation_gets_exactly_one_output_after_it(
    calls: list[tuple[bool, str]], fail_at: int | None, on_failure: str, finish: str | None
) -> None:
    """Whatever the mix of read-only and side-effecting tools, failures, cut-offs and finishes: one output
    per invocation, after it; the side-effecting tools run in call order, and only after a safe finish; a
    failure raised after all of them."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    async def reader(behaviour: str) -> str:
        if behaviour == "raise":
            raise ValueError("no")
        return "read"

    @tools.tool
    async def writer(behaviour: str) -> str:
        if behaviour == "raise":
            raise ValueError("no")
        return "written"

    invocations = []
    for number, (read_only, behaviour) in enumerate(calls):
        name = "nope" if behaviour == "unknown" else "reader" if read_only else "writer"
        arguments: dict[str, Any] = {"behaviour": 1 if behaviour == "invalid" else behaviour}
        error = ToolCallError("truncated", "cut", "{") if behaviour == "truncated" else None
        invocations.append(ToolInvocation(f"c{number}", name, arguments, error))

    async def response() -> AsyncIterator[PipelineEvent]:
        for number, invocation in enumerate(invocations):
            if number == fail_at:
                raise ProviderError("boom")
            yield invocation
        yield ResponseEnd(finish_reason=finish)

    async def run() -> tuple[list[Any], BaseException | None]:
        got: list[Any] = []
        try:
            await drain(response(), tools, got, on_failure=on_failure)
        except ProviderError as exc:
            return got, exc
        return got, None

    got, failure = anyio.run(run, backend="asyncio")
    failed = fail_at is not None and fail_at < len(invocations)
    assert (failure is not None) == failed
    sent = invocations[:fail_at] if failed else invocations
    outputs = [item for item in got if isinstance(item, ToolOutput)]
    assert sorted(output.call_id for output in outputs) == sorted(invocation.id for invocation in sent)
    for output in outputs:
        assert got.index(next(i for i in sent if i.id == output.call_id)) < got.index(output)
    # The side-effecting tools that ran, in call order (a cut-off call's not_run comes at once, out of turn).
    writers = [o.call_id for o in outputs if o.name == "writer" and o.status in ("ok", "error")]
    assert writers == sorted(writers, key=lambda call_id: int(call_id[1:]))
    if failed or finish not in ("stop", "tool_calls"):
        assert writers == []
    else:
        runnable = [i.id for i in sent if i.name == "writer" and i.arguments["behaviour"] in ("ok", "raise")]
        assert writers == runnable
