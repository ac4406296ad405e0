"""``--tool-format auto``: the delimiter format told from the model's own markers, per answer.

:class:`AutoToolRewriter` is a sans-IO stage (chunks in, chunks out) that passes text on unchanged until a
known call marker appears; then it builds the :class:`~operators.delimiters.DelimiterRewriter` of that
format and feeds it what it held. It holds only while the text's end could be the start of a marker, or
what follows a marker several formats share does not yet tell them apart, at most
:data:`~operators.delimiters.detect.MAX_HELD_CHARS` characters; past that, or when the answer ends, the
held text goes on as text.

The markers are the formats' own (:mod:`operators.delimiters.detect`): every registered format that
declares them is detected, including formats registered at run time; ``streamfold formats`` lists them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from operators.convert._base import IdFactory
from operators.delimiters.detect import (
    MAX_HELD_CHARS,
    UNDECIDED,
    detect_tool_format,
    detected_formats,
    registry_detector,
)
from pipeline.models import ChunkResponse

__all__ = ["MAX_HELD_CHARS", "AutoToolRewriter", "detect_tool_format", "detected_formats"]


class AutoToolRewriter:
    """Sans-IO stage: chunks in, chunks with tool calls rewritten in the format detected (see the module
    doc). ``tool_schemas``, ``id_factory`` and ``offered_tools`` go to the rewriter once it is built;
    :attr:`format` tells which was detected (``None`` so far)."""

    __slots__ = ("_detector", "_head", "_held", "_options", "_rewriter", "_window", "format")

    def __init__(
        self,
        *,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: IdFactory | None = None,
        offered_tools: Collection[str] | None = None,
    ) -> None:
        self._options: dict[str, Any] = {"tool_schemas": tool_schemas, "offered_tools": offered_tools}
        if id_factory is not None:
            self._options["id_factory"] = id_factory
        self._rewriter: Any = None
        self._held: list[ChunkResponse] = []
        self._window = ""
        """The held text (both channels, in order), from a possible marker start; at most the cap."""
        self._head: str | None = ""
        """The content channel's text from the answer's start, while a format without a marker may
        still claim it (``None`` once it cannot)."""
        self._detector = registry_detector()
        self.format: str | None = None

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        if self._rewriter is not None:
            out: list[ChunkResponse] = self._rewriter.feed(item)
            return out
        text = (item.reasoning or "") + (item.content or "")
        if not text and not self._held:
            return [item]
        self._held.append(item)
        if self._head is not None and item.content:
            self._head += item.content
        window = self._window + text
        decided = self._decide(window)
        if decided:
            return self._start(decided)
        carries = item.finish_reason or item.is_complete or item.usage or item.tool_calls
        if decided is None or carries:
            return self._release()
        self._window = window[-MAX_HELD_CHARS:]
        return []

    def _decide(self, window: str) -> str | None:
        """The format the held text names, ``""`` while undecided, ``None`` if it names none."""
        detector = self._detector
        start = None
        if self._head is not None and len(self._head) > MAX_HELD_CHARS:
            self._head = None
        if self._head is not None and self._head.strip():
            start = detector.start(self._head, final=False)
            if start:
                return start
            if start is None:
                self._head = None  # the content began with something else: no marker-less call
        within = detector.within(window, final=False)
        if within:
            return within
        if start == UNDECIDED or within == UNDECIDED or detector.may_start(window):
            return UNDECIDED
        return None

    def finish(self) -> list[ChunkResponse]:
        if self._rewriter is not None:
            out: list[ChunkResponse] = self._rewriter.finish()
            return out
        return self._release()

    def abort(self, exc: BaseException) -> list[ChunkResponse]:
        """The stream failed: what was held goes on (released or rewritten)."""
        return self.finish()

    def _release(self) -> list[ChunkResponse]:
        held, self._held, self._window = self._held, [], ""
        return held

    def _start(self, tool_format: str) -> list[ChunkResponse]:
        from operators.delimiters import DelimiterRewriter

        self.format = tool_format
        self._rewriter = DelimiterRewriter(tool_format, **self._options)
        out: list[ChunkResponse] = []
        for chunk in self._release():
            out += self._rewriter.feed(chunk)
        return out
