"""Durable agent runs: `run_durable` drives `run_loop`'s turns over a
serving event log, so that a run outlives the worker that started it.

::

    lease = RedisLease(url)
    log = RedisEventLog(url)
    run = await run_durable("run-42", log, lease, call_model, messages, tools,
                            next_messages=builder.next_messages, owner="worker-1")

The run is a response of the log (its id is the run id): browsers follow it through the served routes
(`serving_routes`, `chat_routes`) like any
response, from any id on. ``chat_routes`` over `DurableRuns`
queues a run for the workers, and `serve_runs` is a worker's loop that runs the queued runs. Each
step is written as it happens:

1. ``{"type": "RUN_START", "messages", "approvals"?}`` once, first: the conversation the run starts
   from, and the approval decisions the request that queued it brought
   (`pipeline.fanout.serving.runs`); their calls run first, and a ``RUN_MESSAGES`` with ``step``
   null carries their outputs.
2. ``{"type": "RUN_STEP", "step", "attempt", "lease"}``: a model call starts.
3. The response's events (``to_dict()``), as they stream; a ``TOOL_APPROVAL_REQUEST`` per approval call.
4. ``{"type": "TOOL_STARTED", "call_id", "name", "lease"}`` just before a tool starts, and its
   ``TOOL_OUTPUT`` when it ends.
   ``{"type": "TOOL_APPROVAL", ...}`` (a `ToolApproval`) when the run's broker
   (``approvals``) decided a call: a worker that takes the run over does not ask again.
5. ``{"type": "RUN_MESSAGES", "step", "messages"}``: what ``next_messages`` appended for the next request.
6. ``{"type": "RUN_END", "stop_reason"}`` and the log's terminal entry.

``lease`` in an entry is the token of the lease its writer held (`pipeline.agent.leases`).

**The lease.** One worker holds a run: it takes the lease (``acquire``), renews it every third of its
``lease_ttl`` (and heartbeats the log), and before each append checks that its lease is still good (its
last renewal is younger than the time to live, less a margin). A worker whose renewal fails stops at once
and raises `LeaseLost`; `run_durable` on a run whose lease another worker holds raises
`LeaseHeld`. The lease's time to live must be well under the log's ``heartbeat_timeout``, or
readers get ``ProducerLost`` while the run waits for a new worker.

**Recovery.** The worker that takes an expired lease reads the log and rebuilds the run: the conversation
so far, the step in progress, the calls of that step with a logged output (never run again: the call id is
the idempotency key), those that had started without an output (run again only if the tool is
``idempotent``; else their output, status ``cancelled``, says the worker died during the call), and those
not started yet (run as their gate says). A model stream cut mid-way is abandoned: its calls without an
output get a ``cancelled`` output, then a ``RESPONSE_END`` with no ``finish_reason`` and
``metadata["streamfold_abandoned"]`` closes the attempt, and the model is called again for that step
(the next ``RUN_STEP``, attempt + 1). A client therefore sees the dead attempt's partial text, its step
closed (the Vercel encoder's ``finish-step``, AG-UI's ``streamfold.response_end`` custom event), then
the new attempt; ids go on from the log's last id, and nothing is written twice.

**Stopping.** A stop request (the served routes' ``POST .../stop``, `EventLog.request_stop`, from any
process) cancels the run where it is: the model stream is closed, a running tool is cancelled. The worker
then reads the log back, gives each call of the step under way without an output a ``cancelled`` one
(`STOPPED_CALL`), writes ``RUN_END`` with ``stop_reason`` ``stopped`` and ends the run ``stopped``, as
a stopped response of the serving manager ends. A worker that takes over a run stopped before it started
stops it at once.

**What is exactly-once, and what is not.**

- Log entries: exactly once per lease holder. A worker appends only while its lease is good, so a worker
  that lost its lease (paused, partitioned) writes nothing more; the only window is an append already in
  flight when the lease runs out (the margin is there to cover it).
- Tool side effects: at most once, unless the tool is ``idempotent`` (then at least once). A call whose
  output is logged is never run again; a call that started and has no output was cut by the crash, and is
  either run again (idempotent) or reported, not run.
- Model calls: at least once. A stream cut mid-way is called again; its partial events stay in the log,
  closed by the abandoned marker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, get_args

import anyio
import msgspec
from anyio.abc import TaskGroup

from pipeline._jsonenc import encode_json
from pipeline._options import check_count
from pipeline.agent._calls import DEFAULT_CANCEL_GRACE, tool_output
from pipeline.agent._runlog import ABANDONED, TOOL_APPROVAL, RunState, StepState, read_run, rebuild
from pipeline.agent.approval import Approvals, run_approved
from pipeline.agent.leases import Lease
from pipeline.agent.runner import (
    AgentRun,
    CallModel,
    NextMessages,
    OnFailure,
    StopReason,
    Turn,
    _sole_exception_unwrapped,
    run_tools,
)
from pipeline.agent.tools import ToolRegistry
from pipeline.errors import ConfigurationError, ServingError, StreamfoldError
from pipeline.fanout.serving._log import EventLog, ResponseStatus, error_to_entry
from pipeline.fanout.serving.manager import STOPPED_ERROR
from pipeline.fanout.serving.runs import RUN_START, DurableRuns
from pipeline.models import (
    PipelineEvent,
    ResponseEnd,
    ToolApproval,
    ToolApprovalRequest,
    ToolInvocation,
    ToolOutput,
)

__all__ = [
    "ABANDONED",
    "DEFAULT_LEASE_TTL",
    "INTERRUPTED_CALL",
    "INTERRUPTED_STREAM",
    "STOPPED_CALL",
    "TOOL_APPROVAL",
    "ApprovedMessages",
    "LeaseHeld",
    "LeaseLost",
    "RunState",
    "StepState",
    "read_run",
    "rebuild",
    "run_durable",
    "serve_runs",
]

_logger = logging.getLogger("streamfold")

DEFAULT_LEASE_TTL: Final = 10.0
"""Seconds a lease lasts without renewal: how long a dead worker's run waits for another worker."""

