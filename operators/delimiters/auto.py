"""``tool_format="auto"``: the delimiter rewriter of the format the model's own markers name, per answer."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from operators.delimiters._lexer import DEFAULT_MAX_BUFFERED_CHARS
from operators.delimiters.detect import MAX_HELD_CHARS, UNDECIDED, registry_detector
from operators.delimiters.rewriter import DelimiterRewriter
from pipeline.models import ChunkResponse, IdFactory

__all__ = ["AUTO", "AutoDelimiterRewriter", "delimiter_rewriter"]

AUTO: Final = "auto"
"""The ``tool_format`` that tells the format from the model's markers, per answer."""


def delimiter_rewriter(
    tool_format: str,
    *,
    id_factory: IdFactory | None = None,
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    max_buffered_chars: int = DEFAULT_MAX_BUFFERED_CHARS,
    offered_tools: Collection[str] | None = None,
) -> DelimiterRewriter | AutoDelimiterRewriter:
    """The rewriter core of a tool format.

    Args:
        tool_format: a format's name, or ``"auto"`` (an `AutoDelimiterRewriter`).
        id_factory: makes the ids of the calls found (`new_call_id` by default).
        tool_schemas: tool name -> JSON schema of its parameters, to type XML-style values.
        max_buffered_chars: cap, in characters, of what one call holds back (see `DelimiterRewriter`).
        offered_tools: the names of the tools the request offers; a call to another stays text.
            ``None``: any name.

    Raises:
        ConfigurationError: ``tool_format`` is not a format, or an option is out of range.
    """
    options: dict[str, Any] = {
        "tool_schemas": tool_schemas,
        "max_buffered_chars": max_buffered_chars,
        "offered_tools": offered_tools,
    }
    if id_factory is not None:
        options["id_factory"] = id_factory
    if tool_format == AUTO:
        return AutoDelimiterRewriter(**options)
    return DelimiterRewriter(tool_format, **options)


class AutoDelimiterRewriter:
    """The delimiter rewriter of the format an answer's markers name (``tool_format="auto"``).

    Sans-IO: chunks in, chunks out. Text passes on unchanged until a format's opener appears (see
    `operators.delimiters.detect`); then the `DelimiterRewriter` of that format is
    built and fed what was held. Text is held only while its end could be the start of an opener, or what
    follows an opener does not yet tell, at most `MAX_HELD_CHARS` characters; past that, or
    when the answer ends, it goes on as text. The options go to the rewriter once it is built;
    `format` tells which format was detected (``None`` so far).

    Args:
        tool_schemas: tool name -> JSON schema of its parameters, to type XML-style values.
        id_factory: makes the ids of the calls found (`new_call_id` by default).
        offered_tools: the names of the tools the request offers; a call to another stays text.
            ``None``: any name.
        max_buffered_chars: cap, in characters, of what one call holds back (see `DelimiterRewriter`).
    """

    __slots__ = ("_detector", "_head", "_held", "_options", "_rewriter", "_window", "format")

    def __init__(
        self,
        *,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        id_factory: IdFactory | None = None,
        offered_tools: Collection[str] | None = None,
        max_buffered_chars: int = DEFAULT_MAX_BUFFERED_CHARS,
    ) -> None:
        self._options: dict[str, Any] = {
            "tool_schemas": tool_schemas,
            "offered_tools": offered_tools,
            "max_buffered_chars": max_buffered_chars,
        }
        if id_factory is not None:
            self._options["id_factory"] = id_factory
        self._rewriter: DelimiterRewriter | None = None
        self._held: list[ChunkResponse] = []
        self._window = ""
        """The held text (both channels, in order), from a possible marker start; at most the cap."""
        self._head: str | None = ""
        """The content channel's text from the answer's start, while a format without a marker may
        still claim it (``None`` once it cannot)."""
        self._detector = registry_detector()
        self.format: str | None = None

    def feed(self, item: ChunkResponse) -> list[ChunkResponse]:
        """The next chunk rewritten once the format is told; held or passed on until then."""
        if self._rewriter is not None:
            return self._rewriter.feed(item)
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
        if UNDECIDED in (start, within) or detector.may_start(window):
            return UNDECIDED
        return None

    def finish(self) -> list[ChunkResponse]:
        """The answer has ended: the rewriter finishes, or what was held goes on as text."""
        if self._rewriter is not None:
            return self._rewriter.finish()
        return self._release()

    def abort(self, exc: BaseException) -> list[ChunkResponse]:
        """The stream failed: what was held goes on (released or rewritten)."""
        return self.finish()

    def _release(self) -> list[ChunkResponse]:
        held, self._held, self._window = self._held, [], ""
        return held

    def _start(self, tool_format: str) -> list[ChunkResponse]:
        self.format = tool_format
        rewriter = self._rewriter = DelimiterRewriter(tool_format, **self._options)
        out: list[ChunkResponse] = []
        for chunk in self._release():
            out += rewriter.feed(chunk)
        return out
