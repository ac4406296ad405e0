"""Gathers one ``generateContent`` chunk's parts into as few `ChunkResponse` as keep their order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.models import ChunkResponse, TokenUsage, ToolCallDelta, ToolResult

__all__ = ["ChunkBuilder"]

_EMPTY, _REASONING, _SIGNATURE, _CONTENT, _TOOL_CALLS, _TOOL_RESULTS, _CITATIONS = range(-1, 6)
"""The order in which the segment emitter reads a chunk's fields (see `ChunkBuilder.citations`), after
`_EMPTY`, the rank of a chunk that holds nothing yet."""


class ChunkBuilder:
    """Gathers one event's parts into as few chunks as keep their order; `take` gives them.

    A chunk is read reasoning, signature, content (and the signature bound to it), tool calls, tool
    results; a part that would come earlier in that order than what the chunk holds (text after a function
    call, say) starts a new chunk. One builder serves every event of a stream: `take` empties it.
    """

    __slots__ = (
        "_citations",
        "_content",
        "_content_signature",
        "_done",
        "_extras",
        "_media",
        "_rank",
        "_reasoning",
        "_signature",
        "_tool_calls",
        "_tool_results",
    )

    def __init__(self) -> None:
        self._done: list[ChunkResponse] = []
        """The chunks of this event that a later part closed."""
        self._rank = _EMPTY
        """The rank of the last part gathered into the open chunk; `_EMPTY` when it holds nothing."""
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._extras = False
        """Whether the open chunk holds more than text and reasoning (signatures, media, calls, ...)."""
        self._signature: str | None = None
        self._content_signature: str | None = None
        self._media: dict[str, list[str]] = {}
        self._tool_calls: list[ToolCallDelta] | None = None
        self._tool_results: list[ToolResult] | None = None
        self._citations: list[Mapping[str, Any]] | None = None

    def reasoning(self, text: str, signature: str | None = None) -> None:
        """A thought part: its text, and its signature (the signature of the reasoning)."""
        if text:
            if self._rank > _REASONING:
                self._close()
            self._rank = _REASONING
            self._reasoning.append(text)
        if signature:
            self.signature(signature)

    def signature(self, signature: str) -> None:
        if self._rank > _SIGNATURE or self._signature is not None:
            self._close()
        self._rank = _SIGNATURE
        self._extras = True
        self._signature = signature

    def content(self, text: str, signature: str | None = None) -> None:
        """A text part: its text, and its signature (bound to the text segment that text is in)."""
        if text:
            if self._rank > _CONTENT:
                self._close()
            self._rank = _CONTENT
            self._content.append(text)
        if signature:
            self._content_signature_of(signature)

    def _content_signature_of(self, signature: str) -> None:
        if self._rank > _CONTENT or self._content_signature is not None:
            self._close()
        self._rank = _CONTENT
        self._extras = True
        self._content_signature = signature

    def media(self, kind: str, url: str) -> None:
        if self._rank > _CONTENT:
            self._close()
        self._rank = _CONTENT
        self._extras = True
        self._media.setdefault(kind, []).append(url)

    def tool_call(self, delta: ToolCallDelta) -> None:
        if self._rank > _TOOL_CALLS:
            self._close()
        self._rank = _TOOL_CALLS
        self._extras = True
        if self._tool_calls is None:
            self._tool_calls = []
        self._tool_calls.append(delta)

    def tool_result(self, result: ToolResult) -> None:
        if self._rank > _TOOL_RESULTS:
            self._close()
        self._rank = _TOOL_RESULTS
        self._extras = True
        if self._tool_results is None:
            self._tool_results = []
        self._tool_results.append(result)

    def citations(self, citations: list[Mapping[str, Any]]) -> None:
        """Citations of the text so far: in a chunk after the parts, so that the emitter places them at
        the end of the text they cite (it reads a chunk's citations before its text)."""
        if self._rank != _EMPTY:
            self._close()
        self._rank = _CITATIONS
        self._extras = True
        self._citations = citations

    def take(
        self,
        usage: TokenUsage | None,
        finish_reason: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> list[ChunkResponse]:
        """The event's chunks, the last one carrying the event-level fields; the builder is then empty.

        A finish reason completes the response."""
        if self._done or self._extras:
            return self._take_all(usage, finish_reason, metadata)
        # Most events are text or reasoning alone: their one chunk is made here, with what it holds.
        reasoning, content = self._reasoning, self._content
        if not (reasoning or content or usage or finish_reason or metadata):
            return []
        if reasoning:
            self._reasoning = []
        if content:
            self._content = []
        self._rank = _EMPTY
        chunk = ChunkResponse(
            content="".join(content),
            reasoning="".join(reasoning) if reasoning else None,
            usage=usage,
            finish_reason=finish_reason,
            metadata=metadata or None,
            is_complete=finish_reason is not None,
        )
        return [chunk]

    def _take_all(
        self,
        usage: TokenUsage | None,
        finish_reason: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> list[ChunkResponse]:
        """`take` when the event closed a chunk already or the open one holds more than text."""
        done = self._done
        if self._rank != _EMPTY or usage is not None or finish_reason is not None or metadata:
            done.append(self._chunk(usage, finish_reason, metadata or None))
        self._done = []
        return done

    def _close(self) -> None:
        """Close the open chunk: a later part comes earlier in the reading order than what it holds."""
        self._done.append(self._chunk(None, None, None))

    def _chunk(
        self, usage: TokenUsage | None, finish_reason: str | None, metadata: Mapping[str, Any] | None
    ) -> ChunkResponse:
        """The open chunk, whatever it holds, with the given event-level fields; the builder's parts are
        emptied."""
        media, reasoning, content = self._media, self._reasoning, self._content
        chunk = ChunkResponse(
            content="".join(content),
            reasoning="".join(reasoning) if reasoning else None,
            reasoning_signature=self._signature,
            content_signature=self._content_signature,
            tool_calls=self._tool_calls,
            tool_results=self._tool_results,
            citations=self._citations,
            image_urls=media.get("image", []),
            audio_urls=media.get("audio", []),
            video_urls=media.get("video", []),
            usage=usage,
            finish_reason=finish_reason,
            metadata=metadata,
            is_complete=finish_reason is not None,
        )
        self._extras = False
        self._signature = self._content_signature = None
        self._tool_calls = self._tool_results = self._citations = None
        if media:
            self._media = {}
        if reasoning:
            self._reasoning = []
        if content:
            self._content = []
        self._rank = _EMPTY
        return chunk
