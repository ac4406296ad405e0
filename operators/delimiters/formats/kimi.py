"""Kimi tool calls: Kimi-K2 (K2, K2-0905, K2-Thinking, K2.5, K2.6: ``<|tool_calls_section_begin|>`` sections
of ``<|tool_call_begin|>ID<|tool_call_argument_begin|>JSON<|tool_call_end|>`` calls) and Kimi-K3 (XTML
``<|open|>tools<|sep|>`` channels of ``<|open|>call tool="NAME"<|sep|>`` calls)."""

from __future__ import annotations

import re
from typing import ClassVar, Final

from operators.delimiters._families import SectionLexer
from operators.delimiters._invoke import InvokeSectionLexer
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers, ValueType

__all__ = ["KimiK2Lexer", "KimiK3Lexer", "kimi_tool_name"]

_SECTION_BEGINS: Final = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
_SECTION_ENDS: Final = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
_CALL_BEGIN: Final = "<|tool_call_begin|>"
_ARGUMENT_BEGIN: Final = "<|tool_call_argument_begin|>"
_CALL_END: Final = "<|tool_call_end|>"
_ARGUMENT_END: Final = "<|tool_call_argument_end|>"

_FENCE: Final = "```"
_FENCE_JSON: Final = "```json"

_HEADER: Final = Markers(_ARGUMENT_BEGIN, _CALL_END, _CALL_BEGIN, *_SECTION_ENDS, _FENCE_JSON, _FENCE)
_ARGUMENTS: Final = Markers(_CALL_END, _CALL_BEGIN, *_SECTION_ENDS, _ARGUMENT_END)
_FENCED_ARGUMENTS: Final = Markers(_FENCE, _CALL_END, _CALL_BEGIN, *_SECTION_ENDS)
_AFTER_FENCE: Final = Markers(_CALL_END, _CALL_BEGIN, *_SECTION_ENDS)

_PARENTHESISED: Final = re.compile(r"functions\((?P<name>[^()]+)\):\d+(?:\.\d+)?")
_INDEX_SUFFIX: Final = re.compile(r"(?P<name>.+?)[:_]\d+")
_DIGIT_SUFFIX: Final = re.compile(r"(?P<name>.*?[^\d_.:-])\d+")
_FUNCTIONS_PREFIX: Final = re.compile(r"functions(?:[._]|(?=.))", re.DOTALL)


def kimi_tool_name(call_id: str, known: frozenset[str] | None = None) -> str:
    """The tool name inside a Kimi call id.

    ``functions.NAME:IDX`` is canonical; seen in the wild are ``NAME:IDX``, ``functions_NAME_IDX`` (ids
    echoed after a client sanitised them), ``functionsNAMEIDX`` / ``functions.NAMEIDX``,
    ``functions(NAME):IDX.0``, and dotted or hyphenated names (``functions.browser.search:0``,
    ``functions.mcp__portal__search-documents:0``). Only a leading ``functions`` prefix and a trailing
    index are removed, so dotted names survive. When ``known`` tool names are given, the first reading
    that names a known tool wins. An id with no name in it (a bare ``3``, ``call00003``) is returned as is.
    """
    text = call_id.strip()
    match = _PARENTHESISED.fullmatch(text)
    if match is not None:
        return match["name"]
    prefix = _FUNCTIONS_PREFIX.match(text)
    body = text[prefix.end() :] if prefix is not None else text
    # A bare name may end in digits of its own: a trailing digit run is an index only after the prefix.
    suffixes = (_INDEX_SUFFIX, _DIGIT_SUFFIX) if prefix is not None else (_INDEX_SUFFIX,)
    candidates = [found["name"] for suffix in suffixes if (found := suffix.fullmatch(body)) is not None]
    candidates.append(body)
    if known:
        for candidate in candidates:
            if candidate in known:
                return candidate
    return candidates[0] if body else text


