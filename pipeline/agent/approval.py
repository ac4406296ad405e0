"""Tool calls a person approves: the broker a run waits on, and the decisions the next request brings.

A tool registered with ``start="approval"`` (`tool`) runs only
once a person approved its call. When the call is folded, the tool runner puts a
`ToolApprovalRequest` in the stream, right after the
`ToolInvocation`; the UI encoders send it as the Vercel AI SDK's
``tool-approval-request`` chunk and as an AG-UI interrupt. The decision comes back one of two ways:

- **Within the run**: pass ``approvals=Approvals(timeout=...)`` to `run_tools` or
  `run_loop`. Whoever shows the request calls `Approvals.decide` (a button's
  POST handler, a terminal prompt); the call waits for it.
- **With the next request** (the web protocols, where a response must end before the UI answers):
  without ``approvals`` nobody can decide within the run, so the call *awaits approval*: its request
  goes out, it gets no output in this run (`awaiting` lists it) and
  `run_loop` stops with ``awaiting_approval``. The UI sends the decision with its
  next request (the AI SDK: the tool part in state ``approval-responded``; AG-UI: a ``resume`` entry
  answering the interrupt). `chat_approvals` reads them from the request body and
  `run_approved` runs each approved call and answers each denied one.

The policy:

- An approved call runs like an ``after_finish`` one: only after the response ended ``stop`` or
  ``tool_calls``; after any other finish (or a failure) it is ``not_run``.
- A denied call is never run: its `ToolOutput` has status ``denied`` and says
  why (``denied: <the person's reason>``, or ``denied: a person refused this call``). The next turn
  carries it to the model like any failed call (`TurnBuilder`: a tool message
  for OpenAI, a ``tool_result`` with ``is_error`` for Anthropic, ``{"error": ...}`` for Gemini).
- Expiry: a request undecided ``timeout`` seconds (default `DEFAULT_APPROVAL_TIMEOUT`) after it
  went out is denied (``denied: no decision within 600 s``); its ``expires_at`` says when, and a
  decision after that is refused (`Approvals.decide` returns False). ``timeout=None`` waits as
  long as the run lives. A request whose decision comes with the next request has no expiry here: the
  UI holds it (its ``expires_at`` is None).
- A decision that comes with a request is the client's word for the call's name and arguments: serve
  approvals only to clients you would let send the conversation itself (the routes' ``authorize``).
  `run_approved` runs only tools registered with ``start="approval"``; a decision for any other
  tool is ``denied``.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import anyio
import pydantic

from pipeline.agent._calls import DEFAULT_CANCEL_GRACE, check_cancel_grace, execute, tool_output
from pipeline.agent.tools import ToolRegistry
from pipeline.errors import ConfigurationError
from pipeline.models import ToolApproval, ToolApprovalRequest, ToolInvocation, ToolOutput

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT",
    "Approvals",
    "chat_approvals",
    "denied_output",
    "run_approved",
]

DEFAULT_APPROVAL_TIMEOUT = 600.0
"""Seconds a call waits for a person's decision before it is denied."""

_REFUSED = "a person refused this call"


def denied_output(call: ToolInvocation | ToolApproval, reason: str | None) -> ToolOutput:
    """The ``denied`` output of a call: ``denied: <reason>``.

    Args:
        call: the call, or the decision on it.
        reason: why it was denied; None or empty: a person's refusal.
    """
    return ToolOutput(
        call_id=call.call_id if isinstance(call, ToolApproval) else call.id,
        name=call.name,
        status="denied",
        output=f"denied: {reason or _REFUSED}",
    )


