"""Phi-4-mini tool calls: ``functools[{"name": ..., "arguments": {...}}, ...]``."""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonListLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["Phi4MiniLexer"]

_FUNCTOOLS: Final = "functools"


@register_format
class Phi4MiniLexer(JsonListLexer):
    """Phi-4-mini-instruct (vLLM's ``phi4_mini_json`` parser): the word ``functools`` then a JSON list
    of ``{"name": ..., "arguments": {...}}`` objects (``"parameters"`` also accepted).

    ``functools`` is plain text, so it opens calls only when ``[{`` follows it (whitespace allowed):
    ``import functools`` or ``functools.partial`` in prose stays text; ``functools[{`` in prose cannot
    be told apart. The list's ``]`` ends the calls and what follows is text.
    """

    name: ClassVar[str] = "phi4_mini"
    aliases: ClassVar[tuple[str, ...]] = ("phi4_mini_json",)
    models: ClassVar[tuple[str, ...]] = ("Phi-4-mini",)
    detect_openers: ClassVar[tuple[str, ...]] = (_FUNCTOOLS + "[",)
    markers: ClassVar[tuple[str, ...]] = (_FUNCTOOLS,)
    text_markers: ClassVar[Markers] = Markers(_FUNCTOOLS)
    wrapper_markers: ClassVar[Markers] = Markers(_FUNCTOOLS)