INTERRUPTED_CALL: Final = (
    "interrupted: the worker died while this call ran; it is not run again (its tool is not marked "
    "idempotent)"
)
"""The output (status ``cancelled``) of a call cut by a dead worker."""

INTERRUPTED_STREAM: Final = (
    "interrupted: the worker died while the model was streaming this response; the model is called again"
)
"""The output (status ``cancelled``) of a call of a model attempt cut by a dead worker, and the reason
in its abandoned marker."""

STOPPED_CALL: Final = "stopped: the run was stopped before this call had an output"
"""The output (status ``cancelled``) of each call a stop request left without one."""

ApprovedMessages: TypeAlias = Callable[[Sequence[ToolOutput]], Sequence[Any]]
"""``(outputs) -> messages``: the messages that carry the outputs of the calls decided with the request
that started a run (their assistant turn is in the run's first messages already)."""

_MARGIN: Final = 0.25
"""The part of the time to live a holder does not count on (an append in flight, clock drift)."""


class LeaseHeld(StreamfoldError):
    """Another worker holds the run's lease."""


class LeaseLost(StreamfoldError):
    """This worker's lease on the run expired or was taken: it wrote nothing more."""


class _Keeper:
    """Renews the lease while the run works and says whether it may still write."""

    def __init__(self, lease: Lease, log: EventLog, run_id: str, owner: str, ttl: float) -> None:
        self.lease, self.log, self.run_id, self.owner, self.ttl = lease, log, run_id, owner, ttl
        self.token = 0
        self.good_until = 0.0
        self.lost = False

    async def acquire(self) -> bool:
        """Take the lease; False while another worker holds it."""
        asked = time.monotonic()  # the lease runs from before the request, as the store sees it
        token = await self.lease.acquire(self.run_id, self.owner, self.ttl)
        if token is None:
            return False
        self.token, self.good_until = token, asked + self.ttl * (1 - _MARGIN)
        return True

    def check(self) -> None:
        """Raise `LeaseLost` unless the lease is still good."""
        if self.lost or time.monotonic() >= self.good_until:
            self.lost = True
            raise LeaseLost(f"run {self.run_id!r}: the lease of {self.owner!r} ran out; it stopped writing")

    async def keep(self, group: TaskGroup) -> None:
        """Renew every third of the time to live; when the lease is refused, or the store stays
        unreachable until the lease runs out, cancel the run (``group``)."""
        while True:
            await anyio.sleep(self.ttl / 3)
            asked = time.monotonic()
            renewed: bool | None = None
            try:
                renewed = await self.lease.renew(self.run_id, self.owner, self.token, self.ttl)
            except Exception:  # unreachable for now: try again while the lease lasts
                renewed = None
            if renewed is False or (renewed is None and time.monotonic() >= self.good_until):
                self.lost = True
                group.cancel_scope.cancel()
                return
            if renewed:
                self.good_until = asked + self.ttl * (1 - _MARGIN)
                with suppress(Exception):  # readers see the appends as heartbeats too
                    await self.log.heartbeat(self.run_id)


