"""The Anthropic Messages converter: streaming events -> `ChunkResponse`.

The wire format is a message envelope around content blocks::

    message_start {message: {id, model, usage}}
    content_block_start {index, content_block}   text, thinking, redacted_thinking, tool_use, ...
    content_block_delta {index, delta}           text_delta, thinking_delta, signature_delta, input_json_delta
    content_block_stop {index}
    message_delta {delta: {stop_reason}, usage}  cumulative usage
    message_stop

plus ``ping`` (ignored) and ``error`` (raised as `ProviderError`). Each event is a framed
`Payload` (its JSON bytes) or a decoded dict; both decode into one typed event
(``_AnthropicEvent``). Tool blocks (``tool_use``, and the provider-executed ``server_tool_use`` and
``mcp_tool_use``) become `ToolCallDelta`s numbered by their order among the response's calls (never
by content-block index, and never merged when two calls share an id). Server-tool result blocks (every
block type ending in ``_tool_result``: ``web_search_tool_result``, ``web_fetch_tool_result``,
``code_execution_tool_result``, ``mcp_tool_result``, ...) become `ToolResult`s with the block's
``content`` as sent, ``is_error`` when the block says ``is_error`` or its content is a ``*_error`` object.
``citations_delta`` (and the ``citations`` of a text block's start) become ``citations``. Each thinking or
redacted-thinking block ends with ``reasoning_done`` at its ``content_block_stop``, so adjacent blocks stay
apart, each with its own signature or data.

A tool block cut off by ``max_tokens`` never gets its ``content_block_stop``, so its call is left
unfinished: the later stages report it as truncated.

The same events arrive from AWS Bedrock (see `operators.adapter.eventstream`) and Google Vertex AI.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator
from msgspec import UNSET, UnsetType

from operators.convert._base import MISSING, IdFactory, field_error, is_mapping, new_call_id
from operators.convert._typed_feed import TypedFeed
from pipeline.errors import ConverterError
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta, ToolCallKind, ToolResult
from pipeline.stage import operator_stream

__all__ = ["AnthropicConverter", "convert_anthropic", "normalize_anthropic_stop_reason"]

_STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

_TOOL_BLOCK_KINDS: Final[Mapping[str, ToolCallKind]] = {
    "tool_use": "function",
    "server_tool_use": "server",
    "mcp_tool_use": "server",
}

_REASONING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})

_RESULT_BLOCK_SUFFIX: Final = "_tool_result"
"""Block types ending with this are the results of provider-executed (server) tools."""

_EXPECTED: Final[Mapping[str, str]] = {
    "index": "an integer",
    "delta": "an object",
    "message": "an object",
    "delta.citation": "an object",
}
"""What a required field should be, for the error when it is missing (the others: a string)."""


def normalize_anthropic_stop_reason(stop_reason: str) -> str:
    """Anthropic's ``stop_reason`` in OpenAI's words (``stop``, ``length``, ``tool_calls``, ...)."""
    return _STOP_REASONS.get(stop_reason, stop_reason.lower())


class _AnthropicUsage(msgspec.Struct, gc=False):
    """A usage object. Counts are cumulative; a count the event leaves out is ``UNSET``."""

    input_tokens: int | UnsetType | None = UNSET
    output_tokens: int | UnsetType | None = UNSET
    cache_read_input_tokens: int | UnsetType | None = UNSET
    cache_creation_input_tokens: int | UnsetType | None = UNSET
    output_tokens_details: Any = None
    service_tier: Any = None


class _AnthropicMessage(msgspec.Struct, gc=False):
    """``message_start``'s message: what the converter reads of it."""

    id: Any = None
    model: Any = None
    usage: _AnthropicUsage | None = None


class _AnthropicDelta(msgspec.Struct, frozen=True, gc=False):
    """The ``delta`` of ``content_block_delta`` (by its ``type``) and of ``message_delta``."""

    type: str | UnsetType = UNSET
    text: str | UnsetType = UNSET
    thinking: str | UnsetType = UNSET
    signature: str | UnsetType = UNSET
    partial_json: str | None = None
    citation: dict[str, Any] | UnsetType = UNSET
    stop_reason: str | None = None
    stop_sequence: str | None = None


_NO_DELTA: Final = _AnthropicDelta()
"""The ``delta`` of an event without one: its ``type`` is ``UNSET``, as a delta of no known type, so that the
checks of a missing delta leave the path of a text delta."""


