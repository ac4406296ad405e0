"""GigaChat tool calls. GigaChat 3 / 3.1 (``gigachat3``): one JSON object
``{"name": ..., "arguments": {...}}`` after ``<|message_sep|>`` + ``function call<|role_sep|>``
(GigaChat 3) or after ``<|function_call|>`` (GigaChat 3.1), then ``</s>``::

    I'll check that for you.<|message_sep|>

    function call<|role_sep|>
    {"name": "manage_user_memory", "arguments": {"action": "create"}}</s>

GigaChat 3.5 (``gigachat35``): DeepSeek's DSML layout under GCML tags.
"""

from __future__ import annotations

from typing import ClassVar, Final

from operators.delimiters._invoke import InvokeSectionLexer, attribute
from operators.delimiters._jsonblocks import JsonBlockLexer
from operators.delimiters._lexer import claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers, ValueType

__all__ = ["GigaChat3Lexer", "GigaChat35Lexer"]

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
    format: ``gigachat35``.
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
        return claim_next(rest, final, _ROLE)


_GCML: Final = "\uff5cGCML\uff5c"
_SECTION: Final = f"<{_GCML}tool_calls>"
_SECTION_END: Final = f"</{_GCML}tool_calls>"


@register_format
class GigaChat35Lexer(InvokeSectionLexer):
    """GigaChat 3.5 (vLLM's ``gigachat35`` parser): a ``<\uff5cGCML\uff5ctool_calls>`` section of
    ``<\uff5cGCML\uff5cinvoke name="NAME">`` calls, each with ``<\uff5cGCML\uff5cparameter name="K"
    string="true|false">V</\uff5cGCML\uff5cparameter>`` parameters: DeepSeek's DSML layout under
    GigaChat's tag names.

    A value is a string unless its tag says ``string="false"`` (then it is written as JSON if it
    parses, else as a string): string values stream as they arrive. The section opener is a special
    token: prose that writes it cannot be told apart; a value holding the literal closing parameter tag
    ends there. A ``</s>`` after the section is text (servers strip it).
    """

    name: ClassVar[str] = "gigachat35"
    aliases: ClassVar[tuple[str, ...]] = ("gigachat3.5",)
    models: ClassVar[tuple[str, ...]] = ("GigaChat 3.5",)
    detect_openers: ClassVar[tuple[str, ...]] = (_SECTION,)
    markers: ClassVar[tuple[str, ...]] = (
        _SECTION,
        _SECTION_END,
        f"<{_GCML}invoke",
        f"</{_GCML}invoke>",
        f"<{_GCML}parameter",
        f"</{_GCML}parameter>",
    )
    text_markers: ClassVar[Markers] = Markers(_SECTION)
    section_begins: ClassVar[frozenset[str]] = frozenset({_SECTION})
    section_markers: ClassVar[Markers] = Markers(f"<{_GCML}invoke", _SECTION_END)
    section_ends: ClassVar[frozenset[str]] = frozenset({_SECTION_END})
    invoke: ClassVar[str] = f"<{_GCML}invoke"
    invoke_end: ClassVar[str] = f"</{_GCML}invoke>"
    parameter: ClassVar[str] = f"<{_GCML}parameter"
    parameter_end: ClassVar[str] = f"</{_GCML}parameter>"
    value_strip: ClassVar[str] = "none"

    def parameter_type(self, tag: str) -> ValueType | None:
        string = attribute(tag, "string")
        return "json" if string is not None and string.lower() == "false" else "string"
