"""streamfold events to AG-UI events: what CopilotKit, LangGraph's and pydantic-ai's AG-UI clients read.

`AGUIEncoder` is a sans-IO core from pipeline items (or their ``to_dict()`` wire form) to SSE
frames (``data: <event JSON>``, camelCase, optional fields omitted), `encode_agui` its operator.

One stream is one run: ``RUN_STARTED``, the events, then ``RUN_FINISHED`` (with ``result:
{"finishReason": ...}`` and ``usage``) or ``RUN_ERROR``. Inside it:

- a text segment: ``TEXT_MESSAGE_START`` (role ``assistant``) / ``TEXT_MESSAGE_CONTENT`` /
  ``TEXT_MESSAGE_END``, with the segment id as ``messageId``; empty deltas are never sent;
- a reasoning segment: ``REASONING_START``, ``REASONING_MESSAGE_START`` / ``_CONTENT`` / ``_END``, a
  signature or encrypted content as ``REASONING_ENCRYPTED_VALUE`` (subtype ``message``), ``REASONING_END``;
- a tool segment: ``TOOL_CALL_START``, its raw argument text as ``TOOL_CALL_ARGS`` (arguments that arrive
  whole, a file tool's or a custom tool's input: one ARGS with the whole JSON when the call ends), and
  ``TOOL_CALL_END`` as soon as the call is folded; a call that could not be folded also gets a
  ``CUSTOM`` ``streamfold.tool_call_error``;
- every ``TOOL_CALL_START`` of one response carries one ``parentMessageId``: the response's first text
  message, else its first tool call's id, so that ``@ag-ui/client`` builds one assistant message for the
  model's turn (without it, each call becomes an assistant message of its own);
- a `ToolOutput` or a provider-executed tool's result: ``TOOL_CALL_RESULT``. A
  provider-executed call whose result is not in the response (xAI's ``x_search`` steps, say) gets a
  ``TOOL_CALL_RESULT`` saying so (``"The provider ran this tool; its result is not part of this
  response."``) when the response ends: a call without a result is one the client must
  run, for ``@ag-ui/client`` (its ``pendingToolCallIds``) and the frontends built on it;
- a `ToolApprovalRequest` still unanswered when the stream ends (no output for
  its call came): the run is paused, ``RUN_FINISHED`` carries ``outcome: {type: "interrupt",
  interrupts: [...]}``, one interrupt per call (``id`` the approval id, ``reason: "tool_approval"``,
  ``toolCallId``, a ``message``, a ``responseSchema`` ``{approved: boolean, reason?: string}`` and, when
  the request expires, ``expiresAt`` in ISO 8601). The client resumes with a new run whose ``resume``
  entries answer them (``status: "resolved"``, ``payload: {approved, reason?}``; ``cancelled`` is a
  denial): `agui_approvals` reads them. A ``denied`` output is a ``TOOL_CALL_RESULT`` saying why;
- streamfold's extras, unless ``extras=False``, as ``CUSTOM`` events: ``streamfold.argument``
  ``{toolCallId, path, delta | value}``, ``streamfold.file_delta`` ``{toolCallId, toolName, delta}``.

Messages of non-streamfold exceptions are withheld from ``RUN_ERROR``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.encode._ui import (
    FILE_SEGMENTS,
    TOOL_SEGMENTS,
    ToolCallState,
    argument_data,
    as_item,
    error_text,
    invocation_from_end,
    sse_data,
)
from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError
from pipeline.models import (
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolApproval,
    ToolApprovalRequest,
    ToolInvocation,
    ToolOutput,
    call_id_of_approval,
)
from pipeline.stage import operator_stream

__all__ = ["AGUI_HEADERS", "APPROVAL_SCHEMA", "AGUIEncoder", "agui_approvals", "agui_usage", "encode_agui"]

APPROVAL_SCHEMA: Final = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""The ``responseSchema`` of a tool approval interrupt: the ``payload`` a resume entry answers with."""

AGUI_HEADERS: Final = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)
_NO_PROVIDER_RESULT: Final = "The provider ran this tool; its result is not part of this response."
"""The ``content`` of the ``TOOL_CALL_RESULT`` that answers a provider-executed call whose result did not
come: the client has nothing to run."""
_START, _CONTENT, _ARGUMENT, _END = (
    SegmentEventType.START,
    SegmentEventType.CONTENT,
    SegmentEventType.ARGUMENT,
    SegmentEventType.END,
)