class _AnthropicEvent(msgspec.Struct, gc=False):
    """One Messages stream event, every type in one flat Struct: an event type this version does not
    know decodes too, and gives nothing. ``content_block`` stays a dict: its fields vary by block type."""

    type: str | UnsetType = UNSET
    index: int | UnsetType = UNSET
    delta: _AnthropicDelta = _NO_DELTA
    content_block: Any = UNSET
    message: _AnthropicMessage | UnsetType = UNSET
    usage: _AnthropicUsage | None = None
    error: Any = None


class _ToolBlock:
    """A tool-use content block whose ``content_block_stop`` has not arrived yet."""

    __slots__ = ("initial_input", "kind", "position", "streamed_input")

    def __init__(self, position: int, kind: ToolCallKind, initial_input: Any) -> None:
        self.position = position
        self.kind: ToolCallKind = kind
        self.initial_input = initial_input
        """``content_block.input``: the arguments if no non-empty ``input_json_delta`` follows."""
        self.streamed_input = False

    def chunk(self, arguments: str | None, *, finished: bool = False) -> ChunkResponse:
        return ChunkResponse(
            tool_calls=[
                ToolCallDelta(self.position, arguments_delta=arguments, finished=finished, kind=self.kind)
            ]
        )


class _UsageCounts:
    """The usage counts of one message so far, in OpenAI's terms on demand."""

    __slots__ = ("counts", "thinking_tokens")

    _FIELDS: Final = (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.thinking_tokens: int | None = None

    def merge(self, usage: _AnthropicUsage) -> TokenUsage | None:
        """Fold ``usage`` into the counts so far; None when it holds no count at all.

        Counts are cumulative, so a field replaces the earlier one; a field the event leaves out keeps its
        value (``message_delta`` often carries ``output_tokens`` alone), and so does a smaller value (a
        re-serialising client writes 0 for a field the API left out).
        """
        values = [getattr(usage, field) for field in self._FIELDS]
        if all(value is UNSET for value in values):
            return None
        counts = self.counts
        for field, value in zip(self._FIELDS, values, strict=True):
            if isinstance(value, int) and value >= counts.get(field, 0):
                counts[field] = value
        details = usage.output_tokens_details
        if is_mapping(details) and isinstance(details.get("thinking_tokens"), int):
            self.thinking_tokens = details["thinking_tokens"]
        return self.total()

    def total(self) -> TokenUsage:
        counts = self.counts
        cache_read = counts.get("cache_read_input_tokens")
        cache_creation = counts.get("cache_creation_input_tokens")
        prompt_tokens = counts.get("input_tokens", 0) + (cache_read or 0) + (cache_creation or 0)
        completion_tokens = counts.get("output_tokens", 0)
        return TokenUsage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            cached_tokens=cache_read,
            cache_creation_tokens=cache_creation,
            reasoning_tokens=self.thinking_tokens,
        )


