"""streamfold events to the Vercel AI SDK UI message stream v1: what ``useChat`` reads.

`VercelUIEncoder` is a sans-IO core from pipeline items (or their ``to_dict()`` wire form) to SSE
frames (``data: <chunk JSON>``), `encode_vercel` its operator. Serve the frames with
`VERCEL_HEADERS` (``x-vercel-ai-ui-message-stream: v1``).

The stream is one UI message: ``start``, then per response a step (``start-step`` ... ``finish-step``),
then ``finish`` with the mapped finish reason (``messageMetadata``: the last ``usage``, in the AI SDK's
``LanguageModelUsage`` words, and the ``model``) and ``data: [DONE]``. A core must see a stream from its
first item (a reader rejects a delta of a part it never saw start): to resume, replay from the start.
Inside a step:

- text and reasoning segments: ``text-*`` / ``reasoning-*`` with the segment id; a reasoning signature or
  encrypted content goes in ``providerMetadata`` on ``reasoning-end`` (under the ``provider`` key);
- a tool segment: ``tool-input-start``, its raw argument text as ``tool-input-delta``s (arguments that
  arrive whole, a file tool's or a custom tool's input: one delta with the whole JSON when the call
  ends), then ``tool-input-available`` (or ``tool-input-error``) as soon as the call is folded, not at
  the end of the response;
- a `ToolOutput`: ``tool-output-available`` / ``tool-output-error``, or
  ``tool-output-denied`` for a ``denied`` one; a provider-executed tool's result likewise (with
  ``providerExecuted``);
- a `ToolApprovalRequest`: ``tool-approval-request {approvalId, toolCallId}``
  (the part's state becomes ``approval-requested``). The client answers with ``addToolApprovalResponse``
  and sends the part in state ``approval-responded`` with its next request (with ``sendAutomaticallyWhen:
  lastAssistantMessageIsCompleteWithApprovalResponses``): `vercel_approvals` reads it;
- streamfold's extras, unless ``extras=False``, as transient data parts (``onData`` sees them; they never
  enter the message): ``data-tool-argument`` ``{toolCallId, path, delta | value}`` for each decoded
  argument, ``data-file-delta`` ``{toolCallId, toolName, delta}`` for a file being written or patched.

Keys are camelCase and only the fields the chunk schemas declare (older clients' strict schemas reject
any other key). An error becomes ``error
{errorText}``, then ``finish {finishReason: "error"}`` and ``[DONE]``; messages of non-streamfold
exceptions are withheld.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
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
)
from pipeline.stage import operator_stream

__all__ = [
    "VERCEL_DONE",
    "VERCEL_HEADERS",
    "VercelUIEncoder",
    "encode_vercel",
    "vercel_approvals",
    "vercel_finish_reason",
    "vercel_usage",
]

VERCEL_HEADERS: Final = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
)
"""The response headers of a UI message stream (``connection`` is dropped by HTTP/2 servers)."""
VERCEL_DONE: Final = b"data: [DONE]\n\n"

_FINISH_REASONS: Final = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "content_filter": "content-filter",
    "error": "error",
}
_START, _CONTENT, _ARGUMENT, _END = (
    SegmentEventType.START,
    SegmentEventType.CONTENT,
    SegmentEventType.ARGUMENT,
    SegmentEventType.END,
)


def vercel_finish_reason(reason: str | None) -> str | None:
    """streamfold's finish reason in the UI stream's words (``other`` for the rest; None stays None)."""
    if reason is None:
        return None
    return _FINISH_REASONS.get(reason, "other")


def vercel_usage(usage: TokenUsage) -> dict[str, int]:
    """`TokenUsage` in the AI SDK's ``LanguageModelUsage`` words (what ``streamText`` reports)."""
    result = {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }
    if usage.reasoning_tokens is not None:
        result["reasoningTokens"] = usage.reasoning_tokens
    if usage.cached_tokens is not None:
        result["cachedInputTokens"] = usage.cached_tokens
    return result


