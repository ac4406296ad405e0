"""The Amazon Bedrock ``ConverseStream`` converter: stream events -> `ChunkResponse`.

Each event is one member of ``ConverseStreamOutput`` (botocore's ``bedrock-runtime`` service model)::

    messageStart {role}
    contentBlockStart {contentBlockIndex, start: {toolUse: {toolUseId, name, type}} | {toolResult: ...}}
    contentBlockDelta {contentBlockIndex, delta: {text} | {toolUse: {input}} | {reasoningContent:
                       {text} | {signature} | {redactedContent}} | {citation} | {toolResult: [...]}}
    contentBlockStop {contentBlockIndex}
    messageStop {stopReason, additionalModelResponseFields}
    metadata {usage: {inputTokens, outputTokens, totalTokens, cacheReadInputTokens, cacheWriteInputTokens},
              metrics: {latencyMs}, trace, serviceTier}

plus the exceptions ``internalServerException``, ``modelStreamErrorException``, ``validationException``,
``throttlingException`` and ``serviceUnavailableException``, raised as `ProviderError`. An event
arrives as boto3 gives it (``{"contentBlockDelta": {...}}``, from ``for event in response["stream"]``) or
as the bytes `EventStreamFramer` makes of a frame (the same shape);
both decode into one typed event (``_ConverseEvent``).

Text blocks have no ``contentBlockStart``. A ``toolUse`` block is a call (``type: server_tool_use``: run by
the provider, kind ``server``) whose input streams as JSON text and which is finished at its
``contentBlockStop``; a ``toolResult`` block (a server tool's result) becomes a `ToolResult` at
its stop. Reasoning blocks end with ``reasoning_done`` at their stop, each with its own signature or
redacted content (sent on as base64 text in ``encrypted_reasoning``).

``messageStop`` gives the finish reason (``end_turn`` and ``stop_sequence``: ``stop``; ``tool_use``:
``tool_calls``; ``max_tokens`` and ``model_context_window_exceeded``: ``length``; ``guardrail_intervened``
and ``content_filtered``: ``content_filter``; any other word as itself), and ``metadata`` the usage, which
the API sends after ``messageStop``: the response is complete (``is_complete``) once both have come, or at
the end of the input after ``messageStop``. A stream cut off before ``messageStop`` has no finish reason,
and a call whose block never stopped stays unfinished: the later stages report it as truncated.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator
from msgspec import UNSET, UnsetType

from operators.convert._base import MISSING, EventDecoder, IdFactory, field_error, new_call_id
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta, ToolCallKind, ToolResult
from pipeline.stage import operator_stream

__all__ = [
    "BedrockConverseConverter",
    "convert_bedrock_converse",
    "normalize_converse_stop_reason",
]

_STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}

_EXCEPTIONS: Final = (
    "internalServerException",
    "modelStreamErrorException",
    "validationException",
    "throttlingException",
    "serviceUnavailableException",
)


def normalize_converse_stop_reason(stop_reason: str) -> str:
    """Converse's ``stopReason`` in OpenAI's words (``stop``, ``length``, ``tool_calls``, ...)."""
    return _STOP_REASONS.get(stop_reason, stop_reason.lower())


class _Struct(msgspec.Struct, rename="camel", gc=False):
    """The fields of every event Struct are the wire's camelCase names."""


class _ToolUseStart(_Struct):
    tool_use_id: str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    type: str | None = None


class _ToolResultStart(_Struct):
    tool_use_id: str | UnsetType = UNSET
    type: str | None = None
    status: str | None = None


class _BlockStart(_Struct):
    tool_use: _ToolUseStart | UnsetType = UNSET
    tool_result: _ToolResultStart | UnsetType = UNSET


class _ReasoningDelta(_Struct):
    text: str | UnsetType = UNSET
    signature: str | UnsetType = UNSET
    redacted_content: bytes | UnsetType = UNSET
    """Base64 text on the wire, bytes in boto3's events: both decode to the bytes."""


class _ToolUseDelta(_Struct):
    input: str | UnsetType = UNSET


class _BlockDelta(_Struct):
    text: str | UnsetType = UNSET
    tool_use: _ToolUseDelta | UnsetType = UNSET
    reasoning_content: _ReasoningDelta | UnsetType = UNSET
    citation: dict[str, Any] | UnsetType = UNSET
    tool_result: list[Any] | UnsetType = UNSET


