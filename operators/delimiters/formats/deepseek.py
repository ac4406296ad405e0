# ruff: noqa: RUF002  (the docstrings show the real delimiters, with their full-width bars)
"""DeepSeek tool calls: V3 / R1-0528 (``function<｜tool▁sep｜>NAME`` + a fenced JSON block), V3.1 /
V3.1-Terminus / V3.2-Exp (``NAME<｜tool▁sep｜>JSON``) and V3.2 / V4 DSML (XML-style parameters).

The delimiters use U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER ONE EIGHTH BLOCK (DSML: only U+FF5C);
ASCII look-alikes are not accepted.
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._families import SectionLexer
from operators.delimiters._invoke import InvokeSectionLexer, attribute
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers, ValueType

__all__ = ["DeepSeekV3Lexer", "DeepSeekV31Lexer", "DeepSeekV32Lexer"]

_CALLS_BEGIN: Final = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
_CALLS_END: Final = "<\uff5ctool\u2581calls\u2581end\uff5c>"
_CALL_BEGIN: Final = "<\uff5ctool\u2581call\u2581begin\uff5c>"
_SEP: Final = "<\uff5ctool\u2581sep\uff5c>"
_CALL_END: Final = "<\uff5ctool\u2581call\u2581end\uff5c>"
_FENCE: Final = "```"
_FENCE_JSON: Final = "```json"

_CLOSERS: Final = (_CALL_END, _CALL_BEGIN, _CALLS_END)


class _DeepSeekSection(SectionLexer):
    """What V3 and V3.1 share: the section ``<｜tool▁calls▁begin｜> CALL* <｜tool▁calls▁end｜>`` and the
    call's name, read up to one of ``name_ends`` (what opens the arguments, or a call closer)."""

    text_markers: ClassVar[Markers] = Markers(_CALLS_BEGIN, _CALL_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_CALLS_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_CALL_BEGIN, _CALLS_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_CALLS_END})
    call_end: ClassVar[str] = _CALL_END
    name_ends: ClassVar[Markers]
    detect_openers: ClassVar[tuple[str, ...]] = (_CALLS_BEGIN,)
    typed_calls: ClassVar[bool]
    """Whether a call names its type (``function``) before the separator (V3) or its name (V3.1)."""

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """A call begins at once; ``function`` before its separator tells V3 from V3.1."""
        head = rest.lstrip()
        begun = claim_next(head, final, _CALL_BEGIN)
        if not begun:
            return begun
        body = head[len(_CALL_BEGIN) :]
        sep = body.find(_SEP)
        if sep < 0:
            return None
        return (body[:sep].strip() == "function") == cls.typed_calls

    name_opening: ClassVar[str]
    """What came before the name, given back as text with a name too long to be one."""

    def _name(self, buf: str, pos: int, final: bool) -> int:
        """The state of the call's name."""
        resume, marker = self.collect_header(buf, pos, final, self.name_ends)
        if marker == "":
            self.not_a_call_header(self.name_opening)
        elif marker is not None:
            self.start_call(self.take_header().strip())
            if marker in _CLOSERS:
                self.close_call(marker)
            else:
                self.state = self._arguments
        return resume

    def _arguments(self, buf: str, pos: int, final: bool) -> int:
        """The state of the call's arguments."""
        raise NotImplementedError

    def at_end(self) -> None:
        if self.state == self._name:
            name = self.take_header().strip()
            if name:
                self.start_call(name)
        super().at_end()