def _new_id() -> str:
    return uuid.uuid4().hex


def agui_usage(usage: TokenUsage, model: Any = None) -> dict[str, Any]:
    """`TokenUsage` as an AG-UI ``TokenUsage`` entry (input/output totals with their parts)."""
    entry: dict[str, Any] = {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }
    if usage.reasoning_tokens is not None:
        entry["reasoningTokens"] = usage.reasoning_tokens
    if usage.cached_tokens is not None:
        entry["cachedInputTokens"] = usage.cached_tokens
    if usage.cache_creation_tokens is not None:
        entry["cacheWriteInputTokens"] = usage.cache_creation_tokens
    if isinstance(model, str):
        entry["model"] = model
    return entry


class AGUIEncoder:
    """Sans-IO core: pipeline items -> AG-UI SSE frames (see the module doc).

    Each frame is one whole SSE event.

    Args:
        run_id: the run's id (default: a new uuid).
        thread_id: the thread's id (default: the run id).
        extras: write the ``CUSTOM`` events.
    """

    __slots__ = (
        "_answered",
        "_calls",
        "_done",
        "_extras",
        "_finish_reason",
        "_interrupts",
        "_model",
        "_reasoning",
        "_results",
        "_run",
        "_server_calls",
        "_started",
        "_turn_message",
        "_usage",
    )

    def __init__(
        self, *, run_id: str | None = None, thread_id: str | None = None, extras: bool = True
    ) -> None:
        run = run_id or _new_id()
        self._run = {"threadId": thread_id or run, "runId": run}
        self._extras = extras
        self._started = False
        self._done = False
        self._calls: dict[str, ToolCallState] = {}
        self._reasoning: set[str] = set()
        self._results: set[str] = set()
        self._answered: set[str] = set()
        """Calls that got their ``TOOL_CALL_RESULT``."""
        self._turn_message: str | None = None
        """The ``parentMessageId`` of the tool calls of the response under way (``None`` before any)."""
        self._server_calls: list[str] = []
        """The provider-executed calls of the response under way, in order."""
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self._model: Any = None
        self._interrupts: dict[str, ToolApprovalRequest] = {}
        """Approval requests whose call has no output yet, by call id."""

    def feed(self, item: Any) -> list[bytes]:
        """Encode one item; see the module doc."""
        if self._done:
            return []
        item = as_item(item)
        frames: list[bytes] = []
        if not self._started:
            self._start(frames)
        if isinstance(item, SegmentEvent):
            self._segment(frames, item)
        elif isinstance(item, ToolInvocation):
            self._invocation(frames, item)
        elif isinstance(item, ToolOutput):
            self._interrupts.pop(item.call_id, None)
            self._output(frames, item)
        elif isinstance(item, ToolApprovalRequest):
            self._interrupts[item.call_id] = item
        elif isinstance(item, ResponseEnd):
            self._response_end(frames, item)
        elif self._extras:
            frames.append(self._custom("streamfold.item", item))
        return frames

    def finish(self) -> list[bytes]:
        """The input ended: ``RUN_FINISHED``."""
        if self._done:
            return []
        frames: list[bytes] = []
        if not self._started:
            self._start(frames)
        self._flush_calls(frames)
        self._end_turn(frames)
        event: dict[str, Any] = {"type": "RUN_FINISHED", **self._run}
        if self._finish_reason is not None:
            event["result"] = {"finishReason": self._finish_reason}
        if self._usage is not None:
            event["usage"] = [agui_usage(self._usage, self._model)]
        if self._interrupts:
            interrupts = [_interrupt(request) for request in self._interrupts.values()]
            event["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        frames.append(sse_data(event))
        self._done = True
        return frames

    def abort(self, exc: BaseException) -> list[bytes]:
        """The input failed: ``RUN_ERROR`` with the error's class as ``code``."""
        return self.error(error_text(exc), code=type(exc).__name__)

    def error(self, message: str, *, code: str | None = None) -> list[bytes]:
        """End the run with ``RUN_ERROR`` (for a server that learns of an error itself).

        Args:
            message: the event's ``message``.
            code: the event's ``code``; None: none.

        Returns:
            The frames to send: ``RUN_STARTED`` first if the run had not started, nothing once it ended.
        """
        if self._done:
            return []
        frames: list[bytes] = []
        if not self._started:
            self._start(frames)
        event: dict[str, Any] = {"type": "RUN_ERROR", "message": message}
        if code is not None:
            event["code"] = code
        frames.append(sse_data(event))
        self._done = True
        return frames

    def _start(self, frames: list[bytes]) -> None:
        self._started = True
        frames.append(sse_data({"type": "RUN_STARTED", **self._run}))

    def _custom(self, name: str, value: Any) -> bytes:
        return sse_data({"type": "CUSTOM", "name": name, "value": value})

    def _segment(self, frames: list[bytes], event: SegmentEvent) -> None:
        kind = event.event_type
        if kind is _CONTENT:
            self._content(frames, event)
        elif kind is _ARGUMENT:
            if self._extras:
                frames.append(self._custom("streamfold.argument", argument_data(event)))
        elif kind is _START:
            self._segment_start(frames, event)
        elif kind is _END:
            self._segment_end(frames, event)

    def _content(self, frames: list[bytes], event: SegmentEvent) -> None:
        """A CONTENT piece: text or reasoning, a call's argument text, or a file's text (an extension)."""
        delta = event.payload.get("delta")
        if not delta:
            return
        segment_id = event.segment_id
        call = self._calls.get(segment_id)
        if call is None:
            if segment_id not in self._results:
                reasoning = segment_id in self._reasoning
                part = "REASONING_MESSAGE_CONTENT" if reasoning else "TEXT_MESSAGE_CONTENT"
                frames.append(sse_data({"type": part, "messageId": segment_id, "delta": delta}))
        elif call.raw:
            call.args_sent = True
            frames.append(sse_data({"type": "TOOL_CALL_ARGS", "toolCallId": segment_id, "delta": delta}))
        elif call.kind in FILE_SEGMENTS and self._extras:
            value = {"toolCallId": segment_id, "toolName": call.name, "delta": delta}
            frames.append(self._custom("streamfold.file_delta", value))

    def _segment_start(self, frames: list[bytes], event: SegmentEvent) -> None:
        segment_id = event.segment_id
        segment_type = event.segment_type
        if segment_type is SegmentType.TEXT:
            if self._turn_message is None:
                self._turn_message = segment_id
            frames.append(
                sse_data({"type": "TEXT_MESSAGE_START", "messageId": segment_id, "role": "assistant"})
            )
        elif segment_type is SegmentType.REASONING:
            self._reasoning.add(segment_id)
            frames.append(sse_data({"type": "REASONING_START", "messageId": segment_id}))
            frames.append(
                sse_data({"type": "REASONING_MESSAGE_START", "messageId": segment_id, "role": "reasoning"})
            )
        elif segment_type is SegmentType.TOOL_RESULT:
            self._results.add(segment_id)
        elif segment_type in TOOL_SEGMENTS:
            call = ToolCallState.starting(event, segment_type)
            self._calls[segment_id] = call
            frames.append(self._tool_call_start(segment_id, call))

    def _tool_call_start(self, call_id: str, call: ToolCallState) -> bytes:
        """``TOOL_CALL_START`` under the assistant message of the response under way."""
        if self._turn_message is None:
            self._turn_message = call_id
        if call.provider_executed:
            self._server_calls.append(call_id)
        return sse_data(
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": call.name,
                "parentMessageId": self._turn_message,
            }
        )

    def _result(self, frames: list[bytes], message_id: str, call_id: str, content: str) -> None:
        self._answered.add(call_id)
        frames.append(
            sse_data(
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": message_id,
                    "toolCallId": call_id,
                    "content": content,
                    "role": "tool",
                }
            )
        )

    def _end_turn(self, frames: list[bytes]) -> None:
        """The response is over: provider-executed calls still without a result get one saying so."""
        for call_id in self._server_calls:
            if call_id not in self._answered:
                self._result(frames, f"{call_id}:result", call_id, _NO_PROVIDER_RESULT)
        self._server_calls = []
        self._turn_message = None

    def _segment_end(self, frames: list[bytes], event: SegmentEvent) -> None:
        segment_id = event.segment_id
        call = self._calls.get(segment_id)
        metadata = event.metadata
        if call is not None:
            call.end = event
            if not call.args_sent:
                self._whole_arguments(frames, segment_id, call, event.arguments, event.error)
        elif segment_id in self._results:
            self._results.discard(segment_id)
            result = metadata.get("result")
            content = result if isinstance(result, str) else encode_json(result).decode()
            self._result(frames, segment_id, metadata.get("call_id", segment_id), content)
        elif segment_id in self._reasoning:
            self._reasoning.discard(segment_id)
            frames.append(sse_data({"type": "REASONING_MESSAGE_END", "messageId": segment_id}))
            for key in ("signature", "encrypted_content"):
                value = metadata.get(key)
                if isinstance(value, str) and value:
                    frames.append(self._encrypted("message", segment_id, value))
            frames.append(sse_data({"type": "REASONING_END", "messageId": segment_id}))
        else:
            frames.append(sse_data({"type": "TEXT_MESSAGE_END", "messageId": segment_id}))

    @staticmethod
    def _encrypted(subtype: str, entity_id: str, value: str) -> bytes:
        return sse_data(
            {
                "type": "REASONING_ENCRYPTED_VALUE",
                "subtype": subtype,
                "entityId": entity_id,
                "encryptedValue": value,
            }
        )

    def _whole_arguments(
        self, frames: list[bytes], call_id: str, call: ToolCallState, arguments: Any, error: Any
    ) -> None:
        """One ``TOOL_CALL_ARGS`` with the whole input, for a call whose raw JSON did not stream."""
        call.args_sent = True
        raw = error.raw if error is not None and error.raw else None
        text = raw if raw is not None else encode_json(arguments if arguments is not None else {}).decode()
        if text:
            frames.append(sse_data({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": text}))

    def _invocation(self, frames: list[bytes], invocation: ToolInvocation) -> None:
        call = self._calls.get(invocation.id)
        if call is None:
            call = ToolCallState(
                invocation.name,
                SegmentType.TOOL_CALL,
                provider_executed=invocation.provider_executed,
                raw=False,
            )
            self._calls[invocation.id] = call
            frames.append(self._tool_call_start(invocation.id, call))
        if call.announced:
            return
        if not call.args_sent:
            self._whole_arguments(frames, invocation.id, call, invocation.arguments, invocation.error)
        self._announce(frames, invocation.id, invocation)
        call.announced = True

    def _announce(self, frames: list[bytes], call_id: str, invocation: ToolInvocation) -> None:
        if invocation.signature is not None:
            frames.append(self._encrypted("tool-call", call_id, invocation.signature))
        frames.append(sse_data({"type": "TOOL_CALL_END", "toolCallId": call_id}))
        if invocation.error is not None and self._extras:
            value = {"toolCallId": call_id, "error": invocation.error.to_dict()}
            frames.append(self._custom("streamfold.tool_call_error", value))

    def _flush_calls(self, frames: list[bytes]) -> None:
        """Calls whose END came but no invocation (a stream without the folder): ``TOOL_CALL_END`` now."""
        for call_id, call in self._calls.items():
            if not call.announced and call.end is not None:
                call.announced = True
                invocation = invocation_from_end(call.end, call)
                signature = call.end.metadata.get("signature")
                if isinstance(signature, str):
                    invocation = ToolInvocation(
                        invocation.id,
                        invocation.name,
                        invocation.arguments,
                        invocation.error,
                        invocation.provider_executed,
                        signature,
                    )
                self._announce(frames, call_id, invocation)

    def _output(self, frames: list[bytes], output: ToolOutput) -> None:
        self._result(frames, f"{output.call_id}:output", output.call_id, output.text)
        if output.status != "ok" and self._extras:
            frames.append(
                self._custom(
                    "streamfold.tool_output", {"toolCallId": output.call_id, "status": output.status}
                )
            )

    def _response_end(self, frames: list[bytes], end: ResponseEnd) -> None:
        self._flush_calls(frames)
        self._end_turn(frames)
        if end.finish_reason is not None:
            self._finish_reason = end.finish_reason
        if end.usage is not None:
            self._usage = end.usage
        if "model" in end.metadata:
            self._model = end.metadata["model"]
        if self._extras:
            value: dict[str, Any] = {"finishReason": end.finish_reason}
            if end.usage is not None:
                value["usage"] = end.usage.to_dict()
            frames.append(self._custom("streamfold.response_end", value))


def _interrupt(request: ToolApprovalRequest) -> dict[str, Any]:
    """The AG-UI ``Interrupt`` that asks for a decision on ``request``."""
    interrupt: dict[str, Any] = {
        "id": request.approval_id,
        "reason": "tool_approval",
        "message": f"Approve the call of {request.name}?",
        "toolCallId": request.call_id,
        "responseSchema": APPROVAL_SCHEMA,
    }
    if request.expires_at is not None:
        expires = datetime.fromtimestamp(request.expires_at, UTC)
        interrupt["expiresAt"] = expires.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return interrupt


class _FunctionCall(msgspec.Struct):
    name: str
    arguments: str = ""


class _ToolCall(msgspec.Struct):
    id: str
    function: _FunctionCall


class _Message(msgspec.Struct, rename="camel"):
    """An input message, as far as approvals go (its tool calls)."""

    role: str
    tool_calls: list[_ToolCall] | None = None


class _ResumeEntry(msgspec.Struct, rename="camel"):
    interrupt_id: str
    status: str
    payload: Any = None


class _RunInput(msgspec.Struct):
    messages: list[_Message] = msgspec.field(default_factory=list)
    resume: list[_ResumeEntry] | None = None


def agui_approvals(run_input: Mapping[str, Any]) -> list[ToolApproval]:
    """The decisions a resumed AG-UI run brings: each ``resume`` entry of ``run_input``
    (``RunAgentInput``) answering a tool approval interrupt, with its call's name and arguments from the
    input's assistant messages, in order. ``status: "resolved"`` with ``payload.approved`` true
    approves; ``false`` (``payload.reason`` says why) or ``status: "cancelled"`` denies. An entry for
    an interrupt id that does not name a call of the messages gives no decision.

    Raises:
        ConfigurationError: ``run_input``'s messages or resume entries are malformed (the error says where).
    """
    try:
        decoded = msgspec.convert(run_input, _RunInput)
    except msgspec.ValidationError as exc:
        raise ConfigurationError(f"the run input's messages or resume entries: {exc}") from None
    calls = {
        call.id: call.function
        for message in decoded.messages
        if message.role == "assistant"
        for call in message.tool_calls or ()
    }
    return [decision for entry in decoded.resume or () if (decision := _decision(entry, calls)) is not None]


def _decision(entry: _ResumeEntry, calls: Mapping[str, _FunctionCall]) -> ToolApproval | None:
    """The decision of one resume entry, or None when it answers no approval of a known call."""
    call_id = call_id_of_approval(entry.interrupt_id)
    if call_id is None or (function := calls.get(call_id)) is None:
        return None
    payload = entry.payload if isinstance(entry.payload, Mapping) else {}
    reason = payload.get("reason")
    return ToolApproval(
        call_id=call_id,
        approved=entry.status == "resolved" and payload.get("approved") is True,
        name=function.name,
        arguments=_arguments(function.arguments),
        reason=reason if isinstance(reason, str) else None,
    )


def _arguments(text: str) -> dict[str, Any]:
    """A call's JSON arguments as an object; ``{}`` when they are not one (the tool's validation says
    what is missing)."""
    try:
        arguments = msgspec.json.decode(text or "{}")
    except msgspec.DecodeError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


@pipable_operator
def encode_agui(
    source: AsyncIterable[Any],
    *,
    run_id: str | None = None,
    thread_id: str | None = None,
    extras: bool = True,
) -> AsyncIterator[bytes]:
    """Pipeline items to AG-UI SSE frames.

    Args:
        source: the pipeline's items.
        run_id: as `AGUIEncoder` takes it.
        thread_id: as `AGUIEncoder` takes it.
        extras: as `AGUIEncoder` takes it.
    """
    return operator_stream(source, AGUIEncoder(run_id=run_id, thread_id=thread_id, extras=extras))
