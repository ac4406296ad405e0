"""InternLM2 / InternLM2.5 / InternLM3 and Intern-S1 tool calls:
``<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonBlockLexer
from operators.delimiters._registry import register_format

__all__ = ["InternLM2Lexer"]

_ACTION_START: Final = "<|action_start|>"
_PLUGIN: Final = "<|plugin|>"
_ACTION_END: Final = "<|action_end|>"


@register_format
class InternLM2Lexer(JsonBlockLexer):
    """``<|action_start|>``, ``<|plugin|>``, a JSON object ``{"name": ..., "parameters": {...}}``
    (``"arguments"`` also accepted), ``<|action_end|>``; one block per call.

    Intern-S1 writes the same blocks (vLLM's ``intern_s1`` parser only adds whitespace between the two
    opening tokens, accepted here too), hence the ``intern_s1`` alias. The opening tokens are special,
    and a call opens only when ``{`` follows them: another action (``<|action_start|><|interpreter|>``,
    the code interpreter) stays text. ``<|action_end|>`` inside a JSON string is content; a complete
    object without ``<|action_end|>`` at the end of the stream counts as finished.
    """

    name: ClassVar[str] = "internlm2"
    aliases: ClassVar[tuple[str, ...]] = ("internlm", "intern_s1")
    models: ClassVar[tuple[str, ...]] = ("InternLM2", "InternLM2.5", "InternLM3", "Intern-S1")
    detect_openers: ClassVar[tuple[str, ...]] = (_ACTION_START,)
    markers: ClassVar[tuple[str, ...]] = (_ACTION_START, _PLUGIN, _ACTION_END)
    opener: ClassVar[str] = _ACTION_START
    closer: ClassVar[str] = _ACTION_END
    preamble: ClassVar[tuple[str, ...]] = (_PLUGIN,)
