"""The tool runner: each tool starts as soon as its call is folded and its tool gate allows, while the
model keeps streaming.

::

    async with run_tools(process(response, provider="anthropic"), tools) as run:
        async for item in run:          # the response's events, with a ToolOutput per call as it finishes
            ...

The response's events pass through unchanged and in order; each client-side `ToolInvocation` is
followed, as soon as its tool returns, by one `ToolOutput` (exactly one per invocation, whatever
happens, unless the consumer leaves the block early). Its ``output`` is what goes back to the model: the
tool's return value, or for a call that did not succeed a message saying what failed, with ``status``
saying how it ended. After the response's `ResponseEnd` come the outputs still running. So a hub,
the web endpoints and the UI encoders show tool output like any other item (``to_dict()`` gives
``{"type": "TOOL_OUTPUT", ...}``).

The tool gate (``start`` of `ToolRegistry.tool`): an ``eager`` tool (the default for ``read_only``
ones) starts the moment its call is folded; an ``after_finish`` tool (the default for the others) starts
only after the `ResponseEnd`, and only if its ``finish_reason`` is in `SAFE_FINISH_REASONS`
(``stop``, ``tool_calls``). A complete call in a response that then ends ``length``, ``content_filter``,
without a finish reason or without a ``ResponseEnd`` is not run: its output (``not_run``, right after the
``ResponseEnd``) says why. The outputs of eager tools stand whatever the finish: they are meant to be
read-only. An ``approval`` tool's call is followed at once by a `ToolApprovalRequest`; with
``approvals`` (an `Approvals`) it waits for the decision, then runs like
an ``after_finish`` call, or gets a ``denied`` output (refused, or expired); without, it awaits a
decision that comes with the next request: no output in this run (`ToolRun.awaiting`), unless the
response ends unsafely (``not_run``). See `pipeline.agent.approval`.

Scheduling: a ``read_only`` tool runs in parallel with everything else; other tools run one at a time in
call order (a call waits for the side-effecting call before it), in parallel with the read-only ones.
Provider-executed calls are not run. A call whose arguments are cut off (``truncated`` by the token limit,
``interrupted`` by a failed stream) is never run (``not_run``); malformed or invalid arguments give
``invalid_arguments``; an unknown name ``unknown_tool``; a second call with the id of a call before it
in the response (`pipeline.process` renames repeated ids; a hand-made source may not) ``not_run``; a tool
that raises ``error`` (a ``CancelledError`` of its own too, when the run was not cancelled), one that
returns what cannot be sent as JSON ``error``; one that outlives its ``timeout`` ``timeout``. What a call
gives at once (its approval request, or the output of a call that cannot run) follows it with nothing
between them.

When the response fails (the source raises): no further call starts (a call still waiting for its turn or
for the finish gets ``not_run``). With ``on_failure="finish"`` (the default), calls already running finish
(each within its timeout): a side effect half done is worse than a late result, and their outputs are
what the caller needs to report or undo them. With ``on_failure="cancel"`` they are cancelled and give
``cancelled``. Either way their outputs are delivered, then the response's exception is raised.

Leaving the ``async with`` block (or cancelling it) cancels every tool still running and closes the
source. The bound: a cancelled tool (its timeout, or the block left) has ``cancel_grace`` seconds
(default `DEFAULT_CANCEL_GRACE`, 1 s) to stop; one that swallows the cancellation is then abandoned
(its task goes on alone, with a warning on the ``streamfold`` logger), so a ``timeout`` output comes at
most ``timeout + cancel_grace`` seconds after the call started, and the block exits at most
``cancel_grace`` seconds after it is left. A sync tool's worker thread cannot be interrupted; the runner
stops waiting for it. Cost: one memory-stream hand-off per item, at most ``max_buffer`` items waiting
for the consumer, which paces the source through the pull.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import anyio
import pydantic
from aiostream import streamcontext
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from operators.registry import check_choice
from pipeline._options import check_count
from pipeline.agent._calls import DEFAULT_CANCEL_GRACE, check_cancel_grace, execute, tool_output
from pipeline.agent.approval import Approvals, denied_output
from pipeline.agent.tools import Tool, ToolRegistry
from pipeline.errors import ConfigurationError
from pipeline.models import PipelineEvent, ResponseEnd, ToolApprovalRequest, ToolInvocation, ToolOutput

__all__ = [
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_MAX_BUFFER",
    "SAFE_FINISH_REASONS",
    "AgentRun",
    "OnFailure",
    "RunnerEvent",
    "StopReason",
    "ToolRun",
    "Turn",
    "run_loop",
    "run_tools",
]

DEFAULT_MAX_BUFFER = 64
"""Items that may wait between the runner's pump and its consumer before the source is no longer read."""