class _BlockEvent(_Struct):
    """``contentBlockStart``, ``contentBlockDelta`` and ``contentBlockStop``."""

    content_block_index: int | UnsetType = UNSET
    start: _BlockStart | UnsetType = UNSET
    delta: _BlockDelta | UnsetType = UNSET


class _MessageStart(_Struct):
    role: str | None = None


class _MessageStop(_Struct):
    stop_reason: str | UnsetType = UNSET
    additional_model_response_fields: Any = None


class _Usage(_Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None


class _Metrics(_Struct):
    latency_ms: int | None = None


class _Metadata(_Struct):
    usage: _Usage | None = None
    metrics: _Metrics | None = None
    trace: Any = None
    service_tier: Any = None


class _ConverseEvent(_Struct):
    """One ``ConverseStreamOutput`` member; an event this version does not know decodes to nothing set."""

    content_block_delta: _BlockEvent | UnsetType = UNSET
    content_block_start: _BlockEvent | UnsetType = UNSET
    content_block_stop: _BlockEvent | UnsetType = UNSET
    message_start: _MessageStart | UnsetType = UNSET
    message_stop: _MessageStop | UnsetType = UNSET
    metadata: _Metadata | UnsetType = UNSET
    internal_server_exception: dict[str, Any] | UnsetType = UNSET
    model_stream_error_exception: dict[str, Any] | UnsetType = UNSET
    validation_exception: dict[str, Any] | UnsetType = UNSET
    throttling_exception: dict[str, Any] | UnsetType = UNSET
    service_unavailable_exception: dict[str, Any] | UnsetType = UNSET


class _Block:
    """A content block whose ``contentBlockStop`` has not arrived yet: a call, a result or reasoning."""

    __slots__ = ("call_id", "kind", "position", "result", "result_type", "status")

    def __init__(self, kind: ToolCallKind | None, position: int = -1, call_id: str = "") -> None:
        self.kind = kind
        """The call's kind; None for a tool result or reasoning block."""
        self.position = position
        self.call_id = call_id
        self.result: list[Any] | None = None
        """A tool result block's content so far (None for other blocks)."""
        self.result_type: str | None = None
        self.status: str | None = None


class BedrockConverseConverter:
    """Sans-IO core: one ``ConverseStream`` event in (a `Payload` or a dict), the chunks it
    carries out.

    ``id_factory`` names a call whose ``toolUse`` start has no ``toolUseId`` (the API always sends one).
    """

    __slots__ = (
        "_blocks",
        "_call_count",
        "_call_names",
        "_complete",
        "_decode",
        "_event_number",
        "_finish_reason",
        "_has_metadata",
        "_id_factory",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        self._decode = EventDecoder(_ConverseEvent).decode
        self._id_factory: IdFactory = id_factory or new_call_id
        self._event_number = -1
        """The number of the event being converted (0 for the first), for error messages."""
        self._blocks: dict[int, _Block] = {}
        """Call, result and reasoning blocks by ``contentBlockIndex``, until their stop."""
        self._call_count = 0
        self._call_names: dict[str, str] = {}
        """Calls' names by id, to name a server tool's result."""
        self._finish_reason: str | None = None
        self._has_metadata = False
        self._complete = False
        """``messageStop`` has come, or ``is_complete`` was sent."""

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one event: a framed `Payload` or a dict (boto3's, or decoded JSON)."""
        self._event_number += 1
        event = self._decode(item, self._event_number)
        if event.content_block_delta is not UNSET:
            return self._block_delta(event.content_block_delta)
        if event.content_block_start is not UNSET:
            return self._block_start(event.content_block_start)
        if event.content_block_stop is not UNSET:
            return self._block_stop(event.content_block_stop)
        if event.message_start is not UNSET:
            return self._message_start()
        if event.message_stop is not UNSET:
            return self._message_stop(event.message_stop)
        if event.metadata is not UNSET:
            return self._metadata(event.metadata)
        self._raise_exception(event)
        return []  # events this version does not know

    def finish(self) -> list[ChunkResponse]:
        """A stream that ended after ``messageStop`` without ``metadata`` is complete; one cut off before
        ``messageStop`` is not (no finish reason), and its unstopped calls stay unfinished."""
        if self._finish_reason is not None and not self._complete:
            self._complete = True
            return [ChunkResponse(is_complete=True, finish_reason=self._finish_reason)]
        return []

    # events

    def _message_start(self) -> list[ChunkResponse]:
        # A new message starts a new response: call positions restart at 0.
        self._blocks.clear()
        self._call_count = 0
        self._finish_reason = None
        self._has_metadata = self._complete = False
        return []

    def _block_start(self, event: _BlockEvent) -> list[ChunkResponse]:
        index = self._index(event, "contentBlockStart")
        start = event.start
        if start is UNSET:
            raise self._missing("contentBlockStart", "start", "an object")
        if index in self._blocks:
            raise self._error("contentBlockStart", f"starts content block {index} again before its stop")
        if start.tool_use is not UNSET:
            return [ChunkResponse(tool_calls=[self._call_start(index, start.tool_use)])]
        if start.tool_result is not UNSET:
            self._result_start(index, start.tool_result)
        return []  # a text block, or a block type this version does not know

    def _call_start(self, index: int, tool_use: _ToolUseStart) -> ToolCallDelta:
        if tool_use.name is UNSET:
            raise self._missing("contentBlockStart", "start.toolUse.name", "a string")
        position = self._call_count
        self._call_count += 1
        call_id = tool_use.tool_use_id or self._id_factory(position)
        kind: ToolCallKind = "server" if tool_use.type == "server_tool_use" else "function"
        self._blocks[index] = _Block(kind, position, call_id)
        self._call_names[call_id] = tool_use.name
        return ToolCallDelta(position, call_id, tool_use.name, kind=kind)

    def _result_start(self, index: int, tool_result: _ToolResultStart) -> None:
        if tool_result.tool_use_id is UNSET:
            raise self._missing("contentBlockStart", "start.toolResult.toolUseId", "a string")
        block = self._blocks[index] = _Block(None, call_id=tool_result.tool_use_id)
        block.result = []
        block.result_type = tool_result.type
        block.status = tool_result.status

    def _block_delta(self, event: _BlockEvent) -> list[ChunkResponse]:
        index = self._index(event, "contentBlockDelta")
        delta = event.delta
        if delta is UNSET:
            raise self._missing("contentBlockDelta", "delta", "an object")
        if delta.text is not UNSET:
            return [ChunkResponse(content=delta.text)] if delta.text else []
        if delta.tool_use is not UNSET:
            return self._input(index, delta.tool_use)
        if delta.reasoning_content is not UNSET:
            return self._reasoning(index, delta.reasoning_content)
        if delta.citation is not UNSET:
            return [ChunkResponse(citations=[delta.citation])]
        if delta.tool_result is not UNSET:
            self._result_content(index, delta.tool_result)
        return []  # an image, or a delta this version does not know

    def _input(self, index: int, tool_use: _ToolUseDelta) -> list[ChunkResponse]:
        """A fragment of a call's input, JSON text."""
        block = self._blocks.get(index)
        if block is None or block.kind is None:
            raise self._error("contentBlockDelta", f"has toolUse input for block {index}, not an open call")
        if tool_use.input is UNSET:
            raise self._missing("contentBlockDelta", "delta.toolUse.input", "a string")
        if not tool_use.input:
            return []
        delta = ToolCallDelta(block.position, arguments_delta=tool_use.input, kind=block.kind)
        return [ChunkResponse(tool_calls=[delta])]

    def _reasoning(self, index: int, reasoning: _ReasoningDelta) -> list[ChunkResponse]:
        """Reasoning text, its signature, or redacted reasoning; the block's stop ends it."""
        if index not in self._blocks:
            self._blocks[index] = _Block(None)
        if reasoning.text is not UNSET:
            return [ChunkResponse(reasoning=reasoning.text)] if reasoning.text else []
        if reasoning.signature is not UNSET:
            return [ChunkResponse(reasoning_signature=reasoning.signature)] if reasoning.signature else []
        if reasoning.redacted_content is not UNSET:
            encoded = base64.b64encode(reasoning.redacted_content).decode()
            return [ChunkResponse(encrypted_reasoning=encoded)]
        return []

    def _result_content(self, index: int, content: list[Any]) -> None:
        block = self._blocks.get(index)
        if block is None or block.result is None:
            raise self._error(
                "contentBlockDelta", f"has toolResult content for block {index}, not an open tool result"
            )
        block.result += content

    def _block_stop(self, event: _BlockEvent) -> list[ChunkResponse]:
        block = self._blocks.pop(self._index(event, "contentBlockStop"), None)
        if block is None:
            return []  # a text block
        if block.kind is not None:
            delta = ToolCallDelta(block.position, finished=True, kind=block.kind)
            return [ChunkResponse(tool_calls=[delta])]
        if block.result is None:
            return [ChunkResponse(reasoning_done=True)]
        result = ToolResult(
            call_id=block.call_id,
            name=self._call_names.get(block.call_id),
            content=block.result,
            is_error=block.status == "error",
            result_type=block.result_type,
        )
        return [ChunkResponse(tool_results=[result])]

    def _message_stop(self, event: _MessageStop) -> list[ChunkResponse]:
        if event.stop_reason is UNSET:
            raise self._missing("messageStop", "stopReason", "a string")
        self._finish_reason = normalize_converse_stop_reason(event.stop_reason)
        metadata: dict[str, Any] = {"stop_reason": event.stop_reason}
        if event.additional_model_response_fields:
            metadata["additional_model_response_fields"] = event.additional_model_response_fields
        return [self._maybe_complete(ChunkResponse(finish_reason=self._finish_reason, metadata=metadata))]

    def _metadata(self, event: _Metadata) -> list[ChunkResponse]:
        self._has_metadata = True
        usage = None if event.usage is None else _token_usage(event.usage)
        metadata: dict[str, Any] = {}
        if event.metrics is not None and event.metrics.latency_ms is not None:
            metadata["latency_ms"] = event.metrics.latency_ms
        if isinstance(event.service_tier, Mapping) and isinstance(event.service_tier.get("type"), str):
            metadata["service_tier"] = event.service_tier["type"]
        if event.trace:
            metadata["trace"] = event.trace
        chunk = ChunkResponse(usage=usage, finish_reason=self._finish_reason, metadata=metadata or None)
        return [self._maybe_complete(chunk)]

    def _maybe_complete(self, chunk: ChunkResponse) -> ChunkResponse:
        """``chunk``, marked the last of the response once both ``messageStop`` and ``metadata`` came."""
        if self._finish_reason is None or not self._has_metadata:
            return chunk
        self._complete = True
        return msgspec.structs.replace(chunk, is_complete=True)

    def _raise_exception(self, event: _ConverseEvent) -> None:
        """Raise the `ProviderError` of an exception event; return for any other event."""
        for name in _EXCEPTIONS:
            details = getattr(event, _SNAKE[name])
            if details is UNSET:
                continue
            message = details.get("message") or details.get("Message")
            raise ProviderError.from_payload(
                {"type": name, "message": message, "status_code": details.get("originalStatusCode")},
                {name: details},
                f"event {self._event_number}",
            )

    # checks

    def _index(self, event: _BlockEvent, event_type: str) -> int:
        if event.content_block_index is UNSET:
            raise self._missing(event_type, "contentBlockIndex", "an integer")
        return event.content_block_index

    def _missing(self, event_type: str, field: str, expected: str) -> ConverterError:
        return field_error(self._event_number, field, expected, MISSING, event_type=event_type)

    def _error(self, event_type: str, problem: str) -> ConverterError:
        number = self._event_number
        return ConverterError(f"event {number} ({event_type}): {problem}", event_number=number)


_SNAKE: Final[Mapping[str, str]] = {
    name: "".join(f"_{char.lower()}" if char.isupper() else char for char in name) for name in _EXCEPTIONS
}
"""The Struct attribute of each exception event."""


def _token_usage(usage: _Usage) -> TokenUsage:
    """Converse usage in OpenAI's terms: the prompt counts cache reads and writes, as ``totalTokens`` does."""
    cache_read = usage.cache_read_input_tokens
    cache_write = usage.cache_write_input_tokens
    prompt = (usage.input_tokens or 0) + (cache_read or 0) + (cache_write or 0)
    completion = usage.output_tokens or 0
    total = usage.total_tokens if usage.total_tokens is not None else prompt + completion
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_tokens=cache_read,
        cache_creation_tokens=cache_write,
    )


@pipable_operator
def convert_bedrock_converse(
    source: AsyncIterable[Payload | Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Bedrock ``ConverseStream`` events (Payloads or boto3 dicts) -> `ChunkResponse`s.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, BedrockConverseConverter(id_factory=id_factory))
