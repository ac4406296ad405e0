"""Hermes-style tool calls (Hermes 2 Pro, Qwen2.5, Qwen3, QwQ, Granite 4, Ernie 4.5):
``<tool_call>{"name": "NAME", "arguments": {...}}</tool_call>``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonBlockLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format

__all__ = ["HermesLexer"]

_TOOL_CALL: Final = "<tool_call>"
_TOOL_CALL_END: Final = "</tool_call>"


@register_format
class HermesLexer(JsonBlockLexer):
    """``<tool_call>`` + a JSON object ``{"name": ..., "arguments": {...}}`` + ``</tool_call>``, one
    block per call (whitespace and newlines around the JSON allowed).

    ``<tool_call>`` is plain text in most tokenizers, so it is taken for a call only when the next
    character after optional whitespace is ``{``: prose such as "use the <tool_call> tag" stays text
    (it is held back only until that character arrives). Prose that writes ``<tool_call>{`` cannot be
    told apart. The JSON is followed structurally: ``</tool_call>`` inside a JSON string is content, and
    the arguments stream verbatim as they arrive (a JSON-string ``arguments`` value is decoded, see
    `._wrapped`). A complete JSON object without ``</tool_call>`` at the end of the stream counts as
    finished; an object that is not of this shape is dropped up to ``</tool_call>``.

    Granite 4 writes exactly this (its chat template and vLLM's ``granite4`` parser: ``<tool_call>``,
    one JSON object, ``</tool_call>``), hence the ``granite4`` alias.
    """

    name: ClassVar[str] = "hermes"
    aliases: ClassVar[tuple[str, ...]] = ("qwen25", "hermes2_pro", "granite4", "ernie45")
    models: ClassVar[tuple[str, ...]] = ("Hermes 2 Pro", "Qwen2.5", "Qwen3", "QwQ", "Granite 4", "ERNIE 4.5")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALL,)
    markers: ClassVar[tuple[str, ...]] = (_TOOL_CALL, _TOOL_CALL_END)
    opener: ClassVar[str] = _TOOL_CALL
    closer: ClassVar[str] = _TOOL_CALL_END

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<tool_call>`` then ``{``.

        A list there is Granite 3.1's (``granite``)."""
        return claim_next(rest, final, "{")
