"""A durable run read back from its event log: what its entries mean, and the run they rebuild (the
entries are listed in `pipeline.agent.durable`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from operators.encode._ui import as_item
from pipeline.agent.runner import Turn
from pipeline.errors import ConfigurationError
from pipeline.fanout.serving._log import Entry, EventLog, ResponseStatus
from pipeline.fanout.serving.runs import RUN_START
from pipeline.models import ResponseEnd, ToolApproval, ToolApprovalRequest, ToolInvocation, ToolOutput

__all__ = ["ABANDONED", "TOOL_APPROVAL", "RunState", "StepState", "read_run", "rebuild"]

ABANDONED: Final = "streamfold_abandoned"
"""The ``ResponseEnd.metadata`` key of the entry that closes a model attempt cut by a dead worker."""

TOOL_APPROVAL: Final = "TOOL_APPROVAL"
"""The type of the entry that logs a decision of the run's broker (``approvals``)."""


@dataclass(slots=True)
class StepState:
    """The step in progress as the log shows it: its last model attempt and its calls."""

    attempt: int
    """The model attempt's number in the step, from 1 (0: the calls decided with the request)."""
    events: list[Any] = field(default_factory=list)
    """The attempt's events so far."""
    complete: bool = False
    """The attempt's ``ResponseEnd`` is logged: the model's part of the step is done."""
    abandoned: bool = False
    """The attempt was closed as abandoned (its worker died mid-stream)."""
    invocations: list[ToolInvocation] = field(default_factory=list)
    """The step's client calls, in order."""
    outputs: dict[str, ToolOutput] = field(default_factory=dict)
    """The calls' logged outputs, by call id."""
    started: set[str] = field(default_factory=set)
    """Call ids whose tool was logged as started."""
    requested: set[str] = field(default_factory=set)
    """Call ids with a logged approval request."""
    decisions: list[ToolApproval] = field(default_factory=list)
    """The approval decisions the run started with (the run's first step: their calls)."""
    approved: dict[str, ToolApproval] = field(default_factory=dict)
    """Decisions of the run's own broker (``approvals``), logged, by call id."""


@dataclass(slots=True)
class RunState:
    """A run rebuilt from its log."""

    messages: list[Any] | None = None
    """The conversation before the step in progress (None: no ``RUN_START`` yet)."""
    turns: list[Turn] = field(default_factory=list)
    """The steps done."""
    current: StepState | None = None
    """The step in progress (None: the next step has not called the model yet)."""
    decided: StepState | None = None
    """The calls decided with the request that started the run, while their messages are not logged."""
    stop_reason: str | None = None
    """The ``RUN_END``'s, once the run is over."""


def rebuild(entries: Sequence[Entry]) -> RunState:
    """The run that ``entries`` (a run's log from its first entry) describe."""
    state = RunState()
    for entry in entries:
        if entry.data is not None:
            _apply(state, _decode(entry))
    return state


def _decode(entry: Entry) -> dict[str, Any]:
    item = msgspec.json.decode(entry.data or b"null")
    if not isinstance(item, dict):
        raise ConfigurationError(f"entry {entry.id} of a durable run is not an object: {item!r}")
    return item


def _apply(state: RunState, item: dict[str, Any]) -> None:
    kind = item.get("type")
    if not isinstance(kind, str):
        kind = ""
    apply = _RUN_ENTRIES.get(kind)
    if apply is not None:
        apply(state, item)
        return
    step = state.current if state.current is not None else state.decided
    if step is not None:
        _apply_to_step(step, kind, item)


def _apply_start(state: RunState, item: dict[str, Any]) -> None:
    """``RUN_START``: the first messages, and the decisions the starting request brought."""
    state.messages = list(item["messages"])
    if item.get("approvals"):
        state.decided = StepState(0, decisions=msgspec.convert(item["approvals"], list[ToolApproval]))


def _apply_step(state: RunState, item: dict[str, Any]) -> None:
    """``RUN_STEP``: an attempt at a step begins."""
    state.current = StepState(int(item["attempt"]))


def _apply_messages(state: RunState, item: dict[str, Any]) -> None:
    """``RUN_MESSAGES``: the step is over, its messages join the conversation."""
    step = state.current
    if step is not None:
        state.turns.append(Turn(step.events, list(step.outputs.values())))
    state.messages = [*(state.messages or []), *item["messages"]]
    state.current = state.decided = None


def _apply_end(state: RunState, item: dict[str, Any]) -> None:
    """``RUN_END``: why the run stopped."""
    state.stop_reason = str(item.get("stop_reason"))


_RUN_ENTRIES: dict[str, Callable[[RunState, dict[str, Any]], None]] = {
    RUN_START: _apply_start,
    "RUN_STEP": _apply_step,
    "RUN_MESSAGES": _apply_messages,
    "RUN_END": _apply_end,
}
"""The run's own entries; every other entry belongs to the step under way."""


def _apply_started(step: StepState, item: dict[str, Any]) -> None:
    """``TOOL_STARTED``: the call's tool began (it may have had its effect)."""
    step.started.add(str(item["call_id"]))


def _apply_approval(step: StepState, item: dict[str, Any]) -> None:
    """``TOOL_APPROVAL``: the run's broker decided a call."""
    decision = msgspec.convert({k: v for k, v in item.items() if k != "type"}, ToolApproval)
    step.approved[decision.call_id] = decision


_STEP_ENTRIES: dict[str, Callable[[StepState, dict[str, Any]], None]] = {
    "TOOL_STARTED": _apply_started,
    TOOL_APPROVAL: _apply_approval,
}
"""The worker's own entries of a step; every other entry is an item of the step's response or tools."""


def _apply_to_step(step: StepState, kind: str, item: dict[str, Any]) -> None:
    apply = _STEP_ENTRIES.get(kind)
    if apply is not None:
        apply(step, item)
    else:
        _apply_item(step, as_item(item))


def _apply_item(step: StepState, typed: Any) -> None:
    """An item of the step: a tool's output, an approval request, the abandoned marker, or an event."""
    if isinstance(typed, ToolOutput):
        step.outputs[typed.call_id] = typed
    elif isinstance(typed, ToolApprovalRequest):
        step.requested.add(typed.call_id)
    elif isinstance(typed, ResponseEnd) and ABANDONED in typed.metadata:
        step.abandoned = True
    else:
        step.events.append(typed)
        if isinstance(typed, ToolInvocation) and not typed.provider_executed:
            step.invocations.append(typed)
        step.complete = step.complete or isinstance(typed, ResponseEnd)


async def read_run(log: EventLog, run_id: str) -> tuple[RunState, ResponseStatus | None]:
    """A run rebuilt from its log.

    Args:
        log: the event log the run is in.
        run_id: the run's response id.

    Returns:
        The run, and its status in the log (None: the log does not have it).

    Raises:
        ConfigurationError: the log no longer holds the run's first entries.
    """
    status = await log.status(run_id)
    if status is None:
        return RunState(), None
    if status.first_id > 1:
        raise ConfigurationError(
            f"run {run_id!r}: the log no longer holds its first entries (first id {status.first_id}); "
            "a durable run needs a retention that keeps the whole run"
        )
    entries: list[Entry] = []
    if status.last_id > 0:
        async for entry in log.read(run_id):
            entries.append(entry)
            if entry.id >= status.last_id:
                break
    return rebuild(entries), status