@dataclass(slots=True)
class _Durable:
    run_id: str
    log: EventLog
    keeper: _Keeper
    call_model: CallModel
    tools: ToolRegistry
    next_messages: NextMessages
    approved_messages: ApprovedMessages | None
    options: dict[str, Any]
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    """One append at a time: a tool's start and the stream's items are written from different tasks."""
    logged: dict[str, anyio.Event] = field(default_factory=dict)
    """Per call id of the step: set once its invocation is in the log."""
    ended: anyio.Event = field(default_factory=anyio.Event)
    """Set once the step's ResponseEnd is in the log."""
    stopping: bool = False
    """A stop was requested: the run was cancelled, and ends ``stopped``."""

    def _logged(self, call_id: str) -> anyio.Event:
        event = self.logged.get(call_id)
        if event is None:
            event = self.logged[call_id] = anyio.Event()
        return event

    async def write(self, item: dict[str, Any]) -> None:
        async with self.lock:
            self.keeper.check()
            await self.log.append(self.run_id, [encode_json(item)])

    async def tool_started(self, invocation: ToolInvocation) -> None:
        """Log the call's start, once its invocation (and, for a held call, the response's end) is in
        the log: a recovering worker never finds a started call of a response it thinks was cut."""
        await self._logged(invocation.id).wait()
        tool = self.tools.get(invocation.name)
        if tool is not None and tool.start != "eager":
            await self.ended.wait()
        await self._started(invocation.id, invocation.name)

    async def _started(self, call_id: str, name: str) -> None:
        await self.write(
            {"type": "TOOL_STARTED", "call_id": call_id, "name": name, "lease": self.keeper.token}
        )

    async def run(self, state: RunState, messages: Sequence[Any], max_steps: int) -> AgentRun:
        if state.messages is None:
            state.messages = list(messages)
            await self.write({"type": RUN_START, "messages": state.messages})
        conversation: list[Any] = state.messages
        if state.decided is not None:
            conversation = [*conversation, *await self._run_decided(state.decided)]
        turns = state.turns
        for step in range(len(turns), max_steps):
            current, state.current = state.current, None
            turn, awaiting = await self._take_step(current, step, conversation)
            turns.append(turn)
            if awaiting:
                return await self._end(AgentRun(conversation, turns, "awaiting_approval"))
            added = list(self.next_messages(turn.events, turn.outputs))
            await self.write({"type": "RUN_MESSAGES", "step": step, "messages": added})
            conversation = [*conversation, *added]
            if not _client_calls(turn.events):
                return await self._end(AgentRun(conversation, turns, "no_calls"))
        return await self._end(AgentRun(conversation, turns, "max_steps"))

    async def _take_step(
        self, current: StepState | None, step: int, conversation: list[Any]
    ) -> tuple[Turn, bool]:
        """The step: finished from the log when the model's part is logged whole, else (again) from the
        model, after closing an attempt cut mid-stream."""
        if current is not None and current.complete and not current.abandoned:
            return await self._finish_step(current)
        attempt = 1 if current is None else current.attempt + 1
        if current is not None and not current.abandoned:
            await self._abandon(current, step)
        return await self._step(step, attempt, conversation)

    def _options(self, logged: dict[str, ToolApproval]) -> dict[str, Any]:
        """``run_tools``' options; a broker (``approvals``) logs its decisions and takes those of
        ``logged`` again without asking."""
        approvals = self.options["approvals"]
        if approvals is None:
            return self.options
        return {**self.options, "approvals": _LoggedApprovals(approvals, self, logged)}

    async def _run_decided(self, decided: StepState) -> list[Any]:
        """Run the calls approved with the request that started the run (deny the others), once each:
        as `_finish_step` does, a logged output stands and a started call runs again only if its
        tool is idempotent. Returns the messages that carry their outputs, logged."""
        outputs: dict[str, ToolOutput] = {}
        calls: list[ToolInvocation] = []
        for decision in decided.decisions:
            if decision.call_id in outputs:
                continue  # one output per call, however often the request names it
            call = _decided_call(decision)
            calls.append(call)
            output = decided.outputs.get(call.id)
            if output is None:
                output = await self._decide(decision, call, call.id in decided.started)
                await self.write(output.to_dict())
            outputs[call.id] = output
        done = list(outputs.values())
        if self.approved_messages is not None:
            added = list(self.approved_messages(done))
        else:
            added = list(self.next_messages(calls, done))
        await self.write({"type": "RUN_MESSAGES", "step": None, "messages": added})
        return added

    async def _decide(self, decision: ToolApproval, call: ToolInvocation, started: bool) -> ToolOutput:
        """The output of one decided call that has none logged."""
        tool = self.tools.get(call.name)
        runs = decision.approved and tool is not None and tool.start == "approval"
        if runs and started and not self._runs_again(call.name):
            return tool_output(call, "cancelled", INTERRUPTED_CALL)
        if runs:
            await self._started(call.id, call.name)
        grace = self.options["cancel_grace"]
        (output,) = [output async for output in run_approved([decision], self.tools, cancel_grace=grace)]
        return output

    async def watch_stop(self, group: TaskGroup) -> None:
        """Cancel the run (``group``) when a stop is requested from any process (the served routes'
        ``POST .../stop``, `EventLog.request_stop`). A watch that fails is logged and ends: the run goes
        on."""
        try:
            async for _ in self.log.stop_requested(self.run_id):
                self.stopping = True
                group.cancel_scope.cancel()
                return
        except Exception:
            _logger.warning("watching durable run %r for a stop request failed", self.run_id, exc_info=True)

    async def stopped(self) -> AgentRun:
        """End the run a stop cut, as its log holds it now: each call of the step under way without an
        output gets a ``cancelled`` one, then ``RUN_END`` (``stopped``) and the log's ``stopped`` end. A
        run whose ``RUN_END`` was written before the stop came ends as that entry says."""
        state, status = await read_run(self.log, self.run_id)
        if state.stop_reason is not None:
            return await _over(self.log, self.run_id, state, status)
        for invocation in _calls_without_output(state):
            await self.write(tool_output(invocation, "cancelled", STOPPED_CALL).to_dict())
        await self.write({"type": "RUN_END", "stop_reason": "stopped"})
        self.keeper.check()
        await self.log.end(self.run_id, error=STOPPED_ERROR, state="stopped")
        return AgentRun(state.messages or [], state.turns, "stopped")

    async def _end(self, run: AgentRun) -> AgentRun:
        await self.write({"type": "RUN_END", "stop_reason": run.stop_reason})
        self.keeper.check()
        await self.log.end(self.run_id)
        return run

    async def _step(self, step: int, attempt: int, conversation: list[Any]) -> tuple[Turn, bool]:
        """One model call and its tools, each item written as it comes."""
        await self.write({"type": "RUN_STEP", "step": step, "attempt": attempt, "lease": self.keeper.token})
        source = self.call_model(list(conversation))
        if not isinstance(source, AsyncIterable):
            source = await source
        events: list[PipelineEvent] = []
        self.logged, self.ended = {}, anyio.Event()
        options = self._options({})
        async with run_tools(source, self.tools, on_start=self.tool_started, **options) as run:
            async for item in run:
                await self.write(item.to_dict())
                if isinstance(item, ToolInvocation):
                    self._logged(item.id).set()
                elif isinstance(item, ResponseEnd):
                    self.ended.set()
                if not isinstance(item, ToolOutput | ToolApprovalRequest):
                    events.append(item)
        return Turn(events, list(run.outputs)), bool(run.awaiting)

    async def _abandon(self, step_state: StepState, step: int) -> None:
        """Close an attempt cut mid-stream: its calls without an output, then the abandoned marker."""
        for invocation in step_state.invocations:
            if invocation.id not in step_state.outputs:
                output = tool_output(invocation, "cancelled", INTERRUPTED_STREAM)
                await self.write(output.to_dict())
        metadata = {ABANDONED: INTERRUPTED_STREAM, "step": step, "attempt": step_state.attempt}
        marker = ResponseEnd(metadata=metadata)
        await self.write(marker.to_dict())

    async def _finish_step(self, step_state: StepState) -> tuple[Turn, bool]:
        """The model's part of the step is logged: finish its calls that have no output."""
        outputs = list(step_state.outputs.values())
        pending: list[ToolInvocation] = []
        for invocation in step_state.invocations:
            if invocation.id in step_state.outputs:
                continue  # its output is logged: never run again
            if invocation.id in step_state.started and not self._runs_again(invocation.name):
                output = tool_output(invocation, "cancelled", INTERRUPTED_CALL)
                await self.write(output.to_dict())
                outputs.append(output)
            else:
                pending.append(invocation)
        if not pending:
            return Turn(list(step_state.events), outputs), False
        ran, awaiting = await self._run_pending(step_state, pending)
        return Turn(list(step_state.events), [*outputs, *ran]), awaiting

    async def _run_pending(
        self, step_state: StepState, pending: list[ToolInvocation]
    ) -> tuple[list[ToolOutput], bool]:
        """Run the logged calls that have no output; their outputs, and whether one awaits approval."""
        end = next((event for event in step_state.events if isinstance(event, ResponseEnd)), None)
        self.logged = {invocation.id: _set_event() for invocation in pending}
        self.ended = _set_event()
        source = _replay([*pending, end or ResponseEnd()])
        options = self._options(step_state.approved)
        async with run_tools(source, self.tools, on_start=self.tool_started, **options) as run:
            async for item in run:
                requested = step_state.requested
                new = not isinstance(item, ToolApprovalRequest) or item.call_id not in requested
                if isinstance(item, ToolOutput | ToolApprovalRequest) and new:
                    await self.write(item.to_dict())  # the replayed events are logged already
        return list(run.outputs), bool(run.awaiting)

    def _runs_again(self, name: str) -> bool:
        """Whether a call that started before the takeover may run again: its tool is idempotent."""
        tool = self.tools.get(name)
        return tool is not None and tool.idempotent