class VercelUIEncoder:
    """Sans-IO core: pipeline items -> UI message stream v1 SSE frames (see the module doc).

    Each frame is one whole SSE event, so a server may prefix ``id:`` lines.

    Args:
        message_id: ``start``'s ``messageId``; None: none (the client makes one).
        provider: the ``providerMetadata`` key for signatures: ``anthropic``, ``openai``, ``google`` let
            the AI SDK send them back next turn (default ``streamfold``).
        extras: write the transient ``data-*`` parts.
    """

    __slots__ = (
        "_calls",
        "_done",
        "_extras",
        "_finish_reason",
        "_message_id",
        "_metadata",
        "_provider",
        "_reasoning",
        "_results",
        "_started",
        "_step_open",
        "_usage",
    )

    def __init__(
        self, *, message_id: str | None = None, provider: str | None = None, extras: bool = True
    ) -> None:
        self._message_id = message_id
        self._provider = provider or "streamfold"
        self._extras = extras
        self._started = False
        self._step_open = False
        self._done = False
        self._calls: dict[str, ToolCallState] = {}
        self._reasoning: set[str] = set()
        """Open reasoning segments (their CONTENT and END carry no segment type)."""
        self._results: set[str] = set()
        """Open ``tool_result`` segments (their END carries the result)."""
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self._metadata: dict[str, Any] = {}

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
            self._output(frames, item)
        elif isinstance(item, ToolApprovalRequest):
            chunk = {"type": "tool-approval-request", "approvalId": item.approval_id}
            frames.append(sse_data({**chunk, "toolCallId": item.call_id}))
        elif isinstance(item, ResponseEnd):
            self._response_end(frames, item)
        elif self._extras:
            frames.append(sse_data({"type": "data-streamfold-item", "data": item, "transient": True}))
        return frames

    def finish(self) -> list[bytes]:
        """The input ended: close the step and the message (``finish``, ``[DONE]``)."""
        if self._done:
            return []
        frames: list[bytes] = []
        if not self._started:
            self._start(frames)
        self._close_step(frames)
        chunk: dict[str, Any] = {"type": "finish"}
        reason = vercel_finish_reason(self._finish_reason)
        if reason is not None:
            chunk["finishReason"] = reason
        metadata = self._message_metadata()
        if metadata:
            chunk["messageMetadata"] = metadata
        frames.append(sse_data(chunk))
        frames.append(VERCEL_DONE)
        self._done = True
        return frames

    def abort(self, exc: BaseException) -> list[bytes]:
        """The input failed: ``error``, then the message closes with finish reason ``error``."""
        return self.error(error_text(exc))

    def error(self, message: str) -> list[bytes]:
        """End the stream with ``error {errorText: message}`` (for a server that learns of an error
        itself, e.g. a log's failed terminal entry)."""
        if self._done:
            return []
        frames: list[bytes] = []
        if not self._started:
            self._start(frames)
        frames.append(sse_data({"type": "error", "errorText": message}))
        self._close_step(frames)
        frames.append(sse_data({"type": "finish", "finishReason": "error"}))
        frames.append(VERCEL_DONE)
        self._done = True
        return frames

    def _start(self, frames: list[bytes]) -> None:
        self._started = True
        chunk: dict[str, Any] = {"type": "start"}
        if self._message_id is not None:
            chunk["messageId"] = self._message_id
        frames.append(sse_data(chunk))

    def _open_step(self, frames: list[bytes]) -> None:
        if not self._step_open:
            self._step_open = True
            frames.append(b'data: {"type":"start-step"}\n\n')

    def _close_step(self, frames: list[bytes]) -> None:
        for call_id, call in self._calls.items():
            if not call.announced and call.end is not None:
                self._announce(frames, call_id, call, invocation_from_end(call.end, call))
        if self._step_open:
            self._step_open = False
            frames.append(b'data: {"type":"finish-step"}\n\n')

    def _segment(self, frames: list[bytes], event: SegmentEvent) -> None:
        kind = event.event_type
        if kind is _CONTENT:
            self._content(frames, event)
            return
        if kind is _ARGUMENT:
            if self._extras:
                data = argument_data(event)
                frames.append(sse_data({"type": "data-tool-argument", "data": data, "transient": True}))
            return
        self._open_step(frames)
        segment_type = event.segment_type
        if kind is _START:
            self._segment_start(frames, event, segment_type)
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
                self._open_step(frames)
                part = "reasoning-delta" if segment_id in self._reasoning else "text-delta"
                frames.append(sse_data({"type": part, "id": segment_id, "delta": delta}))
        elif call.raw:
            call.args_sent = True
            frames.append(
                sse_data({"type": "tool-input-delta", "toolCallId": segment_id, "inputTextDelta": delta})
            )
        elif call.kind in FILE_SEGMENTS and self._extras:
            file_delta = {"toolCallId": segment_id, "toolName": call.name, "delta": delta}
            frames.append(sse_data({"type": "data-file-delta", "data": file_delta, "transient": True}))

    def _segment_start(
        self, frames: list[bytes], event: SegmentEvent, segment_type: SegmentType | None
    ) -> None:
        segment_id = event.segment_id
        if segment_type is SegmentType.TEXT:
            frames.append(sse_data({"type": "text-start", "id": segment_id}))
        elif segment_type is SegmentType.REASONING:
            self._reasoning.add(segment_id)
            frames.append(sse_data({"type": "reasoning-start", "id": segment_id}))
        elif segment_type is SegmentType.TOOL_RESULT:
            self._results.add(segment_id)
        elif segment_type in TOOL_SEGMENTS:
            call = ToolCallState.starting(event, segment_type)
            self._calls[segment_id] = call
            self._tool_start(frames, segment_id, call)

    def _tool_start(self, frames: list[bytes], call_id: str, call: ToolCallState) -> None:
        chunk: dict[str, Any] = {"type": "tool-input-start", "toolCallId": call_id, "toolName": call.name}
        if call.provider_executed:
            chunk["providerExecuted"] = True
        frames.append(sse_data(chunk))

    def _segment_end(self, frames: list[bytes], event: SegmentEvent) -> None:
        segment_id = event.segment_id
        call = self._calls.get(segment_id)
        if call is not None:
            call.end = event
            if not call.args_sent:
                self._whole_arguments(frames, segment_id, call, event.arguments, event.error)
            return
        metadata = event.metadata
        if segment_id in self._results:
            self._results.discard(segment_id)
            self._tool_result(frames, metadata)
            return
        chunk: dict[str, Any] = {"type": "text-end", "id": segment_id}
        if segment_id in self._reasoning:
            self._reasoning.discard(segment_id)
            chunk["type"] = "reasoning-end"
            provider = self._reasoning_metadata(metadata)
            if provider:
                chunk["providerMetadata"] = {self._provider: provider}
        elif metadata.get("signature") is not None:
            chunk["providerMetadata"] = {self._provider: {"signature": metadata["signature"]}}
        frames.append(sse_data(chunk))

    def _reasoning_metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        provider: dict[str, Any] = {}
        if metadata.get("signature") is not None:
            provider["signature"] = metadata["signature"]
        encrypted = metadata.get("encrypted_content")
        if encrypted is not None:
            key = {"anthropic": "redactedData", "openai": "reasoningEncryptedContent"}.get(
                self._provider, "encryptedContent"
            )
            provider[key] = encrypted
        return provider

    def _whole_arguments(
        self, frames: list[bytes], call_id: str, call: ToolCallState, arguments: Any, error: Any
    ) -> None:
        """One ``tool-input-delta`` with the whole input, for a call whose raw JSON did not stream."""
        call.args_sent = True
        raw = error.raw if error is not None and error.raw else None
        text = raw if raw is not None else encode_json(arguments if arguments is not None else {}).decode()
        frames.append(sse_data({"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": text}))

    def _tool_result(self, frames: list[bytes], metadata: dict[str, Any]) -> None:
        call_id = metadata["call_id"]
        result = metadata.get("result")
        if call_id not in self._calls:
            if self._extras:
                data = {"toolCallId": call_id, "toolName": metadata.get("tool_name"), "result": result}
                frames.append(sse_data({"type": "data-tool-result", "data": data, "transient": True}))
            return
        if metadata.get("is_error"):
            text = result if isinstance(result, str) else encode_json(result).decode()
            chunk: dict[str, Any] = {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
        else:
            chunk = {"type": "tool-output-available", "toolCallId": call_id, "output": result}
        chunk["providerExecuted"] = True
        frames.append(sse_data(chunk))

    def _invocation(self, frames: list[bytes], invocation: ToolInvocation) -> None:
        call = self._calls.get(invocation.id)
        if call is None:
            self._open_step(frames)
            call = ToolCallState(
                invocation.name,
                SegmentType.TOOL_CALL,
                provider_executed=invocation.provider_executed,
                raw=False,
            )
            self._calls[invocation.id] = call
            self._tool_start(frames, invocation.id, call)
        if call.announced:
            return
        if not call.args_sent:
            self._whole_arguments(frames, invocation.id, call, invocation.arguments, invocation.error)
        self._announce(frames, invocation.id, call, invocation)

    def _announce(
        self, frames: list[bytes], call_id: str, call: ToolCallState, invocation: ToolInvocation
    ) -> None:
        call.announced = True
        chunk: dict[str, Any] = {
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": invocation.name,
        }
        error = invocation.error
        if error is None:
            chunk["input"] = invocation.arguments
        else:
            chunk["type"] = "tool-input-error"
            chunk["input"] = error.raw if error.raw else invocation.arguments
        if invocation.provider_executed or call.provider_executed:
            chunk["providerExecuted"] = True
        if invocation.signature is not None:
            chunk["providerMetadata"] = {self._provider: {"signature": invocation.signature}}
        elif call.end is not None and call.end.metadata.get("signature") is not None:
            chunk["providerMetadata"] = {self._provider: {"signature": call.end.metadata["signature"]}}
        if error is not None:
            chunk["errorText"] = f"{error.kind}: {error.message}"
        frames.append(sse_data(chunk))

    def _output(self, frames: list[bytes], output: ToolOutput) -> None:
        if output.status == "denied":
            frames.append(sse_data({"type": "tool-output-denied", "toolCallId": output.call_id}))
            return
        if output.status == "ok":
            chunk: dict[str, Any] = {"type": "tool-output-available", "toolCallId": output.call_id}
            chunk["output"] = output.output
        else:
            chunk = {"type": "tool-output-error", "toolCallId": output.call_id}
            chunk["errorText"] = f"{output.status}: {output.text}"
        frames.append(sse_data(chunk))

    def _response_end(self, frames: list[bytes], end: ResponseEnd) -> None:
        self._close_step(frames)
        if end.finish_reason is not None:
            self._finish_reason = end.finish_reason
        if end.usage is not None:
            self._usage = end.usage
        for key in ("model", "id"):
            if key in end.metadata:
                self._metadata[key] = end.metadata[key]

    def _message_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        if self._usage is not None:
            metadata["usage"] = vercel_usage(self._usage)
        if "model" in self._metadata:
            metadata["model"] = self._metadata["model"]
        return metadata


class _Approval(msgspec.Struct):
    id: str
    approved: bool | None = None
    reason: str | None = None


class _UIPart(msgspec.Struct, rename="camel"):
    """A UI message part, as far as approvals go (text, reasoning and data parts decode too)."""

    type: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    state: str | None = None
    input: Any = None
    approval: _Approval | None = None


class _UIMessage(msgspec.Struct):
    role: str
    parts: list[_UIPart] = msgspec.field(default_factory=list)


def vercel_approvals(messages: Any) -> list[ToolApproval]:
    """The decisions ``useChat`` sends back: each tool part of the last message, when it is the
    assistant's, in state ``approval-responded`` (``{type: "tool-<name>" | "dynamic-tool", toolCallId,
    input, approval: {id, approved, reason?}}``), in order.

    Raises:
        ConfigurationError: ``messages`` is not a list of UI messages (the error says where).
    """
    try:
        decoded = msgspec.convert(messages, list[_UIMessage])
    except msgspec.ValidationError as exc:
        raise ConfigurationError(f"the request's messages are not UI messages: {exc}") from None
    if not decoded or decoded[-1].role != "assistant":
        return []
    return [decision for part in decoded[-1].parts if (decision := _decision(part)) is not None]


def _decision(part: _UIPart) -> ToolApproval | None:
    """The decision of a tool part in state ``approval-responded``; None for any other part."""
    approval = part.approval
    if part.state != "approval-responded" or approval is None or approval.approved is None:
        return None
    name = part.tool_name if part.type == "dynamic-tool" else part.type.removeprefix("tool-")
    if part.tool_call_id is None or name is None:
        return None
    return ToolApproval(
        call_id=part.tool_call_id,
        approved=approval.approved,
        name=name,
        arguments=dict(part.input) if isinstance(part.input, Mapping) else {},
        reason=approval.reason,
    )


@pipable_operator
def encode_vercel(
    source: AsyncIterable[Any],
    *,
    message_id: str | None = None,
    provider: str | None = None,
    extras: bool = True,
) -> AsyncIterator[bytes]:
    """Pipeline items to the SSE frames of the Vercel AI SDK's UI message stream v1.

    Args:
        source: the pipeline's items.
        message_id: as `VercelUIEncoder` takes it.
        provider: as `VercelUIEncoder` takes it.
        extras: as `VercelUIEncoder` takes it.
    """
    return operator_stream(source, VercelUIEncoder(message_id=message_id, provider=provider, extras=extras))
