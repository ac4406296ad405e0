"""GigaChat 3 / 3.1 tool calls: one JSON object ``{"name": ..., "arguments": {...}}`` after
``<|message_sep|>`` + ``function call<|role_sep|>`` (GigaChat 3) or after ``<|function_call|>``
(GigaChat 3.1), then ``</s>``::

    I'll check that for you.<|message_sep|>

    function call<|role_sep|>
    {"name": "manage_user_memory", "arguments": {"action": "create"}}</s>
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._jsonblocks import JsonBlockLexer, opener_followed_by
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers

__all__ = ["GigaChat3Lexer"]

_MESSAGE_SEP: Final = "<|message_sep|>"
_ROLE: Final = "function call<|role_sep|>"
_FUNCTION_CALL: Final = "<|function_call|>"
_EOS: Final = "</s>"


@register_format
class GigaChat3Lexer(JsonBlockLexer):
    r"""GigaChat 3's function call (vLLM's ``gigachat3`` parser): the call object after its header,
    streamed as it arrives; ``</s>`` after it is dropped.

    The header is ``<|message_sep|>`` then ``function call<|role_sep|>`` (whitespace between them
    allowed), or ``<|function_call|>``; either opens a call only when ``{`` follows, so a
    ``<|message_sep|>`` that ends a message stays text. ``</s>`` inside a JSON string is content; a
    complete object without ``</s>`` counts as finished. GigaChat 3.5 writes a different, XML-style
    format (``<\uff5cGCML\uff5ctool_calls>``), not read here.
    """

    name: ClassVar[str] = "gigachat3"
    aliases: ClassVar[tuple[str, ...]] = ("gigachat",)
    models: ClassVar[tuple[str, ...]] = ("GigaChat 3", "GigaChat 3.1")
    detect_openers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALL, _MESSAGE_SEP)
    markers: ClassVar[tuple[str, ...]] = (_MESSAGE_SEP, _ROLE, _FUNCTION_CALL, _EOS)
    opener: ClassVar[str] = _FUNCTION_CALL
    closer: ClassVar[str] = _EOS
    preamble: ClassVar[tuple[str, ...]] = (_ROLE,)
    text_markers: ClassVar[Markers] = Markers(_FUNCTION_CALL, _MESSAGE_SEP)

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<|message_sep|>`` names the format only when the function-call header follows it."""
        if opener == _FUNCTION_CALL:
            return True
        return opener_followed_by(rest, final, (_ROLE,))