class _LoggedApprovals(Approvals):
    """The run's broker, seen by its tool runner: each decision is logged (``TOOL_APPROVAL``) before the
    call goes on, and a decision the log already holds is taken again without asking, so a worker that
    takes the run over does not ask twice. People decide on the broker given to the run."""

    def __init__(self, broker: Approvals, durable: _Durable, logged: dict[str, ToolApproval]) -> None:
        super().__init__(timeout=broker.timeout)
        self.broker, self.durable, self.logged = broker, durable, logged

    def request(self, invocation: ToolInvocation) -> ToolApprovalRequest:
        if invocation.id in self.logged:  # decided before the takeover: nobody is asked again
            return ToolApprovalRequest(
                call_id=invocation.id, name=invocation.name, arguments=invocation.arguments
            )
        return self.broker.request(invocation)

    async def wait(self, request: ToolApprovalRequest) -> ToolApproval:
        logged = self.logged.get(request.call_id)
        if logged is not None:
            return logged
        decision = await self.broker.wait(request)
        await self.durable.write({"type": TOOL_APPROVAL, **msgspec.to_builtins(decision)})
        return decision


def _set_event() -> anyio.Event:
    event = anyio.Event()
    event.set()
    return event


async def _replay(events: Sequence[PipelineEvent]) -> AsyncIterator[PipelineEvent]:
    for event in events:
        yield event


