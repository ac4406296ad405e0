"""ByteDance Seed-OSS tool calls: ``<seed:tool_call>`` blocks of ``<function=NAME>`` calls with
``<parameter=KEY>VALUE</parameter>`` parameters."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._invoke import InvokeSectionLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["SeedOssLexer"]

_SECTION_BEGIN: Final = "<seed:tool_call>"
_SECTION_END: Final = "</seed:tool_call>"
_FUNCTION: Final = "<function="
_FUNCTION_END: Final = "</function>"
_PARAMETER: Final = "<parameter="
_PARAMETER_END: Final = "</parameter>"


@register_format
class SeedOssLexer(InvokeSectionLexer):
    """``<seed:tool_call>\\n<function=NAME>\\n<parameter=K>V</parameter>\\n</function>\\n
    </seed:tool_call>``, one block per call (several calls in one block are read too).

    Values become JSON incrementally (see `XmlArguments`): one leading and one trailing
    newline are not part of a value (as vLLM strips them); ``tool_schemas`` types values, and without a
    schema for the tool a value that parses as a JSON number, ``true``, ``false``, ``null``, object or
    array is that value, anything else a string streamed as it arrives. A missing ``</parameter>`` is
    tolerated before ``</function>``, and a missing ``</function>`` before the block's end.

    ``<seed:tool_call>`` and ``</seed:tool_call>`` are special tokens: prose cannot write them, but a
    model that writes the whole format as text (explaining it inside ``<seed:think>``, say) cannot be told
    apart from a call. ``<function=`` outside a block is text. A value containing the literal
    ``</parameter>`` or ``</function>`` ends there: that cannot be told apart.
    """

    name: ClassVar[str] = "seed_oss"
    aliases: ClassVar[tuple[str, ...]] = ("seed-oss",)
    models: ClassVar[tuple[str, ...]] = ("Seed-OSS-36B",)
    detect_openers: ClassVar[tuple[str, ...]] = (_SECTION_BEGIN,)
    markers: ClassVar[tuple[str, ...]] = (
        _SECTION_BEGIN,
        _SECTION_END,
        _FUNCTION,
        _FUNCTION_END,
        _PARAMETER,
        _PARAMETER_END,
    )

    text_markers: ClassVar[Markers] = Markers(_SECTION_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset({_SECTION_BEGIN})
    section_markers: ClassVar[Markers] = Markers(_FUNCTION, _SECTION_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_SECTION_END})
    invoke: ClassVar[str] = _FUNCTION
    invoke_end: ClassVar[str] = _FUNCTION_END
    parameter: ClassVar[str] = _PARAMETER
    parameter_end: ClassVar[str] = _PARAMETER_END
    value_strip: ClassVar[str] = "newline"

    def tag_name(self, tag: str, key: str) -> str:
        return tag.strip()