OnFailure: TypeAlias = Literal["finish", "cancel"]
StopReason: TypeAlias = Literal["no_calls", "max_steps", "awaiting_approval", "stopped"]
"""Why `run_loop` stopped (`AgentRun.stop_reason`)."""
RunnerEvent: TypeAlias = PipelineEvent | ToolOutput | ToolApprovalRequest
"""What the runner yields: the response's events, one `ToolOutput` per client-side call (but a
call awaiting the next request's approval), and a `ToolApprovalRequest` per call that needs one."""

SAFE_FINISH_REASONS = frozenset({"stop", "tool_calls"})
"""The finishes after which an ``after_finish`` tool may start (the other calls of such a response are
``not_run``)."""

_NOT_RUN_KINDS = frozenset({"truncated", "interrupted"})


class _Failure:
    """The response's exception, carried to the consumer's task after the outputs before it."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_Item: TypeAlias = RunnerEvent | _Failure


class ToolRun:
    """The runner's stream (iterate it once), and what it has seen so far."""

    def __init__(self, receive: MemoryObjectReceiveStream[_Item]) -> None:
        self._receive = receive
        self.invocations: list[ToolInvocation] = []
        """The client-side invocations seen, in call order."""
        self.outputs: list[ToolOutput] = []
        """The outputs delivered so far, in the order they were yielded."""
        self.awaiting: dict[str, ToolApprovalRequest] = {}
        """The approval requests without an output yet, by call id: once the run is over, the calls
        whose decision comes with the next request (a run without ``approvals``)."""

    def __aiter__(self) -> AsyncIterator[RunnerEvent]:
        return self._read()

    async def _read(self) -> AsyncIterator[RunnerEvent]:
        async for item in self._receive:
            if isinstance(item, _Failure):
                raise item.error
            if isinstance(item, ToolOutput):
                self.outputs.append(item)
                self.awaiting.pop(item.call_id, None)
            elif isinstance(item, ToolApprovalRequest):
                self.awaiting[item.call_id] = item
            elif isinstance(item, ToolInvocation) and not item.provider_executed:
                self.invocations.append(item)
            yield item


@asynccontextmanager
async def run_tools(
    events: AsyncIterable[PipelineEvent],
    tools: ToolRegistry,
    *,
    on_failure: OnFailure = "finish",
    max_buffer: int = DEFAULT_MAX_BUFFER,
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
    approvals: Approvals | None = None,
    on_start: Callable[[ToolInvocation], Awaitable[None]] | None = None,
) -> AsyncIterator[ToolRun]:
    """Run each invocation of ``events`` as soon as it is folded and its tool's gate allows.

    ``eager`` tools start at once, ``after_finish`` ones after a safe finish, ``approval`` ones once
    approved and after a safe finish. The module docs say more on the ordering, the gate, scheduling and
    the failure policy.

    Args:
        events: a `pipeline.process` stream.
        tools: the tools the model may call.
        on_failure: when the response fails, ``"finish"`` lets running calls finish; ``"cancel"``
            cancels them.
        max_buffer: items waiting for the consumer at most; the consumer paces the source.
        cancel_grace: seconds a cancelled tool has to stop before it is abandoned.
        approvals: where the decisions on ``approval`` calls are made while the run waits; None: they
            come with the next request.
        on_start: awaited with each invocation just before its tool starts (a durable run logs the
            start).

    Yields:
        A `ToolRun`: iterate it for the events and the `ToolOutput`s.

    Raises:
        ConfigurationError: on entering, for a bad option.
    """
    if not isinstance(tools, ToolRegistry):
        raise ConfigurationError(f"tools must be a ToolRegistry, got {tools!r}")
    check_choice("on_failure", on_failure, ("finish", "cancel"))
    check_count("max_buffer", max_buffer, minimum=1)
    check_cancel_grace(cancel_grace)
    if approvals is not None and not isinstance(approvals, Approvals):
        raise ConfigurationError(f"approvals must be an Approvals, got {approvals!r}")
    send, receive = anyio.create_memory_object_stream[_Item](max_buffer)
    runner = _Runner(tools, on_failure, cancel_grace, send, approvals, on_start)
    with receive, _sole_exception_unwrapped():
        async with anyio.create_task_group() as group:
            group.start_soon(runner.pump, events)
            try:
                yield ToolRun(receive)
            finally:
                group.cancel_scope.cancel()


