"""GLM tool calls: GLM-4.5 / 4.6 (``<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n
</tool_call>``) and GLM-4.7 / 5 (the same without newlines)."""

from __future__ import annotations

import re
from typing import ClassVar, Final

from operators.delimiters._families import TaggedCallLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["Glm45Lexer", "Glm47Lexer"]

_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"
_ARG_KEY: Final = "<arg_key>"
_ARG_KEY_END: Final = "</arg_key>"
_ARG_VALUE: Final = "<arg_value>"
_ARG_VALUE_END: Final = "</arg_value>"

_NAME_END: Final = re.compile(r"[\s<>]")
_IN_CALL: Final = Markers(_ARG_KEY, _TOOL_CALL_END)
_KEY: Final = Markers(_ARG_KEY_END)
_BEFORE_VALUE: Final = Markers(_ARG_VALUE, _ARG_KEY, _TOOL_CALL_END)
_VALUE: Final = Markers(_ARG_VALUE_END)
_AFTER_NAME: Final = (_ARG_KEY, _TOOL_CALL_END)

_DETECT_NAME: Final = re.compile(r"[^\s<>]+\s*")


@register_format
class Glm45Lexer(TaggedCallLexer):
    """``<tool_call>NAME`` then ``<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>`` pairs (newlines
    between them allowed, as GLM-4.5 writes them) then ``</tool_call>``; a call without arguments is
    ``<tool_call>NAME</tool_call>``.

    Values become JSON incrementally (see `XmlArguments`), their surrounding whitespace
    stripped as GLM's parser does; ``tool_schemas`` types them, and without a schema for the tool a value
    that parses as a JSON number, ``true``, ``false``, ``null``, object or array is that value, anything
    else a string. String values stream as they arrive.

    ``<tool_call>`` is taken for a call only when a name (no whitespace, ``<`` or ``>``) follows at once
    and, after optional whitespace, ``<arg_key>`` or ``</tool_call>``: prose such as "the <tool_call> tag"
    stays text (held back only until that is clear, at most a header's length). A value containing the
    literal ``</arg_value>`` ends there: that cannot be told apart. GLM-4.7 and GLM-4.5 are read by the same
    lexer (``glm47`` is an alias with its own class for clarity).
    """

    name: ClassVar[str] = "glm45"
    aliases: ClassVar[tuple[str, ...]] = ("glm4_moe", "glm46")
    models: ClassVar[tuple[str, ...]] = ("GLM-4.5", "GLM-4.6")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALL,)
    opener: ClassVar[str] = _TOOL_CALL

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<tool_call>`` then at once a name, then ``<arg_key>`` or ``</tool_call>``."""
        name = _DETECT_NAME.match(rest)
        if name is None:
            return None if not rest else False
        return claim_next(rest[name.end() :], final, _ARG_KEY, _TOOL_CALL_END)

    markers: ClassVar[tuple[str, ...]] = (
        _TOOL_CALL,
        _TOOL_CALL_END,
        _ARG_KEY,
        _ARG_KEY_END,
        _ARG_VALUE,
        _ARG_VALUE_END,
    )

    def confirm(self, buf: str, pos: int, final: bool) -> int:
        """The name, right after ``<tool_call>``."""
        stop, ender = self.read_name(buf, pos, _NAME_END)
        if ender:
            if ender == ">" or not self._header_parts:
                self.take_header()
                self.not_a_call()
            else:
                self.state = self._after_name
        return stop

    def _after_name(self, buf: str, pos: int, final: bool) -> int:
        """After the name: whitespace, then ``<arg_key>`` or ``</tool_call>``."""
        index, found = self.expect_after_space(buf, pos, final, _AFTER_NAME)
        if found:
            self.confirmed()
            self.start_xml_call(self.take_header(), strip="space")
            if found == _ARG_KEY:
                self.state = self._key
            else:
                self._end()
            return index + len(found)
        if found == "":
            self.take_header()
            self.not_a_call()
        return index

    def _in_call(self, buf: str, pos: int, final: bool) -> int:
        """Between arguments: whitespace (anything else is dropped)."""
        _stop, resume, marker = _IN_CALL.find(buf, pos, final)
        if marker == _ARG_KEY:
            self.state = self._key
        elif marker is not None:
            self._end()
        return resume

    def _key(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _KEY)
        if marker is not None:
            self._current_key = self.take_header().strip()
            self.state = self._before_value
        return resume

    def _before_value(self, buf: str, pos: int, final: bool) -> int:
        _stop, resume, marker = _BEFORE_VALUE.find(buf, pos, final)
        if marker == _ARG_VALUE:
            self.begin_value(self._current_key)
            self.state = self._value
        elif marker == _ARG_KEY:  # a key without a value
            self.state = self._key
        elif marker is not None:
            self._end()
        return resume

    def _value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, _VALUE)
        if marker is not None:
            self.state = self._in_call
        return resume

    def _end(self) -> None:
        self.end_xml_call(finished=True)
        self.call_done()

    def at_end(self) -> None:
        if self.state in (self.confirm, self._after_name):
            self.take_header()
            self.not_a_call()
        super().at_end()


@register_format
class Glm47Lexer(Glm45Lexer):
    """GLM-4.7 and GLM-5: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``, the
    GLM-4.5 layout without newlines (read by the same lexer)."""

    name: ClassVar[str] = "glm47"
    aliases: ClassVar[tuple[str, ...]] = ("glm5",)
    models: ClassVar[tuple[str, ...]] = ("GLM-4.7", "GLM-5")
    detect_openers: ClassVar[tuple[str, ...]] = ()
    """Told as ``glm45``, which reads this layout too."""