def _calls_without_output(state: RunState) -> list[ToolInvocation]:
    """The calls of the step under way (those decided with the request included) with no logged output."""
    calls: dict[str, ToolInvocation] = {}
    for step in (state.decided, state.current):
        if step is None:
            continue
        for call in (*map(_decided_call, step.decisions), *step.invocations):
            if call.id not in step.outputs:
                calls.setdefault(call.id, call)
    return list(calls.values())


def _decided_call(decision: ToolApproval) -> ToolInvocation:
    """The call a decision that came with the run's request is about."""
    return ToolInvocation(decision.call_id, decision.name, dict(decision.arguments))


def _client_calls(events: Sequence[Any]) -> bool:
    return any(isinstance(event, ToolInvocation) and not event.provider_executed for event in events)


async def run_durable(
    run_id: str,
    log: EventLog,
    lease: Lease,
    call_model: CallModel,
    messages: Sequence[Any],
    tools: ToolRegistry,
    *,
    next_messages: NextMessages,
    owner: str,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    max_steps: int = 10,
    on_failure: OnFailure = "finish",
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
    approvals: Approvals | None = None,
    approved_messages: ApprovedMessages | None = None,
) -> AgentRun:
    """Run (or take over and finish) the durable run ``run_id`` in ``log``; see the module docstring.

    A run already over is returned as its log tells it, and the model is not called. A run queued with
    approval decisions (``chat_routes`` over `DurableRuns`) first runs the approved calls and denies the
    others.

    Args:
        run_id: the run's response id in ``log``.
        log: the event log the run is written to.
        lease: the lease store the workers share.
        call_model: as `run_loop` takes it.
        messages: the conversation to start from; used only when the log does not hold the run's start
            yet.
        tools: the tools the model may call.
        next_messages: as `run_loop` takes it.
        owner: this worker's name.
        lease_ttl: seconds the lease lasts unless renewed (the worker renews it while it works).
        max_steps: responses at most.
        on_failure: `run_tools`' option.
        cancel_grace: `run_tools`' option.
        approvals: `run_tools`' option.
        approved_messages: gives the messages that carry the outputs of the calls decided with the
            request; None: ``next_messages`` of a turn made of those calls alone.

    Returns:
        The run: its turns, the conversation and why it stopped.

    Raises:
        LeaseHeld: another worker holds the run.
        LeaseLost: this worker's lease ran out while it worked (it wrote nothing after).
        Exception: the response's own, after the log's terminal entry says ``failed``.
    """
    check_count("max_steps", max_steps, minimum=1)
    keeper = _Keeper(lease, log, run_id, owner, lease_ttl)
    if not await keeper.acquire():
        raise LeaseHeld(f"run {run_id!r}: another worker holds its lease")
    try:
        state, status = await read_run(log, run_id)
        if state.stop_reason is not None:
            return await _over(log, run_id, state, status)
        if status is None:
            await log.create(run_id, meta={"durable": True})
        durable = _Durable(
            run_id,
            log,
            keeper,
            call_model,
            tools,
            next_messages,
            approved_messages,
            {"on_failure": on_failure, "cancel_grace": cancel_grace, "approvals": approvals},
        )
        return await _held(durable, keeper, state, messages, max_steps)
    finally:
        if not keeper.lost:
            with anyio.CancelScope(shield=True), suppress(Exception):  # else it expires by itself
                await lease.release(run_id, owner, keeper.token)