class Approvals:
    """Decisions on the approval requests of a run, made while it waits (see the module docstring).

    Use it from the event loop's thread (a web handler, a task); one `Approvals` may serve many runs. A
    decision names a call by its id, so a call whose id another run's pending request has is not run
    (``not_run``): give runs that share one `Approvals` ids of their own (the provider's, or an
    ``id_factory`` that is not merely numbered).

    Args:
        timeout: seconds a request waits before it is denied; None: as long as the run lives.

    Raises:
        ConfigurationError: ``timeout`` is not a positive number or None.
    """

    def __init__(self, *, timeout: float | None = DEFAULT_APPROVAL_TIMEOUT) -> None:
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf
        ):
            raise ConfigurationError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
        self.timeout = timeout
        self.pending: dict[str, ToolApprovalRequest] = {}
        """The requests waiting for a decision, by call id."""
        self._decided: dict[str, tuple[anyio.Event, list[ToolApproval]]] = {}

    def request(self, invocation: ToolInvocation) -> ToolApprovalRequest:
        """Open the request of ``invocation`` (the runner does, when the call is folded)."""
        expires_at = None if self.timeout is None else time.time() + self.timeout
        request = ToolApprovalRequest(
            call_id=invocation.id, name=invocation.name, arguments=invocation.arguments, expires_at=expires_at
        )
        self.pending[invocation.id] = request
        self._decided[invocation.id] = (anyio.Event(), [])
        return request

    def decide(self, call_id: str, approved: bool, reason: str | None = None) -> bool:
        """Approve or deny the pending call ``call_id``.

        Args:
            call_id: the call's id, as its `ToolApprovalRequest` gives it.
            approved: True runs the call; False denies it.
            reason: goes to the model with a denial.

        Returns:
            False, changing nothing, when no request of that id waits (unknown, decided, expired, or its
            run ended); else True."""
        request = self.pending.pop(call_id, None)
        if request is None:
            return False
        event, decision = self._decided[call_id]
        decision.append(
            ToolApproval(
                call_id=call_id,
                approved=bool(approved),
                name=request.name,
                arguments=request.arguments,
                reason=reason,
            )
        )
        event.set()
        return True

    async def wait(self, request: ToolApprovalRequest) -> ToolApproval:
        """The decision on ``request``; a denial once it expires. Cancelling the wait withdraws it."""
        event, decision = self._decided[request.call_id]
        try:
            remaining = None if request.expires_at is None else request.expires_at - time.time()
            with anyio.move_on_after(remaining):
                await event.wait()
        finally:
            self.pending.pop(request.call_id, None)
            del self._decided[request.call_id]
        if decision:
            return decision[0]
        return ToolApproval(
            call_id=request.call_id,
            approved=False,
            name=request.name,
            arguments=request.arguments,
            reason=f"no decision within {self.timeout:g} s",
        )


async def run_approved(
    approvals: Iterable[ToolApproval],
    tools: ToolRegistry,
    *,
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
) -> AsyncIterator[ToolOutput]:
    """One `ToolOutput` per decision, in order: an approved call of a ``start="approval"``
    tool runs (within its timeout, as the runner runs it); a denied one gets its ``denied`` output; a
    decision for a tool that is not registered is ``unknown_tool``, for one that does not ask for
    approval ``denied``, with arguments that fail validation ``invalid_arguments``.

    The decisions of a previous response's calls, as `chat_approvals` reads them from the next
    request: that response ended ``tool_calls`` (its calls awaited approval), so the finish is safe. A
    call id named twice gets one output; a request sent twice runs its approved calls twice (keep the
    ids of the calls you ran if a client may retry: the call id is the idempotency key).

    Args:
        approvals: the decisions, e.g. from `chat_approvals`.
        tools: the registry the calls' tools are in.
        cancel_grace: seconds a timed-out tool has to stop before it is abandoned.

    Yields:
        One `ToolOutput` per call, in the order of the decisions.
    """
    check_cancel_grace(cancel_grace)
    answered: set[str] = set()
    for approval in approvals:
        if approval.call_id in answered:
            continue  # one output per call, however often the request names it
        answered.add(approval.call_id)
        call = ToolInvocation(approval.call_id, approval.name, dict(approval.arguments))
        tool = tools.get(approval.name)
        if tool is None:
            yield tool_output(call, "unknown_tool", f"no tool named {approval.name!r}")
        elif tool.start != "approval":
            yield denied_output(call, f"tool {approval.name!r} does not run on an approval")
        elif not approval.approved:
            yield denied_output(call, approval.reason)
        else:
            try:
                arguments = tool.validate(call.arguments)
            except pydantic.ValidationError as exc:
                yield tool_output(call, "invalid_arguments", f"invalid_arguments: {exc}")
                continue
            yield await execute(call, tool, arguments, cancel_grace)


def chat_approvals(body: Mapping[str, Any], protocol: str) -> list[ToolApproval]:
    """The decisions a chat request brings: ``vercel``, the tool parts of the last assistant message in
    state ``approval-responded``; ``agui``, the ``resume`` entries answering approval interrupts (see
    `operators.encode.vercel.vercel_approvals`, `operators.encode.agui.agui_approvals`).

    Args:
        body: the chat request's JSON body.
        protocol: ``vercel`` or ``agui``.

    Raises:
        ConfigurationError: an unknown protocol.
    """
    if protocol == "vercel":
        from operators.encode.vercel import vercel_approvals

        return vercel_approvals(body.get("messages"))
    if protocol == "agui":
        from operators.encode.agui import agui_approvals

        return agui_approvals(body)
    raise ConfigurationError(f"approvals come in the vercel or agui protocol, not {protocol!r}")