class AnthropicConverter(TypedFeed[_AnthropicEvent]):
    """Sans-IO core: one Anthropic Messages stream event in (a `Payload` or a dict), the chunks it
    carries out.

    ``id_factory`` names a tool call whose block has no ``id`` (the API always sends one; some
    re-serialising clients drop it).
    """

    __slots__ = (
        "_call_count",
        "_finish_reason",
        "_id_factory",
        "_reasoning_blocks",
        "_server_call_names",
        "_tool_blocks",
        "_usage",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        super().__init__(
            _AnthropicEvent,
            {
                "message_start": self._message_start,
                "content_block_start": self._block_start,
                "content_block_delta": self._block_delta,
                "content_block_stop": self._block_stop,
                "message_delta": self._message_delta,
                "message_stop": self._message_stop,
                "ping": _nothing,
            },
        )
        self._id_factory: IdFactory = id_factory or new_call_id
        self._call_count = 0
        """Tool blocks started so far: the next call's position (block indexes and ids may repeat)."""
        self._tool_blocks: dict[int, _ToolBlock] = {}
        self._reasoning_blocks: set[int] = set()
        """Thinking and redacted-thinking blocks whose ``content_block_stop`` has not arrived yet."""
        self._server_call_names: dict[str, str] = {}
        """Provider-executed calls' names by id, to name their results."""
        self._finish_reason: str | None = None
        self._usage = _UsageCounts()

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a call whose block never stopped stays unfinished on purpose."""
        return []

    # events

    def _message_start(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        message = event.message
        if message is UNSET:
            raise self._missing("message")
        # A new message starts a new response: call positions restart at 0, usage counts from nothing.
        self._call_count = 0
        self._tool_blocks.clear()
        self._reasoning_blocks.clear()
        self._finish_reason = None
        self._usage = _UsageCounts()
        metadata = {
            key: value
            for key, value in (("id", message.id), ("model", message.model))
            if isinstance(value, str)
        }
        raw_usage = message.usage
        usage = None if raw_usage is None else self._usage.merge(raw_usage)
        if raw_usage is not None and isinstance(raw_usage.service_tier, str):
            metadata["service_tier"] = raw_usage.service_tier
        if not metadata and usage is None:
            return []
        return [ChunkResponse(usage=usage, metadata=metadata or None)]

    def _block_start(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        block_index = self._index(event)
        block = event.content_block
        if not is_mapping(block):
            value = MISSING if block is UNSET else block
            raise field_error(self._event_number, "content_block", "an object", value)
        block_type = block.get("type")
        if not isinstance(block_type, str):
            value = block.get("type", MISSING)
            raise field_error(self._event_number, "content_block.type", "a string", value)
        if block_type == "text":
            return self._text_block(block)
        if block_type in _REASONING_BLOCKS:
            self._reasoning_blocks.add(block_index)
            return self._reasoning_block(block_type, block)
        if block_type.endswith(_RESULT_BLOCK_SUFFIX):
            return [ChunkResponse(tool_results=[self._tool_result(block_type, block)])]
        kind = _TOOL_BLOCK_KINDS.get(block_type)
        if kind is None:
            return []  # block types this version does not know
        return [ChunkResponse(tool_calls=[self._tool_block(block_index, kind, block)])]

    def _text_block(self, block: Mapping[str, Any]) -> list[ChunkResponse]:
        text = self._optional_string(block, "text")
        citations = block.get("citations")
        if citations is not None and (
            not isinstance(citations, list) or not all(is_mapping(item) for item in citations)
        ):
            raise self._error("has a 'citations' that is not a list of objects")
        if not text and not citations:
            return []
        return [ChunkResponse(content=text, citations=citations or None)]

    def _reasoning_block(self, block_type: str, block: Mapping[str, Any]) -> list[ChunkResponse]:
        if block_type == "redacted_thinking":
            return [ChunkResponse(encrypted_reasoning=self._string(block, "data"))]
        thinking = self._optional_string(block, "thinking") or None
        signature = self._optional_string(block, "signature") or None
        if thinking is None and signature is None:
            return []
        return [ChunkResponse(reasoning=thinking, reasoning_signature=signature)]

    def _tool_block(self, block_index: int, kind: ToolCallKind, block: Mapping[str, Any]) -> ToolCallDelta:
        """Open the call of a tool block (its input streams in ``input_json_delta``s)."""
        if block_index in self._tool_blocks:
            raise self._error(f"starts content block {block_index} again before its stop")
        position = self._call_count
        self._call_count += 1
        call_id = self._optional_string(block, "id") or self._id_factory(position)
        name = self._string(block, "name")
        if kind == "server":
            self._server_call_names[call_id] = name
        self._tool_blocks[block_index] = _ToolBlock(position, kind, block.get("input"))
        server_name = self._optional_string(block, "server_name") or None
        return ToolCallDelta(position, call_id, name, kind=kind, server_name=server_name)

    def _tool_result(self, block_type: str, block: Mapping[str, Any]) -> ToolResult:
        """A server tool's result block, whole in its ``content_block_start``."""
        call_id = self._string(block, "tool_use_id")
        content = block.get("content")
        content_type = content.get("type") if is_mapping(content) else None
        is_error = block.get("is_error") is True or (
            isinstance(content_type, str) and content_type.endswith("_error")
        )
        return ToolResult(
            call_id=call_id,
            name=self._server_call_names.get(call_id),
            content=content,
            is_error=is_error,
            result_type=block_type,
        )

    def _block_delta(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        delta = event.delta
        if event.index is UNSET:
            raise self._missing("index")
        delta_type = delta.type
        if delta_type == "text_delta":
            text = delta.text
            if text:  # neither empty nor UNSET
                return [ChunkResponse(content=text)]
            return self._empty(text, "delta.text")
        if delta_type == "thinking_delta":
            thinking = delta.thinking
            if thinking:
                return [ChunkResponse(reasoning=thinking)]
            return self._empty(thinking, "delta.thinking")
        return self._other_delta(event.index, delta)

    def _empty(self, value: str | UnsetType, field: str) -> list[ChunkResponse]:
        """What a text or thinking delta whose ``field`` is not a non-empty string gives: nothing for an
        empty string, the error of a missing field for ``UNSET``."""
        if value is UNSET:
            raise self._missing(field)
        return []

    def _other_delta(self, block_index: int, delta: _AnthropicDelta) -> list[ChunkResponse]:
        """A delta that is neither text nor thinking: a signature, tool input, a citation, or unknown."""
        delta_type = delta.type
        if delta_type == "signature_delta":
            signature = delta.signature
            if signature is UNSET:
                raise self._missing("delta.signature")
            return [ChunkResponse(reasoning_signature=signature)] if signature else []
        if delta_type == "input_json_delta":
            return self._input_json(block_index, delta.partial_json)
        if delta_type == "citations_delta":
            if delta.citation is UNSET:
                raise self._missing("delta.citation")
            return [ChunkResponse(citations=[delta.citation])]
        if delta_type is UNSET:
            raise self._missing("delta" if delta is _NO_DELTA else "delta.type")
        return []  # delta types this version does not know

    def _input_json(self, block_index: int, partial_json: str | None) -> list[ChunkResponse]:
        """A fragment of a tool block's input; some clients re-serialise an empty first one as nothing."""
        tool_block = self._tool_blocks.get(block_index)
        if tool_block is None:
            raise self._error(
                f"has input_json_delta for block {block_index}, not an open tool block",
            )
        if not partial_json:
            return []
        tool_block.streamed_input = True
        return [tool_block.chunk(partial_json)]

    def _block_stop(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        block_index = self._index(event)
        if block_index in self._reasoning_blocks:
            self._reasoning_blocks.remove(block_index)
            return [ChunkResponse(reasoning_done=True)]
        tool_block = self._tool_blocks.pop(block_index, None)
        if tool_block is None:
            return []
        arguments = None
        if not tool_block.streamed_input and tool_block.initial_input:
            arguments = msgspec.json.encode(tool_block.initial_input).decode()
        return [tool_block.chunk(arguments, finished=True)]

    def _message_delta(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        delta = event.delta
        if delta is _NO_DELTA:
            raise self._missing("delta")
        metadata: dict[str, Any] = {}
        if delta.stop_reason:
            self._finish_reason = normalize_anthropic_stop_reason(delta.stop_reason)
            metadata["stop_reason"] = delta.stop_reason
        if delta.stop_sequence:
            metadata["stop_sequence"] = delta.stop_sequence
        usage = None if event.usage is None else self._usage.merge(event.usage)
        if not metadata and usage is None:
            return []
        return [ChunkResponse(finish_reason=self._finish_reason, usage=usage, metadata=metadata or None)]

    def _message_stop(self, event: _AnthropicEvent) -> list[ChunkResponse]:
        return [ChunkResponse(is_complete=True, finish_reason=self._finish_reason)]

    # checks

    def _index(self, event: _AnthropicEvent) -> int:
        if event.index is UNSET:
            raise self._missing("index")
        return event.index

    def _string(self, block: Mapping[str, Any], key: str) -> str:
        """The string ``key`` of a content block."""
        value = block.get(key)
        if not isinstance(value, str):
            raise field_error(self._event_number, key, "a string", block.get(key, MISSING))
        return value

    def _optional_string(self, block: Mapping[str, Any], key: str) -> str:
        """The string ``key`` of a content block, or ``""`` when the field is absent or null."""
        value = block.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise field_error(self._event_number, key, "a string", value)
        return value

    def _missing(self, field: str) -> ConverterError:
        """The error for a field the event lacks (the feed loop adds the event's type)."""
        expected = _EXPECTED.get(field, "a string")
        return field_error(self._event_number, field, expected, MISSING)

    def _error(self, problem: str) -> ConverterError:
        return ConverterError(f"event {self._event_number}: {problem}", event_number=self._event_number)


def _nothing(event: _AnthropicEvent) -> list[ChunkResponse]:
    return []


@pipable_operator
def convert_anthropic(
    source: AsyncIterable[Payload | Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Anthropic Messages stream events (Payloads or dicts) -> normalised `ChunkResponse`s.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return operator_stream(source, AnthropicConverter(id_factory=id_factory))
