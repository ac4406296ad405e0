"""AI21 Jamba tool calls: ``<tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonListLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["JambaLexer"]

_OPEN: Final = "<tool_calls>"
_CLOSE: Final = "</tool_calls>"


@register_format
class JambaLexer(JsonListLexer):
    """Jamba 1.5 / 1.6 / 1.7 (vLLM's ``jamba`` parser): ``<tool_calls>``, a JSON list of call objects,
    ``</tool_calls>``; each call streams as it arrives and is finished at its ``}``.

    ``<tool_calls>`` opens calls only when ``[`` and ``{`` follow it (after whitespace), so prose that
    mentions the tag stays text; so does MiniMax-M1's ``<tool_calls>`` with one object per line (read
    it with ``minimax``). Hunyuan-A13B writes the same list between the same tags: this format reads
    it too. ``</tool_calls>`` inside a JSON string is content.
    """

    name: ClassVar[str] = "jamba"
    aliases: ClassVar[tuple[str, ...]] = ("hunyuan_a13b",)
    models: ClassVar[tuple[str, ...]] = ("Jamba 1.5", "Jamba 1.6", "Jamba 1.7", "Hunyuan-A13B")
    detect_openers: ClassVar[tuple[str, ...]] = (_OPEN,)
    markers: ClassVar[tuple[str, ...]] = (_OPEN, _CLOSE)
    text_markers: ClassVar[Markers] = Markers(_OPEN)
    wrapper_markers: ClassVar[Markers] = Markers(_OPEN, _CLOSE)
    closers: ClassVar[dict[str, str]] = {_OPEN: _CLOSE}

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<tool_calls>`` is Jamba's when a JSON list follows it."""
        return claim_next(rest, final, "[")
