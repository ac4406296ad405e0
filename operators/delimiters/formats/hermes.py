"""Hermes-style tool calls (Hermes 2 Pro, Qwen2.5, Qwen3, QwQ, Granite 4, Ernie 4.5):
``<tool_call>{"name": "NAME", "arguments": {...}}</tool_call>``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._families import TaggedCallLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers
from operators.delimiters._wrapped import WrappedJsonLexer

__all__ = ["HermesLexer"]

_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"

_END: Final = Markers(_TOOL_CALL_END)


@register_format
class HermesLexer(WrappedJsonLexer, TaggedCallLexer):
    """``<tool_call>`` + a JSON object ``{"name": ..., "arguments": {...}}`` + ``</tool_call>``, one
    block per call (whitespace and newlines around the JSON allowed).

    ``<tool_call>`` is plain text in most tokenizers, so it is taken for a call only when the next
    character after optional whitespace is ``{``: prose such as "use the <tool_call> tag" stays text
    (it is held back only until that character arrives). Prose that writes ``<tool_call>{`` cannot be
    told apart. The JSON is followed structurally: ``</tool_call>`` inside a JSON string is content, and
    the arguments stream verbatim as they arrive (a JSON-string ``arguments`` value is decoded, see
    :mod:`._wrapped`). A complete JSON object without ``</tool_call>`` at the end of the stream counts as
    finished; an object that is not of this shape is dropped up to ``</tool_call>``.
    """

    name: ClassVar[str] = "hermes"
    aliases: ClassVar[tuple[str, ...]] = ("qwen25", "hermes2_pro", "ernie45")
    markers: ClassVar[tuple[str, ...]] = (_TOOL_CALL, _TOOL_CALL_END)
    wrapper_markers: ClassVar[Markers] = _END
    opener: ClassVar[str] = _TOOL_CALL

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """After ``<tool_call>``: a call only if ``{`` comes next (after whitespace)."""
        index, found = self.expect_after_space(buf, pos, final, ("{",))
        if found:
            self.enter_wrapper()
        elif found == "":
            self.not_a_call()
        return index

    def wrapper_closed(self) -> None:
        self.state = self._after_wrapper

    def _after_wrapper(self, buf: str, pos: int, final: bool) -> int:
        """After the JSON object: whitespace, then ``</tool_call>``."""
        index, found = self.expect_after_space(buf, pos, final, (_TOOL_CALL_END,))
        if found:
            self.take_tentative()
            self.end_call(finished=True)
            self.call_done()
            return index + len(found)
        if found == "":
            self._end_without_marker()
        return index

    def _end_without_marker(self) -> None:
        """The object is complete but ``</tool_call>`` does not follow: the call is done, the rest is text."""
        self.end_call(finished=True)
        self.release_tentative()
        self.state = self.start

    def wrapper_interrupted(self, marker: str | None) -> None:
        if marker is None:
            self.state = self._skip_to_end
        else:
            self.end_call(finished=True)
            self.call_done()

    def _skip_to_end(self, buf: str, pos: int, final: bool) -> int:
        """A malformed call: drop its text up to ``</tool_call>``."""
        _stop, resume, marker = _END.find(buf, pos, final)
        if marker is not None:
            self.end_call(finished=True)
            self.call_done()
        return resume

    def at_end(self) -> None:
        if self.state == self.confirm:
            self.not_a_call()
        elif self.state == self._after_wrapper:
            self.take_tentative()
            self.end_call(finished=True)
        super().at_end()