@register_format
class KimiK2Lexer(SectionLexer):
    """Kimi-K2 tool calls.

    Layout: ``<|tool_calls_section_begin|>`` then per call ``<|tool_call_begin|>functions.NAME:IDX
    <|tool_call_argument_begin|>{JSON}<|tool_call_end|>``, then ``<|tool_calls_section_end|>``; spaces
    and newlines between the markers are allowed. Also accepted: the singular section markers
    (``<|tool_call_section_begin|>``), a call without a section, a section that never closes (a call
    whose JSON is complete then counts as finished at the end of the stream, ``end_marker_optional``), a
    missing ``<|tool_call_end|>`` before the next ``<|tool_call_begin|>``. The call id is kept as the
    ``call_id`` (see `kimi_tool_name` for the name). The arguments are the model's JSON text,
    whitespace around it trimmed; markers inside a JSON string are content. Kimi-K2.5 sometimes writes
    the arguments as a fenced block without ``<|tool_call_argument_begin|>``
    (``<|tool_call_begin|>functions.NAME\n```json\n{JSON}\n```\n<|tool_call_end|>``): the fence is
    lexed as a marker (the id ends there) and what follows the closing fence up to the call's end is
    dropped, as is what follows ``<|tool_call_argument_end|>``, which some outputs put after the JSON.
    The markers are special tokens, so prose cannot write them; a model that writes them as plain text
    (explaining the format) cannot be told apart from a real call.
    """

    name: ClassVar[str] = "kimi_k2"
    aliases: ClassVar[tuple[str, ...]] = ("kimi_k25", "kimi")
    models: ClassVar[tuple[str, ...]] = ("Kimi-K2", "Kimi-K2.5", "Kimi-K2-Thinking")
    detect_openers: ClassVar[tuple[str, ...]] = (
        "<|tool_calls_section_begin|>",
        "<|tool_call_section_begin|>",
    )
    end_marker_optional: ClassVar[bool] = True
    markers: ClassVar[tuple[str, ...]] = (
        *_SECTION_BEGINS,
        *_SECTION_ENDS,
        _CALL_BEGIN,
        _ARGUMENT_BEGIN,
        _CALL_END,
        _FENCE_JSON,
        _ARGUMENT_END,
    )

    text_markers: ClassVar[Markers] = Markers(*_SECTION_BEGINS, _CALL_BEGIN)
    section_begins: ClassVar[frozenset[str]] = frozenset(_SECTION_BEGINS)
    section_markers: ClassVar[Markers] = Markers(_CALL_BEGIN, *_SECTION_ENDS)
    section_ends: ClassVar[frozenset[str]] = frozenset(_SECTION_ENDS)
    call_end: ClassVar[str] = _CALL_END

    def begin_call(self, marker: str) -> None:
        self.state = self._call_id

    def _call_id(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.collect_header(buf, pos, final, _HEADER)
        if marker == "":
            self.not_a_call_header(_CALL_BEGIN)
            return resume
        if marker is None:
            return resume
        call_id = self.take_header().strip()
        known = frozenset(self.options.tool_schemas) or None
        self.start_call(kimi_tool_name(call_id, known) if call_id else "", call_id or None)
        if marker == _ARGUMENT_BEGIN:
            self.state = self._arguments
        elif marker in (_FENCE_JSON, _FENCE):
            self.state = self._fenced_arguments
        else:
            self.close_call(marker)
        return resume

    def at_end(self) -> None:
        if self.state == self._call_id:
            call_id = self.take_header().strip()
            if call_id:
                self.start_call(kimi_tool_name(call_id), call_id)
        super().at_end()

    def _arguments(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_json_args(buf, pos, final, _ARGUMENTS)
        if marker == _ARGUMENT_END:
            self.state = self._after_fence
        elif marker is not None:
            self.close_call(marker)
        return resume

    def _fenced_arguments(self, buf: str, pos: int, final: bool) -> int:
        """The JSON of a fenced block, up to its closing fence (outside a JSON string)."""
        resume, marker = self.stream_json_args(buf, pos, final, _FENCED_ARGUMENTS)
        if marker == _FENCE:
            self.state = self._after_fence
        elif marker is not None:
            self.close_call(marker)
        return resume

    def _after_fence(self, buf: str, pos: int, final: bool) -> int:
        """Between the closing fence (or ``<|tool_call_argument_end|>``) and the call's end: dropped."""
        resume, marker = self.skip_to(buf, pos, final, _AFTER_FENCE)
        if marker is not None:
            self.close_call(marker)
        return resume


# --- Kimi-K3 XTML ---------------------------------------------------------------------------------------

_SEP: Final = "<|sep|>"
_TOOLS_OPEN: Final = "<|open|>tools<|sep|>"
_TOOLS_CLOSE: Final = "<|close|>tools<|sep|>"
_CALL_OPEN: Final = "<|open|>call"
_CALL_CLOSE: Final = "<|close|>call<|sep|>"
_ARGUMENT_OPEN: Final = "<|open|>argument"
_ARGUMENT_CLOSE: Final = "<|close|>argument<|sep|>"
_CHANNEL_MARKERS: Final = frozenset(
    {"<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>"}
)
"""The response channel's wrapper and the end of the message: control markers, not text."""


@register_format
class KimiK3Lexer(InvokeSectionLexer):
    """Kimi-K3 XTML: ``<|open|>tools<|sep|>`` then per call ``<|open|>call tool="NAME" index="1"<|sep|>``
    with ``<|open|>argument key="K" type="string"<|sep|>V<|close|>argument<|sep|>`` arguments and
    ``<|close|>call<|sep|>``, then ``<|close|>tools<|sep|>``.

    A ``type="string"`` value is the raw text, streamed as a JSON string as it arrives; any other type is
    JSON, held until its end (the raw text as a string if it does not parse). Attribute values are
    unescaped (``&quot;``, ``&amp;``). The response channel's ``<|open|>response<|sep|>`` and
    ``<|close|>response<|sep|>`` and the closing ``<|close|>message<|sep|>`` are dropped from the text.
    The markers are special tokens: prose cannot write them. A string value containing the literal
    ``<|close|>argument<|sep|>`` ends there: that cannot be told apart (vLLM has the same limit).
    """

    name: ClassVar[str] = "kimi_k3"
    models: ClassVar[tuple[str, ...]] = ("Kimi-K3",)
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOLS_OPEN,)
    markers: ClassVar[tuple[str, ...]] = (
        _TOOLS_OPEN,
        _TOOLS_CLOSE,
        _CALL_OPEN,
        _CALL_CLOSE,
        _ARGUMENT_OPEN,
        _ARGUMENT_CLOSE,
        _SEP,
        *_CHANNEL_MARKERS,
    )

    text_markers: ClassVar[Markers] = Markers(_TOOLS_OPEN, *_CHANNEL_MARKERS)
    section_begins: ClassVar[frozenset[str]] = frozenset({_TOOLS_OPEN})
    section_markers: ClassVar[Markers] = Markers(_CALL_OPEN, _TOOLS_CLOSE)
    section_ends: ClassVar[frozenset[str]] = frozenset({_TOOLS_CLOSE})
    invoke: ClassVar[str] = _CALL_OPEN
    invoke_end: ClassVar[str] = _CALL_CLOSE
    parameter: ClassVar[str] = _ARGUMENT_OPEN
    parameter_end: ClassVar[str] = _ARGUMENT_CLOSE
    tag_end: ClassVar[Markers] = Markers(_SEP)
    invoke_attribute: ClassVar[str] = "tool"
    parameter_attribute: ClassVar[str] = "key"
    value_strip: ClassVar[str] = "none"

    def opened(self, marker: str) -> None:
        if marker not in _CHANNEL_MARKERS:  # (a channel marker is dropped: the text goes on)
            super().opened(marker)

    def tag_name(self, tag: str, key: str) -> str:
        return super().tag_name(tag, key).replace("&quot;", '"').replace("&amp;", "&")

    def parameter_type(self, tag: str) -> ValueType | None:
        declared = self.tag_name(tag, "type")
        if not declared:
            return None
        return "string" if declared == "string" else "json"