async def _held(
    durable: _Durable, keeper: _Keeper, state: RunState, messages: Sequence[Any], max_steps: int
) -> AgentRun:
    """The run under its lease: the keeper renews it; a lost lease stops the run, and so does a stop
    request, which ends it ``stopped``."""
    result: AgentRun | None = None
    with _sole_exception_unwrapped():
        async with anyio.create_task_group() as group:
            group.start_soon(keeper.keep, group)
            group.start_soon(durable.watch_stop, group)
            try:
                result = await durable.run(state, messages, max_steps)
            except (LeaseLost, anyio.get_cancelled_exc_class()):
                raise
            except Exception as exc:
                if not keeper.lost:
                    with anyio.CancelScope(shield=True), suppress(Exception):  # the run's error matters
                        await durable.log.end(durable.run_id, error=error_to_entry(exc), state="failed")
                raise
            group.cancel_scope.cancel()
    if result is None and durable.stopping and not keeper.lost:
        return await durable.stopped()
    if result is None:  # the keeper cancelled the run: the lease was lost
        raise LeaseLost(f"run {durable.run_id!r}: the lease of {keeper.owner!r} was lost; it stopped writing")
    return result


async def _over(log: EventLog, run_id: str, state: RunState, status: ResponseStatus | None) -> AgentRun:
    """A run whose ``RUN_END`` is logged, as the log tells it; ended in the log if its worker died (or
    was stopped) before the terminal entry."""
    if status is not None and status.state == "running":
        await log.end(run_id)
    return AgentRun(state.messages or [], state.turns, _stop_reason(state.stop_reason or ""))


