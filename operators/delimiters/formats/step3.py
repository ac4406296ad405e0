# ruff: noqa: RUF002  (the docstrings show the real delimiters, with their full-width bars)
"""StepFun tool calls: Step-3 (``<｜tool_calls_begin｜>`` sections of ``<steptml:invoke>`` calls) and
Step-3.5 (the Qwen3-Coder XML layout).

Step-3's delimiters use U+FF5C FULLWIDTH VERTICAL LINE with ASCII underscores (not DeepSeek's U+2581).
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._invoke import InvokeSectionLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers
from operators.delimiters.formats.qwen3_coder import Qwen3CoderLexer

__all__ = ["Step3Lexer", "Step3p5Lexer"]

_CALLS_BEGIN: Final = "<\uff5ctool_calls_begin\uff5c>"
_CALLS_END: Final = "<\uff5ctool_calls_end\uff5c>"
_CALL_BEGIN: Final = "<\uff5ctool_call_begin\uff5c>"
_CALL_END: Final = "<\uff5ctool_call_end\uff5c>"
_SEP: Final = "<\uff5ctool_sep\uff5c>"
_INVOKE: Final = "<steptml:invoke"
_INVOKE_END: Final = "</steptml:invoke>"
_PARAMETER: Final = "<steptml:parameter"
_PARAMETER_END: Final = "</steptml:parameter>"

_TYPE_END: Final = Markers(_SEP, _INVOKE, _CALL_END, _CALLS_END)
_BEFORE_INVOKE: Final = Markers(_INVOKE, _CALL_END, _CALLS_END)
_SKIPPED: Final = Markers(_CALL_END, _CALLS_END)


@register_format
class Step3Lexer(InvokeSectionLexer):
    """``<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME">
    <steptml:parameter name="K">V</steptml:parameter></steptml:invoke><｜tool_call_end｜>
    <｜tool_calls_end｜>``, several calls in one section.

    Values become JSON incrementally (see `XmlArguments`) and are taken verbatim: the
    whitespace around a string is part of it (vLLM keeps it for edit tools), a typed value's is not.
    ``tool_schemas`` types values, and without a schema for the tool a value that parses as a JSON
    number, ``true``, ``false``, ``null``, object or array is that value, anything else a string streamed
    as it arrives. An entry of another type than ``function`` (``thought<｜tool_sep｜>...``) is skipped up
    to its ``<｜tool_call_end｜>``; ``<｜tool_call_begin｜><steptml:invoke`` without the type is read too,
    and so is a missing ``</steptml:invoke>`` before ``<｜tool_call_end｜>``.

    The section and call markers are special tokens: prose cannot write them, but a model writing them
    as text cannot be told apart from a call. ``<steptml:invoke`` outside a section is text. A value
    containing the literal ``</steptml:parameter>`` ends there: that cannot be told apart.
    """

    name: ClassVar[str] = "step3"
    models: ClassVar[tuple[str, ...]] = ("Step-3",)
    detect_openers: ClassVar[tuple[str, ...]] = (_CALLS_BEGIN,)
    markers: ClassVar[tuple[str, ...]] = (
        _CALLS_BEGIN,
        _CALLS_END,
        _CALL_BEGIN,
        _CALL_END,
        _SEP,
        _INVOKE,
        _INVOKE_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    text_markers: ClassVar[Markers] = Markers(_CALLS_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_CALLS_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_CALL_BEGIN, _INVOKE, _CALL_END, _SEP, _CALLS_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_CALLS_END})
    call_closers: ClassVar[tuple[str, ...]] = (_CALL_END,)
    invoke: ClassVar[str] = _INVOKE
    invoke_end: ClassVar[str] = _INVOKE_END
    parameter: ClassVar[str] = _PARAMETER
    parameter_end: ClassVar[str] = _PARAMETER_END
    value_strip: ClassVar[str] = "none"

    def begin_call(self, marker: str) -> None:
        if marker == _CALL_BEGIN:
            self.state = self._call_type
        elif marker == _INVOKE:
            super().begin_call(marker)
        else:  # a call's end or a separator between calls: nothing to do
            self.state = self.in_section_state

    def _call_type(self, buf: str, pos: int, final: bool) -> int:
        """After ``<｜tool_call_begin｜>``: the entry's type up to ``<｜tool_sep｜>`` (or the invoke)."""
        resume, marker = self.collect_header(buf, pos, final, _TYPE_END)
        if marker == "":
            self.not_a_call_header(_CALL_BEGIN)
        elif marker is not None:
            kind = self.take_header().strip()
            if marker == _SEP:
                self.state = self._before_invoke if kind == "function" else self._skipped
            else:
                self.resume_after(marker)
        return resume

    def _before_invoke(self, buf: str, pos: int, final: bool) -> int:
        """After ``function<｜tool_sep｜>``: anything up to ``<steptml:invoke`` is dropped."""
        resume, marker = self.skip_to(buf, pos, final, _BEFORE_INVOKE)
        if marker is not None:
            self.resume_after(marker)
        return resume

    def _skipped(self, buf: str, pos: int, final: bool) -> int:
        """An entry that is not a function call, dropped up to its end."""
        resume, marker = self.skip_to(buf, pos, final, _SKIPPED)
        if marker is not None:
            self.resume_after(marker)
        return resume


@register_format
class Step3p5Lexer(Qwen3CoderLexer):
    """Step-3.5: ``<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n</function>\\n
    </tool_call>``, the Qwen3-Coder layout (vLLM's engine reads it with Qwen3-Coder's grammar), read the
    same way: see `Qwen3CoderLexer`. ``--tool-format
    auto`` names such text ``qwen3_coder``."""

    name: ClassVar[str] = "step3p5"
    aliases: ClassVar[tuple[str, ...]] = ("step3.5",)
    models: ClassVar[tuple[str, ...]] = ("Step-3.5",)
    detect_openers: ClassVar[tuple[str, ...]] = ()
    """Told as ``qwen3_coder``, which reads this layout the same way."""