@register_format
class DeepSeekV31Lexer(_DeepSeekSection):
    """DeepSeek-V3.1: ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{JSON}<｜tool▁call▁end｜>
    ...<｜tool▁calls▁end｜>``.

    The arguments stream as the model writes them; markers inside JSON strings are content. A call
    without its end marker at the end of the stream is cut off. The markers are special tokens: prose
    cannot write them, but a model writing them as text cannot be told apart from a call.
    """

    name: ClassVar[str] = "deepseek_v31"
    aliases: ClassVar[tuple[str, ...]] = ("deepseekv31", "deepseek_v3.1")
    models: ClassVar[tuple[str, ...]] = ("DeepSeek-V3.1", "DeepSeek-V3.1-Terminus", "DeepSeek-V3.2-Exp")
    typed_calls: ClassVar[bool] = False
    markers: ClassVar[tuple[str, ...]] = (_CALLS_BEGIN, _CALLS_END, _CALL_BEGIN, _SEP, _CALL_END)
    name_ends: ClassVar[Markers] = Markers(_SEP, *_CLOSERS)
    name_opening: ClassVar[str] = _CALL_BEGIN

    def begin_call(self, marker: str) -> None:
        self.state = self._name

    def _arguments(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_json_args(buf, pos, final, _V31_ARGUMENTS)
        if marker is not None:
            self.close_call(marker)
        return resume


_V31_ARGUMENTS: Final = Markers(*_CLOSERS)
_V3_TYPE: Final = Markers(_SEP, *_CLOSERS)
_V3_ARGUMENTS: Final = Markers(_FENCE, *_CLOSERS)
_V3_AFTER_FENCE: Final = Markers(*_CLOSERS)


@register_format
class DeepSeekV3Lexer(_DeepSeekSection):
    """DeepSeek-V3 (0324) and R1-0528: ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{JSON}
    \\n```<｜tool▁call▁end｜>`` inside ``<｜tool▁calls▁begin｜> ... <｜tool▁calls▁end｜>``, calls separated by
    newlines.

    The fence is lexed as a marker (never leaked into the arguments, however it is split); the arguments
    stream as they arrive and end at a fence outside a JSON string. The type before ``<｜tool▁sep｜>``
    (always ``function``) is not kept. Like V3.1, real markers and markers written as text cannot be told
    apart.
    """

    name: ClassVar[str] = "deepseek_v3"
    aliases: ClassVar[tuple[str, ...]] = ("deepseekv3", "deepseek_r1")
    models: ClassVar[tuple[str, ...]] = ("DeepSeek-V3 (0324)", "DeepSeek-R1-0528")
    typed_calls: ClassVar[bool] = True
    markers: ClassVar[tuple[str, ...]] = (_CALLS_BEGIN, _CALLS_END, _CALL_BEGIN, _SEP, _CALL_END, _FENCE_JSON)
    name_ends: ClassVar[Markers] = Markers(_FENCE_JSON, _FENCE, *_CLOSERS)
    name_opening: ClassVar[str] = _CALL_BEGIN + "function" + _SEP

    def begin_call(self, marker: str) -> None:
        self.state = self._type

    def _type(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _V3_TYPE)
        if marker == "":
            self.not_a_call_header(_CALL_BEGIN)
        elif marker == _SEP:
            self.take_header()
            self.state = self._name
        elif marker is not None:
            self.start_call(self.take_header().strip())
            self.close_call(marker)
        return resume

    def _arguments(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_json_args(buf, pos, final, _V3_ARGUMENTS)
        if marker == _FENCE:
            self.state = self._after_fence
        elif marker is not None:
            self.close_call(marker)
        return resume

    def _after_fence(self, buf: str, pos: int, final: bool) -> int:
        """Between the closing fence and ``<｜tool▁call▁end｜>``: nothing but whitespace is expected."""
        _stop, resume, marker = _V3_AFTER_FENCE.find(buf, pos, final)
        if marker is not None:
            self.close_call(marker)
        return resume


# --- DSML --------------------------------------------------------------------------------------------------

_DSML: Final = "\uff5cDSML\uff5c"
_DSML_BEGINS: Final = (f"<{_DSML}function_calls>", f"<{_DSML}tool_calls>")
_DSML_ENDS: Final = (f"</{_DSML}function_calls>", f"</{_DSML}tool_calls>")
_INVOKE: Final = f"<{_DSML}invoke"
_INVOKE_END: Final = f"</{_DSML}invoke>"
_PARAMETER: Final = f"<{_DSML}parameter"
_PARAMETER_END: Final = f"</{_DSML}parameter>"


@register_format
class DeepSeekV32Lexer(InvokeSectionLexer):
    """DeepSeek-V3.2 and V4 DSML: ``<｜DSML｜function_calls>`` (V4: ``<｜DSML｜tool_calls>``) sections of
    ``<｜DSML｜invoke name="NAME">`` calls with ``<｜DSML｜parameter name="K" string="true|false">V
    </｜DSML｜parameter>`` parameters.

    ``string="true"`` values stream as JSON strings, verbatim; ``string="false"`` values are held until
    complete and written as JSON if they parse (else as a string); without the attribute the tool schema
    (or, without one, the value itself) decides, see `XmlArguments`. A missing
    ``</｜DSML｜parameter>`` is tolerated before ``</｜DSML｜invoke>``. Only the section opener is a special
    token: a value containing the literal ``</｜DSML｜parameter>`` ends there (it cannot be told apart), and
    a section opener written as prose becomes a section. V3.2-Exp used the V3.1 format
    (``deepseek_v31``).
    """

    name: ClassVar[str] = "deepseek_v32"
    aliases: ClassVar[tuple[str, ...]] = ("deepseekv32", "deepseek_dsml", "deepseek_v4")
    models: ClassVar[tuple[str, ...]] = ("DeepSeek-V3.2", "DeepSeek-V4")
    detect_openers: ClassVar[tuple[str, ...]] = _DSML_BEGINS
    markers: ClassVar[tuple[str, ...]] = (
        *_DSML_BEGINS,
        *_DSML_ENDS,
        _INVOKE,
        _INVOKE_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    text_markers: ClassVar[Markers] = Markers(*_DSML_BEGINS)
    section_begins: ClassVar[frozenset[str]] = frozenset(_DSML_BEGINS)
    section_markers: ClassVar[Markers] = Markers(_INVOKE, *_DSML_ENDS)
    section_ends: ClassVar[frozenset[str]] = frozenset(_DSML_ENDS)
    invoke: ClassVar[str] = _INVOKE
    invoke_end: ClassVar[str] = _INVOKE_END
    parameter: ClassVar[str] = _PARAMETER
    parameter_end: ClassVar[str] = _PARAMETER_END
    value_strip: ClassVar[str] = "none"

    def parameter_type(self, tag: str) -> ValueType | None:
        string = attribute(tag, "string")
        if string is None:
            return None
        return "string" if string.lower() == "true" else "json"
