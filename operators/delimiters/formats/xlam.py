"""Salesforce xLAM tool calls: a JSON list ``[{"name": ..., "arguments": {...}}, ...]``, alone at the
start of the answer, in a fenced block (```` ```json ... ``` ````), after ``[TOOL_CALLS]``, or between
``<tool_call>`` and ``</tool_call>``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonListLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["XLamLexer"]

_FENCE: Final = "```"
_TOOL_CALLS: Final = "[TOOL_CALLS]"
_TAG: Final = "<tool_call>"
_TAG_END: Final = "</tool_call>"
_THINK_END: Final = "</think>"


@register_format
class XLamLexer(JsonListLexer):
    """xLAM (vLLM's ``xlam`` parser): every layout it accepts, each a JSON list of call objects.

    A bare list opens calls only at the start of a channel's text or right after ``</think>`` (which
    stays text: the ``reasoning_tags`` stage, placed before, moves a ``<think>`` block to reasoning),
    after whitespace; the other layouts anywhere: a fence (optionally ``json``), the list, a fence;
    ``[TOOL_CALLS]`` then the list; ``<tool_call>`` then the list then ``</tool_call>``. Each opener
    counts only when ``[{`` (or ``[]``) follows it, so other code blocks and prose that mentions the
    tags stay text. An answer that is a JSON list of objects, or a fenced one, cannot be told apart
    from calls.
    """

    name: ClassVar[str] = "xlam"
    models: ClassVar[tuple[str, ...]] = ("xLAM-2", "xLAM-1")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALLS, _TAG, _FENCE)
    markers: ClassVar[tuple[str, ...]] = (_FENCE, _TOOL_CALLS, _TAG, _TAG_END, _THINK_END)
    text_markers: ClassVar[Markers] = Markers(_FENCE, _TOOL_CALLS, _TAG, _THINK_END)
    wrapper_markers: ClassVar[Markers] = Markers(_FENCE, _TOOL_CALLS, _TAG, _TAG_END)
    closers: ClassVar[dict[str, str]] = {_FENCE: _FENCE, _TAG: _TAG_END}
    preamble: ClassVar[tuple[str, ...]] = ("json",)
    bare_at_start: ClassVar[bool] = True

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """Each opener names xLAM only when a JSON list follows it (after ``json`` for a fence)."""
        if opener == _FENCE:
            if not final and "json".startswith(rest):
                return None
            rest = rest.removeprefix("json")
        return claim_next(rest, final, "[{", "[\n", "[ ")

    def opened(self, marker: str) -> None:
        if marker == _THINK_END:  # text, and a bare list may follow it
            self.emit_text(marker)
            self.state = self.channel_start
        else:
            super().opened(marker)
