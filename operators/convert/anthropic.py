"""The Anthropic Messages converter: streaming event dicts -> :class:`ChunkResponse`.

The wire format is a message envelope around content blocks::

    message_start {message: {id, model, usage}}
    content_block_start {index, content_block}   text, thinking, redacted_thinking, tool_use, ...
    content_block_delta {index, delta}           text_delta, thinking_delta, signature_delta, input_json_delta
    content_block_stop {index}
    message_delta {delta: {stop_reason}, usage}  cumulative usage
    message_stop

plus ``ping`` (ignored) and ``error`` (raised as :class:`ProviderError`). Tool blocks (``tool_use``, and the
provider-executed ``server_tool_use`` and ``mcp_tool_use``) become :class:`ToolCallDelta`\\ s numbered by
their order among the response's calls (never by content-block index, and never merged when two calls share
an id). Server-tool result blocks (every block type ending in ``_tool_result``: ``web_search_tool_result``,
``web_fetch_tool_result``, ``code_execution_tool_result``, ``mcp_tool_result``, ...) become
:class:`ToolResult`\\ s with the block's ``content`` as sent, ``is_error`` when the block says
``is_error`` or its content is a ``*_error`` object. ``citations_delta`` (and the ``citations`` of a text
block's start) become ``citations``. Each thinking or redacted-thinking block ends with ``reasoning_done``
at its ``content_block_stop``, so adjacent blocks stay apart, each with its own signature or data.

A tool block cut off by ``max_tokens`` never gets its ``content_block_stop``, so its call is left
unfinished: the later stages report it as truncated.

The same events arrive from AWS Bedrock (see :mod:`operators.adapter.eventstream`) and Google Vertex AI.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

import msgspec
from aiostream import pipable_operator

from operators.convert._base import (
    MISSING,
    IdFactory,
    TypedEventConverter,
    field_error,
    is_mapping,
    new_call_id,
)
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta, ToolCallKind, ToolResult
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

_USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def normalize_anthropic_stop_reason(stop_reason: str) -> str:
    """Anthropic's ``stop_reason`` in OpenAI's words (``stop``, ``length``, ``tool_calls``, ...)."""
    return _STOP_REASONS.get(stop_reason, stop_reason.lower())


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


class AnthropicConverter(TypedEventConverter):
    """Sans-IO core: one Anthropic Messages stream event (a dict) in, the chunks it carries out.

    ``id_factory`` names a tool call whose block has no ``id`` (the API always sends one; some
    re-serialising clients drop it).
    """

    __slots__ = (
        "_call_count",
        "_finish_reason",
        "_id_factory",
        "_reasoning_blocks",
        "_server_call_names",
        "_thinking_tokens",
        "_tool_blocks",
        "_usage_counts",
    )

    def __init__(self, *, id_factory: IdFactory | None = None) -> None:
        super().__init__(
            {
                "message_start": self._message_start,
                "content_block_start": self._block_start,
                "content_block_delta": self._block_delta,
                "content_block_stop": self._block_stop,
                "message_delta": self._message_delta,
                "message_stop": self._message_stop,
                "ping": self._ping,
                "error": self._provider_error,
            }
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
        self._usage_counts: dict[str, int] = {}
        self._thinking_tokens: int | None = None

    def finish(self) -> list[ChunkResponse]:
        """Nothing is held back; a call whose block never stopped stays unfinished on purpose."""
        return []

    # events

    def _message_start(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        message = self._mapping(event, "message", "message_start")
        # A new message starts a new response: call positions restart at 0, usage counts from nothing.
        self._call_count = 0
        self._tool_blocks.clear()
        self._reasoning_blocks.clear()
        self._finish_reason = None
        self._usage_counts.clear()
        self._thinking_tokens = None
        metadata = {key: message[key] for key in ("id", "model") if isinstance(message.get(key), str)}
        raw_usage = message.get("usage")
        usage = self._merge_usage(raw_usage, "message_start") if raw_usage is not None else None
        if is_mapping(raw_usage) and isinstance(raw_usage.get("service_tier"), str):
            metadata["service_tier"] = raw_usage["service_tier"]
        if not metadata and usage is None:
            return []
        return [ChunkResponse(usage=usage, metadata=metadata or None)]

    def _block_start(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        where = "content_block_start"
        block_index = self._integer(event, "index", where)
        block = self._mapping(event, "content_block", where)
        block_type = block.get("type")
        if not isinstance(block_type, str):
            value = block.get("type", MISSING)
            raise field_error(self._event_number, "content_block.type", "a string", value, event_type=where)
        if block_type == "text":
            text = self._optional_string(block, "text", where)
            citations = self._citations(block.get("citations"), where)
            if not text and citations is None:
                return []
            return [ChunkResponse(content=text, citations=citations)]
        if block_type in _REASONING_BLOCKS:
            self._reasoning_blocks.add(block_index)
            if block_type == "redacted_thinking":
                return [ChunkResponse(encrypted_reasoning=self._string(block, "data", where))]
            thinking = self._optional_string(block, "thinking", where) or None
            signature = self._optional_string(block, "signature", where) or None
            if thinking is None and signature is None:
                return []
            return [ChunkResponse(reasoning=thinking, reasoning_signature=signature)]
        if block_type.endswith(_RESULT_BLOCK_SUFFIX):
            return [ChunkResponse(tool_results=[self._tool_result(block_type, block, where)])]
        kind = _TOOL_BLOCK_KINDS.get(block_type)
        if kind is None:
            return []  # block types this version does not know
        if block_index in self._tool_blocks:
            raise self._error(where, f"starts content block {block_index} again before its stop")
        position = self._call_count
        self._call_count += 1
        call_id = self._optional_string(block, "id", where) or self._id_factory(position)
        name = self._string(block, "name", where)
        if kind == "server":
            self._server_call_names[call_id] = name
        self._tool_blocks[block_index] = _ToolBlock(position, kind, block.get("input"))
        server_name = self._optional_string(block, "server_name", where) or None
        delta = ToolCallDelta(position, call_id, name, kind=kind, server_name=server_name)
        return [ChunkResponse(tool_calls=[delta])]

    def _tool_result(self, block_type: str, block: Mapping[str, Any], where: str) -> ToolResult:
        """A server tool's result block, whole in its ``content_block_start``."""
        call_id = self._string(block, "tool_use_id", where)
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

    def _citations(self, value: Any, where: str) -> list[Mapping[str, Any]] | None:
        """A text block's ``citations``: None when absent or empty."""
        if value is None:
            return None
        if not isinstance(value, list) or not all(is_mapping(item) for item in value):
            raise self._error(where, "has a 'citations' that is not a list of objects")
        return value or None

    def _block_delta(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        where = "content_block_delta"
        block_index = self._integer(event, "index", where)
        delta = self._mapping(event, "delta", where)
        delta_type = delta.get("type")
        if not isinstance(delta_type, str):
            value = delta.get("type", MISSING)
            raise field_error(self._event_number, "delta.type", "a string", value, event_type=where)
        if delta_type == "text_delta":
            text = self._string(delta, "text", where)
            return [ChunkResponse(content=text)] if text else []
        if delta_type == "thinking_delta":
            thinking = self._string(delta, "thinking", where)
            return [ChunkResponse(reasoning=thinking)] if thinking else []
        if delta_type == "signature_delta":
            signature = self._string(delta, "signature", where)
            return [ChunkResponse(reasoning_signature=signature)] if signature else []
        if delta_type == "input_json_delta":
            # Some clients re-serialise an empty first fragment with the field left out.
            partial_json = self._optional_string(delta, "partial_json", where)
            tool_block = self._tool_blocks.get(block_index)
            if tool_block is None:
                raise self._error(
                    where, f"has input_json_delta for block {block_index}, not an open tool block"
                )
            if not partial_json:
                return []
            tool_block.streamed_input = True
            return [tool_block.chunk(partial_json)]
        if delta_type == "citations_delta":
            return [ChunkResponse(citations=[self._mapping(delta, "citation", where)])]
        return []  # delta types this version does not know

    def _block_stop(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        block_index = self._integer(event, "index", "content_block_stop")
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

    def _message_delta(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        where = "message_delta"
        delta = self._mapping(event, "delta", where)
        metadata: dict[str, Any] = {}
        stop_reason = self._optional_string(delta, "stop_reason", where)
        if stop_reason:
            self._finish_reason = normalize_anthropic_stop_reason(stop_reason)
            metadata["stop_reason"] = stop_reason
        stop_sequence = self._optional_string(delta, "stop_sequence", where)
        if stop_sequence:
            metadata["stop_sequence"] = stop_sequence
        raw_usage = event.get("usage")
        usage = self._merge_usage(raw_usage, where) if raw_usage is not None else None
        if not metadata and usage is None:
            return []
        return [ChunkResponse(finish_reason=self._finish_reason, usage=usage, metadata=metadata or None)]

    def _message_stop(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        return [ChunkResponse(is_complete=True, finish_reason=self._finish_reason)]

    def _ping(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        return []

    def _provider_error(self, event: Mapping[str, Any]) -> list[ChunkResponse]:
        error = event.get("error")
        details: Mapping[str, Any] = error if is_mapping(error) else {}
        raise ProviderError.from_payload(details, event, f"event {self._event_number}")

    # helpers

    def _merge_usage(self, raw_usage: Any, where: str) -> TokenUsage | None:
        """Fold a usage object into the counts so far and express them in OpenAI's terms.

        Counts are cumulative, so a field replaces the earlier one; a field the event leaves out keeps its
        value (``message_delta`` often carries ``output_tokens`` alone), and so does a smaller value (a
        re-serialising client writes 0 for a field the API left out). A usage with no count gives None.
        """
        if not is_mapping(raw_usage):
            raise self._error(where, "has a 'usage' that is not a mapping")
        if not any(field in raw_usage for field in _USAGE_FIELDS):
            return None
        counts = self._usage_counts
        for field in _USAGE_FIELDS:
            value = raw_usage.get(field)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise self._error(where, f"has usage.{field} that is not an integer")
            if value >= counts.get(field, 0):
                counts[field] = value
        output_details = raw_usage.get("output_tokens_details")
        if is_mapping(output_details) and isinstance(output_details.get("thinking_tokens"), int):
            self._thinking_tokens = output_details["thinking_tokens"]
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
            reasoning_tokens=self._thinking_tokens,
        )

    def _mapping(self, owner: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = owner.get(key)
        if not is_mapping(value):
            raise field_error(self._event_number, key, "an object", owner.get(key, MISSING), event_type=where)
        return value

    def _string(self, owner: Mapping[str, Any], key: str, where: str) -> str:
        value = owner.get(key)
        if not isinstance(value, str):
            raise field_error(self._event_number, key, "a string", owner.get(key, MISSING), event_type=where)
        return value

    def _optional_string(self, owner: Mapping[str, Any], key: str, where: str) -> str:
        """The string at ``key``, or ``""`` when the field is absent or null."""
        value = owner.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise field_error(self._event_number, key, "a string", value, event_type=where)
        return value

    def _integer(self, owner: Mapping[str, Any], key: str, where: str) -> int:
        value = owner.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise field_error(
                self._event_number, key, "an integer", owner.get(key, MISSING), event_type=where
            )
        return value

    def _error(self, where: str, problem: str) -> ConverterError:
        return ConverterError(
            f"event {self._event_number} ({where}): {problem}", event_number=self._event_number
        )


@pipable_operator
def convert_anthropic(
    source: AsyncIterable[Mapping[str, Any]], *, id_factory: IdFactory | None = None
) -> AsyncIterator[ChunkResponse]:
    """Anthropic Messages stream events (dicts) -> normalised :class:`ChunkResponse`\\ s."""
    return operator_stream(source, AnthropicConverter(id_factory=id_factory))
