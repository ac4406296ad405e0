"""LongCat-Flash tool calls: ``<longcat_tool_call>{"name": ..., "arguments": {...}}</longcat_tool_call>``,
one block per call, consecutive blocks with or without whitespace between them."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonBlockLexer
from operators.delimiters._registry import register_format

__all__ = ["LongCatLexer"]

_OPEN: Final = "<longcat_tool_call>"
_CLOSE: Final = "</longcat_tool_call>"


@register_format
class LongCatLexer(JsonBlockLexer):
    """Hermes's layout under LongCat's own tags (vLLM's ``longcat`` parser, SGLang's ``longcat``
    detector): ``<longcat_tool_call>`` + a JSON object + ``</longcat_tool_call>``.

    The opener is taken for a call only when ``{`` follows it (after whitespace), so prose that mentions
    the tag stays text; ``<longcat_tool_call>{`` in prose cannot be told apart. The closing tag inside a
    JSON string is content; a complete object without its closing tag counts as finished.
    """

    name: ClassVar[str] = "longcat"
    aliases: ClassVar[tuple[str, ...]] = ("longcat_flash",)
    models: ClassVar[tuple[str, ...]] = ("LongCat-Flash",)
    detect_openers: ClassVar[tuple[str, ...]] = (_OPEN,)
    markers: ClassVar[tuple[str, ...]] = (_OPEN, _CLOSE)
    opener: ClassVar[str] = _OPEN
    closer: ClassVar[str] = _CLOSE
