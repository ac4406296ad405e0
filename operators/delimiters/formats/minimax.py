"""MiniMax-M2 (M2, M2.1, M2.5, M2.7) tool calls: ``<minimax:tool_call>`` sections of ``<invoke name="NAME">``
calls with ``<parameter name="KEY">VALUE</parameter>`` parameters."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._invoke import InvokeSectionLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["MiniMaxM2Lexer"]

_SECTION_BEGIN: Final = "<minimax:tool_call>"
_SECTION_END: Final = "</minimax:tool_call>"
_INVOKE: Final = "<invoke"
_INVOKE_END: Final = "</invoke>"
_PARAMETER: Final = "<parameter"
_PARAMETER_END: Final = "</parameter>"


@register_format
class MiniMaxM2Lexer(InvokeSectionLexer):
    """``<minimax:tool_call>\\n<invoke name="NAME">\\n<parameter name="K">V</parameter>\\n</invoke>\\n
    </minimax:tool_call>``; several ``<invoke>`` blocks in one section are parallel calls.

    Values become JSON incrementally (see :class:`~._scan.XmlArguments`): one leading and one trailing
    newline are not part of a value; ``tool_schemas`` types values, and without a schema for the tool a
    value that parses as a JSON number, ``true``, ``false``, ``null``, object or array is that value,
    anything else a string streamed as it arrives. Values are taken verbatim (HTML entities are not
    decoded). The section markers are special tokens; ``<invoke``/``<parameter`` are plain text but only
    count inside a section. A value containing the literal ``</parameter>`` ends there: that cannot be
    told apart.
    """

    name: ClassVar[str] = "minimax_m2"
    aliases: ClassVar[tuple[str, ...]] = ("minimax-m2",)
    models: ClassVar[tuple[str, ...]] = ("MiniMax-M2", "MiniMax-M2.1", "MiniMax-M2.5")
    detect_openers: ClassVar[tuple[str, ...]] = (_SECTION_BEGIN,)
    markers: ClassVar[tuple[str, ...]] = (
        _SECTION_BEGIN,
        _SECTION_END,
        _INVOKE,
        _INVOKE_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    text_markers: ClassVar[Markers] = Markers(_SECTION_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_SECTION_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_INVOKE, _SECTION_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_SECTION_END})
    invoke: ClassVar[str] = _INVOKE
    invoke_end: ClassVar[str] = _INVOKE_END
    parameter: ClassVar[str] = _PARAMETER
    parameter_end: ClassVar[str] = _PARAMETER_END
    value_strip: ClassVar[str] = "newline"