_STOP_REASONS: Final[dict[str, StopReason]] = {reason: reason for reason in get_args(StopReason)}


def _stop_reason(value: str) -> StopReason:
    """The logged stop reason of a run (``no_calls`` for one this version does not know)."""
    return _STOP_REASONS.get(value, "no_calls")


async def serve_runs(
    runs: DurableRuns,
    lease: Lease,
    call_model: CallModel,
    tools: ToolRegistry,
    *,
    next_messages: NextMessages,
    owner: str,
    poll: float = 0.5,
    max_runs: int = 16,
    **options: Any,
) -> None:
    """Run the durable runs queued on ``runs`` until cancelled: a worker process's main loop.

    Every ``poll`` seconds it lists the runs not over (`DurableRuns.queued`) and starts
    `run_durable` on each it does not run already: a new run, or one whose worker died (its lease
    expired). A run another worker holds is left to it. A run's own failure is in its log and on the
    ``streamfold`` logger; the loop goes on.

    Args:
        runs: the queue of runs (over an event log).
        lease: the lease store the workers share.
        call_model: as `run_durable` takes it.
        tools: as `run_durable` takes it.
        next_messages: as `run_durable` takes it.
        owner: this worker's name.
        poll: seconds between two looks at the queue.
        max_runs: runs this worker runs at a time at most.
        **options: more options of `run_durable` (``lease_ttl``, ``max_steps``, ``approvals``,
            ``approved_messages``, ...).

    Raises:
        ConfigurationError: ``poll`` is not a positive number.
    """
    check_count("max_runs", max_runs, minimum=1)
    if not poll > 0:
        raise ConfigurationError(f"poll is a positive number of seconds, got {poll!r}")
    running: set[str] = set()

    async def one(run_id: str) -> None:
        try:
            await run_durable(
                run_id,
                runs.log,
                lease,
                call_model,
                (),
                tools,
                next_messages=next_messages,
                owner=owner,
                **options,
            )
        except LeaseHeld:
            pass  # another worker runs it
        except Exception as exc:
            _logger.warning("durable run %r on %r: %s: %s", run_id, owner, type(exc).__name__, exc)
        finally:
            running.discard(run_id)

    async with anyio.create_task_group() as group:
        while True:
            try:
                queued = await runs.queued()
            except ServingError as exc:  # the log unreachable for now: try again at the next poll
                _logger.warning("durable runs of %r: the log: %s", owner, exc)
                queued = []
            for status in queued:
                if status.response_id not in running and len(running) < max_runs:
                    running.add(status.response_id)
                    group.start_soon(one, status.response_id, name=f"durable run {status.response_id}")
            await anyio.sleep(poll)
