"""Tencent Hunyuan's later models (HY-V3 / HY-V4): ``<tool_calls>`` sections of ``<tool_call>NAME<arg_key>..
</arg_key><arg_value>..</arg_value></tool_call>`` calls. Hunyuan-A13B writes Jamba's ``<tool_calls>`` +
a JSON list of calls, read by ``jamba`` (alias ``hunyuan_a13b``); what follows ``<tool_calls>`` tells
the two apart."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._families import SectionLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["HunyuanLexer"]

_TOOL_CALLS: Final = "<tool_calls>"
_TOOL_CALLS_END: Final = "</tool_calls>"
_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"
_TOOL_SEP: Final = "<tool_sep>"
_ARG_KEY: Final = "<arg_key>"
_ARG_KEY_END: Final = "</arg_key>"
_ARG_VALUE: Final = "<arg_value>"
_ARG_VALUE_END: Final = "</arg_value>"

_NAME_END: Final = Markers(_TOOL_SEP, _ARG_KEY, _TOOL_CALL_END, _TOOL_CALL, _TOOL_CALLS_END)
_IN_CALL: Final = Markers(_ARG_KEY, _TOOL_CALL_END, _TOOL_CALL, _TOOL_CALLS_END)
_KEY_END: Final = Markers(_ARG_KEY_END)
_BEFORE_VALUE: Final = Markers(_ARG_VALUE, _ARG_KEY, _TOOL_CALL_END, _TOOL_CALL, _TOOL_CALLS_END)
_VALUE_END: Final = Markers(_ARG_VALUE_END, _TOOL_CALL_END, _TOOL_CALL, _TOOL_CALLS_END)
_CALL_CLOSERS: Final = frozenset({_TOOL_CALL_END})


@register_format
class HunyuanLexer(SectionLexer):
    """Hunyuan HY-V3 and HY-V4: ``<tool_calls>`` then per call ``<tool_call>NAME<tool_sep>`` (HY-V4:
    no ``<tool_sep>``) and ``<arg_key>K</arg_key><arg_value>V</arg_value>`` pairs, ``</tool_call>``,
    then ``</tool_calls>``; newlines between the tags are allowed.

    Values become JSON incrementally (see `XmlArguments`), taken verbatim (whitespace
    inside ``<arg_value>`` is part of a string): ``tool_schemas`` types them, and without a schema for
    the tool a value that parses as a JSON number, ``true``, ``false``, ``null``, object or array is that
    value, anything else a string streamed as it arrives. A missing ``</arg_value>`` or ``</tool_call>``
    is tolerated before the next call or the section's end. HY-V4 checkpoints whose tokens carry a
    suffix (``<tool_calls:6124c78e>``) are not read.

    The tags are special tokens: prose cannot write them, but a model writing them as text cannot be
    told apart from a call. A section whose first call does not open stays text. A value containing
    the literal ``</arg_value>`` ends there: that cannot be told apart.
    """

    name: ClassVar[str] = "hunyuan"
    aliases: ClassVar[tuple[str, ...]] = ("hy_v3", "hy_v4")
    models: ClassVar[tuple[str, ...]] = ("Hunyuan HY-V3 (Hy3)", "Hunyuan HY-V4")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALLS,)
    markers: ClassVar[tuple[str, ...]] = (
        _TOOL_CALLS,
        _TOOL_CALLS_END,
        _TOOL_CALL,
        _TOOL_CALL_END,
        _TOOL_SEP,
        _ARG_KEY,
        _ARG_KEY_END,
        _ARG_VALUE,
        _ARG_VALUE_END,
    )

    text_markers: ClassVar[Markers] = Markers(_TOOL_CALLS)
    section_begins: ClassVar[frozenset[str]] = frozenset({_TOOL_CALLS})
    section_markers: ClassVar[Markers] = Markers(_TOOL_CALL, _TOOL_CALLS_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_TOOL_CALLS_END})
    call_end: ClassVar[str] = _TOOL_CALL_END

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        return claim_next(rest, final, _TOOL_CALL)

    def begin_call(self, marker: str) -> None:
        self.state = self._name

    def _name(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _NAME_END)
        if marker == "":
            self.not_a_call_header(_TOOL_CALL)
        elif marker is not None:
            self.start_xml_call(self.take_header().strip(), strip="none")
            self._after_marker(marker)
        return resume

    def _in_call(self, buf: str, pos: int, final: bool) -> int:
        """Between arguments: whitespace (anything else is dropped)."""
        resume, marker = self.skip_to(buf, pos, final, _IN_CALL)
        if marker is not None:
            self._after_marker(marker)
        return resume

    def _key(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _KEY_END)
        if marker is not None:
            self._current_key = self.take_header().strip()
            self.switch_to_skip(self._before_value, _BEFORE_VALUE)
        return resume

    def _before_value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.skip_to(buf, pos, final, _BEFORE_VALUE)
        if marker == _ARG_VALUE:
            self.begin_value(self._current_key)
            self.switch_to_value(self._value, _VALUE_END)
        elif marker is not None:  # a key without a value, or the call's end
            self._after_marker(marker)
        return resume

    def _value(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_value(buf, pos, final, _VALUE_END)
        if marker == _ARG_VALUE_END:
            self.switch_to_skip(self._in_call, _IN_CALL)
        elif marker is not None:
            self._after_marker(marker)
        return resume

    def _after_marker(self, marker: str) -> None:
        """What a marker inside a call does: a key starts, or the call ends (at its own end, or at the
        next call or the section's end when its end is missing)."""
        if marker == _ARG_KEY:
            self.switch_to_header(self._key, _KEY_END)
        elif marker == _TOOL_SEP:
            self.switch_to_skip(self._in_call, _IN_CALL)
        else:
            self.end_xml_call(finished=True)
            if marker in _CALL_CLOSERS:
                self.after_call()
            else:
                self.resume_after(marker)

    def at_end(self) -> None:
        if self.state == self._name:
            name = self.take_header().strip()
            if name:
                self.start_xml_call(name, strip="none")
        super().at_end()