@contextmanager
def _sole_exception_unwrapped() -> Iterator[None]:
    """Re-raise a lone exception (the response's, or the block's own) out of the task group's wrapping."""
    try:
        yield
    except BaseExceptionGroup as group:
        sole: BaseException = group
        while isinstance(sole, BaseExceptionGroup) and len(sole.exceptions) == 1:
            sole = sole.exceptions[0]
        if isinstance(sole, BaseExceptionGroup):
            raise
        context = sole.__context__
        try:
            raise sole
        finally:
            sole.__context__ = context


@dataclass(slots=True)
class _Runner:
    tools: ToolRegistry
    on_failure: OnFailure
    cancel_grace: float
    send: MemoryObjectSendStream[_Item]
    approvals: Approvals | None
    on_start: Callable[[ToolInvocation], Awaitable[None]] | None = None
    failed: bool = False
    running: dict[str, ToolInvocation] = field(default_factory=dict)
    """Started, output not yet delivered."""
    queued: dict[str, ToolInvocation] = field(default_factory=dict)
    """Side-effecting calls waiting for their turn."""
    held: dict[str, ToolInvocation] = field(default_factory=dict)
    """``after_finish`` and ``approval`` calls waiting for the response's finish."""
    deciding: dict[str, anyio.CancelScope] = field(default_factory=dict)
    """``approval`` calls waiting for a decision: cancelled when the response ends unsafely or fails."""
    awaiting: dict[str, ToolInvocation] = field(default_factory=dict)
    """``approval`` calls whose decision comes with the next request (no ``approvals``)."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    """Set when the response's end is known (its ResponseEnd, the end of its events, or its failure)."""
    serial_tail: anyio.Event | None = None
    """Set when the last side-effecting call scheduled so far is over."""
    dispatched: set[str] = field(default_factory=set)
    """The ids of the client calls of this response: a second call with one of them is not run."""
    sending: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    """Held while items that go out together are sent: a call and its approval request or immediate
    output, with no other task's item between them."""

    async def _emit(self, *items: _Item) -> None:
        """Send ``items`` in a row."""
        async with self.sending:
            for item in items:
                await self.send.send(item)

    async def pump(self, events: AsyncIterable[PipelineEvent]) -> None:
        send = self.send
        failure: Exception | None = None
        async with send:
            async with anyio.create_task_group() as group:
                try:
                    async with streamcontext(events) as items:
                        async for event in items:
                            await self._pass_on(event, group)
                except Exception as exc:
                    failure, self.failed = exc, True
                    if self.on_failure == "cancel":
                        group.cancel_scope.cancel()
                    self.finished.set()  # the held calls give up; reported below
                    self._stop_deciding()
                await self._open_gate("not run: the response's events ended without a ResponseEnd")
            await self._report_unfinished(failure)

    async def _pass_on(self, event: PipelineEvent, group: TaskGroup) -> None:
        """Pass one event on; a client call's tool starts before it, and the response's end opens the gate."""
        early = None
        if isinstance(event, ToolInvocation) and not event.provider_executed:
            early = self._dispatch(event, group)
        if early is None:
            await self._emit(event)
        else:
            await self._emit(event, early)
        if isinstance(event, ResponseEnd):
            await self._open_gate(_declined_by(event.finish_reason))

    async def _report_unfinished(self, failure: Exception | None) -> None:
        """The calls left when the tools are over: cancelled while running, or not run; then the failure."""
        for invocation in self.running.values():
            await self._emit(
                tool_output(invocation, "cancelled", "cancelled: the response failed while it ran")
            )
        for invocation in [*self.queued.values(), *self.held.values()]:
            await self._emit(_not_run(invocation))
        if failure is not None:
            for invocation in self.awaiting.values():
                await self._emit(_not_run(invocation))
            await self._emit(_Failure(failure))

    async def _open_gate(self, declined: str | None) -> None:
        """The response's end is known: the held calls may run (``declined`` None), or are not run."""
        if self.finished.is_set():
            return
        if declined is None:
            self.queued.update(self.held)
        else:
            self._stop_deciding()
            for invocation in [*self.held.values(), *self.awaiting.values()]:
                await self._emit(tool_output(invocation, "not_run", declined))
            self.awaiting.clear()
        self.held.clear()
        self.finished.set()

    def _stop_deciding(self) -> None:
        """The response ended unsafely or failed: no call waits for a decision any more."""
        for scope in self.deciding.values():
            scope.cancel()

    def _dispatch(
        self, invocation: ToolInvocation, group: TaskGroup
    ) -> ToolOutput | ToolApprovalRequest | None:
        """Start the call's tool (or queue it behind the side-effecting call before it, or hold it until
        the finish or a decision); or return the output of a call that cannot run, or the approval
        request of one that needs it."""
        unusable = _unusable(invocation)
        if unusable is not None:
            return unusable
        if invocation.id in self.dispatched:  # (`process()` renames repeated ids; a hand-made source may not)
            return tool_output(
                invocation, "not_run", f"not run: another call of the response has id {invocation.id!r}"
            )
        self.dispatched.add(invocation.id)
        tool = self.tools.get(invocation.name)
        if tool is None:
            return tool_output(invocation, "unknown_tool", f"no tool named {invocation.name!r}")
        try:
            arguments = tool.validate(invocation.arguments)
        except pydantic.ValidationError as exc:
            return tool_output(invocation, "invalid_arguments", f"invalid_arguments: {exc}")
        request: ToolApprovalRequest | None = None
        if tool.start == "approval":
            if self.approvals is None:  # decided with the next request
                self.awaiting[invocation.id] = invocation
                return ToolApprovalRequest(
                    call_id=invocation.id, name=invocation.name, arguments=invocation.arguments
                )
            if invocation.id in self.approvals.pending:  # another run's: one decision cannot tell them apart
                return tool_output(
                    invocation,
                    "not_run",
                    f"not run: another run waits for a decision on call id {invocation.id!r}",
                )
            request = self.approvals.request(invocation)
        held = tool.start != "eager"
        after: anyio.Event | None = None
        done: anyio.Event | None = None
        if not tool.read_only:
            after, done = self.serial_tail, anyio.Event()
            self.serial_tail = done
        if held:
            self.held[invocation.id] = invocation
        elif done is not None:
            self.queued[invocation.id] = invocation
        else:
            self.running[invocation.id] = invocation
        group.start_soon(self._run, invocation, tool, arguments, held, after, done, request)
        return request

    async def _run(
        self,
        invocation: ToolInvocation,
        tool: Tool,
        arguments: pydantic.BaseModel,
        held: bool,
        after: anyio.Event | None,
        done: anyio.Event | None,
        request: ToolApprovalRequest | None = None,
    ) -> None:
        call_id = invocation.id
        try:
            if request is not None and not await self._approved(invocation, request):
                return
            if after is not None:
                await after.wait()
            if held:
                await self.finished.wait()
            if call_id not in self.running:  # it waited for its turn or for the finish
                if self.failed or call_id not in self.queued:
                    return  # failed or declined: the pump reports it as not run
                del self.queued[call_id]
                self.running[call_id] = invocation
            if self.on_start is not None:
                await self.on_start(invocation)
            output = await execute(invocation, tool, arguments, self.cancel_grace)
            await self._emit(output)
            del self.running[call_id]
        finally:
            if done is not None:
                done.set()

    async def _approved(self, invocation: ToolInvocation, request: ToolApprovalRequest) -> bool:
        """Wait for the decision on the call: True when approved; else its ``denied`` output is sent, or
        (the response ended unsafely or failed while it waited) the pump reports it, and False."""
        assert self.approvals is not None
        with anyio.CancelScope() as scope:
            self.deciding[invocation.id] = scope
            try:
                decision = await self.approvals.wait(request)
            finally:
                del self.deciding[invocation.id]
            if decision.approved:
                return True
            self.held.pop(invocation.id, None)
            self.queued.pop(invocation.id, None)
            await self._emit(denied_output(invocation, decision.reason))
        return False


