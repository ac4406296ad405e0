"""IBM Granite tool calls, two layouts:

- Granite 3.0 / 3.1 / 3.2 / 3.3 (``granite``): ``<|tool_call|>`` (3.0, a special token) or
  ``<tool_call>`` (3.1 and later, plain text), then a JSON list of calls and no closing tag:
  ``<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]``;
- Granite 20B function calling (``granite_20b_fc``): ``<function_call>`` before each call object,
  ``<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}``, no closing tag.

Granite 4 writes Hermes's ``<tool_call>{...}</tool_call>``: the ``granite4`` alias of ``hermes``.
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonBlockLexer, JsonListLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["Granite20bFcLexer", "GraniteLexer"]

_TOKEN: Final = "<|tool_call|>"
_TAG: Final = "<tool_call>"
_FUNCTION_CALL: Final = "<function_call>"


@register_format
class GraniteLexer(JsonListLexer):
    """Granite 3.x: ``<|tool_call|>`` or ``<tool_call>``, then a list of ``{"name": ..., "arguments":
    {...}}`` objects (vLLM's ``granite`` parser), or such a list alone at the start of the answer.

    A call opens only when ``[`` and ``{`` follow the opener (after whitespace): prose that mentions
    ``<tool_call>`` stays text, and so does a Hermes ``<tool_call>{`` (read it with ``hermes``). The
    list's ``]`` ends the calls; text after it is text. A bare list opens calls only at the very start
    of a channel's text: an answer that is a JSON list of objects cannot be told apart from calls.
    """

    name: ClassVar[str] = "granite"
    aliases: ClassVar[tuple[str, ...]] = ("granite3",)
    models: ClassVar[tuple[str, ...]] = ("Granite 3.0", "Granite 3.1", "Granite 3.2", "Granite 3.3")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOKEN, _TAG)
    markers: ClassVar[tuple[str, ...]] = (_TOKEN, _TAG)
    text_markers: ClassVar[Markers] = Markers(_TOKEN, _TAG)
    wrapper_markers: ClassVar[Markers] = Markers(_TOKEN, _TAG)
    bare_at_start: ClassVar[bool] = True

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<tool_call>`` is Granite 3's when a list follows it (Hermes writes an object there)."""
        if opener == _TOKEN:
            return True
        return claim_next(rest, final, "[")


@register_format
class Granite20bFcLexer(JsonBlockLexer):
    """Granite 20B function calling: ``<function_call>`` then one call object, repeated per call
    (vLLM's ``granite-20b-fc`` parser); the object's ``}`` ends the call.

    ``<function_call>`` opens a call only when ``{`` follows it (after whitespace): prose that mentions
    it stays text; ``<function_call>{`` in prose cannot be told apart. Whitespace between two calls is
    dropped; text after the last object is text.
    """

    name: ClassVar[str] = "granite_20b_fc"
    aliases: ClassVar[tuple[str, ...]] = ("granite-20b-fc",)
    models: ClassVar[tuple[str, ...]] = ("Granite 20B Function Calling",)
    detect_openers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALL,)
    markers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALL,)
    opener: ClassVar[str] = _FUNCTION_CALL
