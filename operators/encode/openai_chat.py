"""Chunks back to the OpenAI Chat Completions wire format: what ``streamfold proxy`` answers with.

`OpenAIChunkEncoder` turns `ChunkResponse`s into ``chat.completion.chunk``
dicts and `encode_openai_chat` is its operator (SSE text lines). (Rewriting a whole, non-streamed
``chat.completion`` is the proxy's: `pipeline.proxy.rewriter.fold_openai_completion`.)

What a stock OpenAI client expects, and gets:

- the response's ``id``, ``model``, ``created``, ``system_fingerprint`` and ``service_tier`` (from the chunks'
  ``metadata``) on every chunk; ``role: "assistant"`` on the first, which is the first that carries text
  or a call (a response of calls only has no ``content`` at all, as OpenAI's);
- ``content``, ``reasoning_content`` and ``refusal`` deltas as they arrive;
- ``tool_calls`` deltas whose first delta of a call carries ``index``, ``id``, ``type`` and
  ``function.name`` (with the first arguments), later deltas only ``index`` and ``function.arguments``;
- one ``finish_reason`` chunk at the end of the response (``tool_calls`` when calls were made, the
  upstream said ``stop`` and each call's arguments are whole JSON: a call cut off is never presented as
  one to run), then the usage on its own chunk with ``choices: []`` when the upstream sent one.

The finish reason and the usage are held until the response is complete (``is_complete``, or
`finish`), because text the delimiter rewriter held back can still follow the
upstream's finish chunk; nothing else is held.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final

from aiostream import pipable_operator

from pipeline._jsonenc import arguments_complete, encode_json
from pipeline.models import ChunkResponse, IdFactory, TokenUsage, ToolCallDelta, new_call_id
from pipeline.stage import operator_stream

__all__ = [
    "OpenAIChunkEncoder",
    "encode_openai_chat",
    "sse_line",
]

_METADATA_KEYS: Final = ("id", "model", "created", "system_fingerprint", "service_tier")


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def _openai_usage(usage: TokenUsage) -> dict[str, Any]:
    """`TokenUsage` in OpenAI's shape (with the ``*_details`` objects when their counts are known)."""
    result: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    prompt_details: dict[str, int] = {}
    if usage.cached_tokens is not None:
        prompt_details["cached_tokens"] = usage.cached_tokens
    if usage.cache_creation_tokens is not None:
        prompt_details["cache_write_tokens"] = usage.cache_creation_tokens
    if prompt_details:
        result["prompt_tokens_details"] = prompt_details
    if usage.reasoning_tokens is not None:
        result["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return result


class OpenAIChunkEncoder:
    """Sans-IO core: `ChunkResponse` -> OpenAI ``chat.completion.chunk`` dicts (see the module doc).

    One chunk dict per incoming chunk that carries text or tool-call progress; chunks carrying only a
    finish reason, usage or metadata give nothing until the response completes (a response with no text
    and no call at all then opens with ``{"role": "assistant", "content": ""}``). A chunk with
    ``is_complete`` ends the response: the finish chunk and the usage chunk follow, and the encoder is ready
    for another response. Without a ``finish_reason`` from upstream none is invented (the stream was cut
    off; see `finish_reason`).

    Args:
        choice_index: the ``index`` of the choice written.
        completion_id: supplies ``id`` when the chunks' metadata has none.
        clock: supplies ``created`` when the chunks' metadata has none.
        call_ids: names a call whose first delta has no id (the converters always give one).
    """

    __slots__ = (
        "_arguments",
        "_call_ids",
        "_choice_index",
        "_clock",
        "_completion_id",
        "_finish_reason",
        "_header",
        "_metadata",
        "_role_sent",
        "_usage",
        "calls_written",
        "finish_reason",
        "upstream_usage",
    )

    def __init__(
        self,
        *,
        choice_index: int = 0,
        completion_id: Callable[[], str] = _completion_id,
        clock: Callable[[], float] = time.time,
        call_ids: IdFactory = new_call_id,
    ) -> None:
        self._choice_index = choice_index
        self._completion_id = completion_id
        self._clock = clock
        self._call_ids = call_ids
        self._metadata: dict[str, Any] = {}
        self._header: dict[str, Any] | None = None
        self._role_sent = False
        self._arguments: dict[int, list[str]] = {}
        """The arguments pieces of each call written in this response, by index (none for a custom call)."""
        self.calls_written = 0
        """Tool calls written so far, over every response (a proxy's metrics count them)."""
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self.finish_reason: str | None = None
        """The finish reason written at the end of the last completed response (``None``: none was)."""
        self.upstream_usage: Mapping[str, Any] | None = None
        """The upstream's own usage object: when set, the usage chunk carries it as it is instead of the
        normalised `TokenUsage` (a proxy keeps the server's numbers and extra fields)."""

    def feed(self, chunk: ChunkResponse) -> list[dict[str, Any]]:
        """Encode one chunk; see the class doc."""
        if chunk.metadata:
            self._update_metadata(chunk.metadata)
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self._finish_reason = chunk.finish_reason
        outputs: list[dict[str, Any]] = []
        delta = self._delta(chunk)
        if delta is not None:
            outputs.append(self._chunk(delta, None))
        if chunk.is_complete:
            self._complete(outputs)
        return outputs

    def finish(self) -> list[dict[str, Any]]:
        """The input ended: close the response if it was not (finish and usage chunks)."""
        outputs: list[dict[str, Any]] = []
        if self._role_sent or self._finish_reason or self._usage is not None:
            self._complete(outputs)
        return outputs

    def _update_metadata(self, metadata: Mapping[str, Any]) -> None:
        changed = False
        for key in _METADATA_KEYS:
            value = metadata.get(key)
            if value is not None and self._metadata.get(key) != value:
                self._metadata[key] = value
                changed = True
        if changed:
            self._header = None

    def _delta(self, chunk: ChunkResponse) -> dict[str, Any] | None:
        delta: dict[str, Any] = {}
        if not self._role_sent:
            if not _has_output(chunk):
                return None
            self._role_sent = True
            delta["role"] = "assistant"
        if chunk.content:
            delta["content"] = chunk.content
        if chunk.reasoning:
            delta["reasoning_content"] = chunk.reasoning
        if chunk.refusal:
            delta["refusal"] = chunk.refusal
        if chunk.tool_calls:
            calls = self._tool_calls(chunk.tool_calls)
            if calls:
                delta["tool_calls"] = calls
        if chunk.image_urls:
            delta["images"] = [{"type": "image_url", "image_url": {"url": url}} for url in chunk.image_urls]
        return delta or None

    def _tool_calls(self, deltas: Iterable[ToolCallDelta]) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        written = self._arguments
        for delta in deltas:
            arguments = delta.arguments_delta or ""
            kind = "custom" if delta.kind == "custom" else "function"
            field = "input" if kind == "custom" else "arguments"
            pieces = written.get(delta.index)
            if pieces is None:
                pieces = written[delta.index] = []
                self.calls_written += 1
                call_id = delta.call_id or self._call_ids(delta.index)
                calls.append(
                    {
                        "index": delta.index,
                        "id": call_id,
                        "type": kind,
                        kind: {"name": delta.name or "", field: arguments},
                    }
                )
            elif arguments:
                calls.append({"index": delta.index, kind: {field: arguments}})
            if arguments and kind == "function":
                pieces.append(arguments)
        return calls

    def _complete(self, outputs: list[dict[str, Any]]) -> None:
        reason = self._finish_reason
        if reason == "stop" and self._arguments and self._calls_complete():
            reason = "tool_calls"
        if reason is not None:
            if not self._role_sent:
                outputs.append(self._chunk({"role": "assistant", "content": ""}, None))
            outputs.append(self._chunk({}, reason))
        if self._usage is not None:
            usage_chunk = dict(self._envelope())
            usage_chunk["choices"] = []
            usage = self.upstream_usage
            usage_chunk["usage"] = dict(usage) if usage is not None else _openai_usage(self._usage)
            outputs.append(usage_chunk)
        self.finish_reason = reason
        self.upstream_usage = None
        self._role_sent = False
        self._arguments = {}
        self._finish_reason = None
        self._usage = None

    def _calls_complete(self) -> bool:
        return all(arguments_complete("".join(pieces)) for pieces in self._arguments.values())

    def _envelope(self) -> dict[str, Any]:
        """The fields every chunk of the response repeats, in OpenAI's order (cached until they change)."""
        header = self._header
        if header is None:
            metadata = self._metadata
            if "id" not in metadata:
                metadata["id"] = self._completion_id()
            if "created" not in metadata:
                metadata["created"] = int(self._clock())
            header = {
                "id": metadata["id"],
                "object": "chat.completion.chunk",
                "created": metadata["created"],
                "model": metadata.get("model", ""),
            }
            for key in ("service_tier", "system_fingerprint"):
                if key in metadata:
                    header[key] = metadata[key]
            self._header = header
        return header

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        chunk = dict(self._envelope())
        chunk["choices"] = [{"index": self._choice_index, "delta": delta, "finish_reason": finish_reason}]
        return chunk


def sse_line(chunk: Mapping[str, Any]) -> bytes:
    """One SSE event ``data: {json}\\n\\n`` as bytes (a lone surrogate in a string is written escaped)."""
    return b"data: " + encode_json(chunk) + b"\n\n"


def _has_output(chunk: ChunkResponse) -> bool:
    """Whether a chunk carries something a delta says (the role waits for it)."""
    return bool(chunk.content or chunk.reasoning or chunk.refusal or chunk.tool_calls or chunk.image_urls)


class _SSEText:
    """`OpenAIChunkEncoder` with each dict written as an SSE ``data:`` line."""

    __slots__ = ("_encoder",)

    def __init__(self, encoder: OpenAIChunkEncoder) -> None:
        self._encoder = encoder

    def feed(self, chunk: ChunkResponse) -> list[str]:
        return [sse_line(out).decode() for out in self._encoder.feed(chunk)]

    def finish(self) -> list[str]:
        return [sse_line(out).decode() for out in self._encoder.finish()]


@pipable_operator
def encode_openai_chat(source: AsyncIterable[ChunkResponse], *, choice_index: int = 0) -> AsyncIterator[str]:
    """Chunks to OpenAI Chat Completions SSE text, one ``data: {...}\\n\\n`` per chunk (no ``[DONE]``).

    Args:
        source: the chunks.
        choice_index: the ``index`` of the one choice written.
    """
    return operator_stream(source, _SSEText(OpenAIChunkEncoder(choice_index=choice_index)))