def _unusable(invocation: ToolInvocation) -> ToolOutput | None:
    """The output of a call the stream left unusable: cut short or interrupted (not run), or with
    arguments that do not parse; None for a call to run."""
    error = invocation.error
    if error is None:
        return None
    if error.kind in _NOT_RUN_KINDS:
        return tool_output(invocation, "not_run", f"not run: {error.kind}: {error.message}")
    return tool_output(invocation, "invalid_arguments", f"{error.kind}: {error.message}")


def _declined_by(finish_reason: str | None) -> str | None:
    """Why the held calls of a response that ended with ``finish_reason`` are not run; None: they run."""
    if finish_reason in SAFE_FINISH_REASONS:
        return None
    if finish_reason is None:
        return "not run: the response ended without a finish_reason"
    return f"not run: the response ended with finish_reason {finish_reason!r}, not stop or tool_calls"


def _not_run(invocation: ToolInvocation) -> ToolOutput:
    return tool_output(invocation, "not_run", "not run: the response failed before this call's turn")


# --- the loop -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Turn:
    """One model response and the outputs of its calls."""

    events: list[PipelineEvent]
    """The response's events."""
    outputs: list[ToolOutput]
    """The outputs of its client calls."""


@dataclass(slots=True)
class AgentRun:
    """What `run_loop` did: the conversation at the end, each turn, and why it stopped."""

    messages: list[Any]
    """The conversation at the end: the messages given, then each turn's."""
    turns: list[Turn]
    """Each model response and its calls' outputs, in order."""
    stop_reason: StopReason
    """``no_calls``: the last response made no client call; ``max_steps``: the step limit;
    ``awaiting_approval``: calls of the last response wait for a decision that comes with the next
    request (`ToolRun.awaiting`; the last turn's messages are not appended); ``stopped``: a durable run
    was stopped on request (`pipeline.agent.durable`; the step it cut is not a turn)."""


