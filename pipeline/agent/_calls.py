"""One tool call, bounded: its timeout, a ``CancelledError`` of the tool's own, a tool that ignores its
cancellation, a result that cannot be sent.

The tool's coroutine runs in an asyncio task of its own, awaited with `asyncio.wait` (which never
cancels what it waits for). So a ``CancelledError`` that the tool raises (it awaited something cancelled,
or raised one) ends only that task and becomes the call's ``error`` output, while a cancellation of the run
reaches the runner, never the tool, until the runner cancels the tool itself: once, then it waits at most
``cancel_grace`` seconds. A tool still running then (it swallowed the cancellation) is abandoned: its task
goes on by itself, kept in `_ABANDONED` until it ends, with a warning on the ``streamfold`` logger.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import anyio
import msgspec
import pydantic

from pipeline._jsonenc import encode_json
from pipeline.agent.tools import Tool
from pipeline.errors import ConfigurationError
from pipeline.models import ToolInvocation, ToolOutput, ToolOutputStatus

__all__ = ["DEFAULT_CANCEL_GRACE", "check_cancel_grace", "execute", "tool_output"]

DEFAULT_CANCEL_GRACE = 1.0
"""Seconds a cancelled tool (its timeout, or the run cancelled) has to stop before it is abandoned."""

_logger = logging.getLogger("streamfold")

_ABANDONED: set[asyncio.Task[Any]] = set()
"""Tools' tasks that outlived their grace: held here (the event loop keeps only weak references to its
tasks) until they end."""

_UNSENDABLE = (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError)


def check_cancel_grace(value: object) -> float:
    """``value`` if it is a finite number of seconds >= 0; else a ConfigurationError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ConfigurationError(f"cancel_grace must be a finite number of seconds >= 0, got {value!r}")
    return value


def tool_output(invocation: ToolInvocation, status: ToolOutputStatus, message: str) -> ToolOutput:
    """The output of a call that did not succeed: ``message`` says what failed."""
    return ToolOutput(call_id=invocation.id, name=invocation.name, status=status, output=message)


async def execute(
    invocation: ToolInvocation, tool: Tool, arguments: pydantic.BaseModel, cancel_grace: float
) -> ToolOutput:
    """Run the call within the tool's timeout; its output, whatever happens but the run's cancellation
    (which is raised once the tool has stopped or been abandoned)."""
    task = asyncio.get_running_loop().create_task(tool.call(arguments), name=f"tool {tool.name!r}")
    task.add_done_callback(_retrieve)
    try:
        with anyio.move_on_after(tool.timeout):
            await asyncio.wait((task,))
    except BaseException:  # the run is cancelled: stop the tool, then go on cancelling
        await _stop(task, invocation, cancel_grace)
        raise
    if not task.done():
        await _stop(task, invocation, cancel_grace)
        return tool_output(invocation, "timeout", f"tool {tool.name!r} timed out after {tool.timeout} s")
    return _outcome(invocation, tool, task)


async def _stop(task: asyncio.Task[Any], invocation: ToolInvocation, cancel_grace: float) -> None:
    """Cancel the tool's task once and wait for it, at most ``cancel_grace`` seconds; else abandon it."""
    task.cancel()
    with anyio.move_on_after(cancel_grace, shield=True):
        await asyncio.wait((task,))
    if not task.done():
        _ABANDONED.add(task)
        task.add_done_callback(_ABANDONED.discard)
        _logger.warning(
            "tool %r (call %r) ignored its cancellation for %s s: abandoned, still running",
            invocation.name,
            invocation.id,
            cancel_grace,
        )


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark the task's exception as seen: the output reports it, or nobody waits for it any more."""
    if not task.cancelled():
        task.exception()


def _outcome(invocation: ToolInvocation, tool: Tool, task: asyncio.Task[Any]) -> ToolOutput:
    """The output of a tool that ended by itself."""
    if task.cancelled():
        message = f"tool {tool.name!r} raised CancelledError, though the run was not cancelled"
        return tool_output(invocation, "error", message)
    error = task.exception()
    if error is not None:
        if not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: not the tool's output to give
        return tool_output(invocation, "error", f"tool {tool.name!r} raised {type(error).__name__}: {error}")
    return _sendable(invocation, tool, task.result())


def _sendable(invocation: ToolInvocation, tool: Tool, value: Any) -> ToolOutput:
    """The ``ok`` output, or an ``error`` one if the value cannot go back to the model as JSON (an
    arbitrary object, a generator, a cycle). A string is sent as it is; a pydantic model as its JSON-mode
    dump, JSON-ready by construction (a field that is not raises); any other value is encoded once, to
    check it."""
    if not isinstance(value, str):
        try:
            if isinstance(value, pydantic.BaseModel):
                value = value.model_dump(mode="json")
            else:
                encode_json(value)
        except _UNSENDABLE as exc:
            kind = type(value).__name__
            message = (
                f"tool {tool.name!r} returned a {kind}, which cannot be sent to the model as JSON: {exc}"
            )
            return tool_output(invocation, "error", message)
    return ToolOutput(call_id=invocation.id, name=invocation.name, output=value)