CallModel: TypeAlias = Callable[
    [list[Any]], AsyncIterable[PipelineEvent] | Awaitable[AsyncIterable[PipelineEvent]]
]
NextMessages: TypeAlias = Callable[[Sequence[PipelineEvent], Sequence[ToolOutput]], Sequence[Any]]


async def run_loop(
    call_model: CallModel,
    messages: Sequence[Any],
    tools: ToolRegistry,
    *,
    next_messages: NextMessages,
    max_steps: int = 10,
    on_event: Callable[[RunnerEvent], Awaitable[None] | None] | None = None,
    on_failure: OnFailure = "finish",
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
    approvals: Approvals | None = None,
) -> AgentRun:
    """Drive turns until a response makes no client-side call, or ``max_steps`` responses.

    Each turn, `run_tools` runs the tools of the response's events, every item goes to ``on_event`` as
    it comes, then the messages ``next_messages`` gives are appended. A failed response raises, its
    outputs already delivered. A response whose ``approval`` calls await the next request's decision
    (no ``approvals``) ends the loop (``awaiting_approval``).

    Args:
        call_model: given the messages, the response's events (e.g. a `pipeline.process` stream), or
            a coroutine returning them.
        messages: the conversation so far; not modified.
        tools: the tools the model may call.
        next_messages: given a turn's events and outputs, the messages to append: the assistant message,
            then the tool results.
        max_steps: responses at most.
        on_event: called (sync or async) with every item as it comes.
        on_failure: `run_tools`' option.
        cancel_grace: `run_tools`' option.
        approvals: `run_tools`' option.

    Returns:
        The run: its turns, the conversation (`AgentRun.messages`) and why it stopped.
    """
    check_count("max_steps", max_steps, minimum=1)
    conversation = list(messages)
    turns: list[Turn] = []
    for _ in range(max_steps):
        source = call_model(list(conversation))
        if not isinstance(source, AsyncIterable):  # a coroutine (an aiostream Stream is awaitable too)
            source = await source
        events: list[PipelineEvent] = []
        async with run_tools(
            source, tools, on_failure=on_failure, cancel_grace=cancel_grace, approvals=approvals
        ) as run:
            async for item in run:
                if not isinstance(item, ToolOutput | ToolApprovalRequest):
                    events.append(item)
                if on_event is not None:
                    reaction = on_event(item)
                    if inspect.isawaitable(reaction):
                        await reaction
        turns.append(Turn(events, list(run.outputs)))
        if run.awaiting:
            return AgentRun(conversation, turns, "awaiting_approval")
        conversation.extend(next_messages(events, run.outputs))
        if not run.invocations:
            return AgentRun(conversation, turns, "no_calls")
    return AgentRun(conversation, turns, "max_steps")
