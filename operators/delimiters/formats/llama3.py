"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: ``{"name": "NAME", "parameters": {...}}``, bare or after
``<|python_tag|>``, several separated by ``;``::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}; {"name": "now", "parameters": {}}
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from operators.delimiters._lexer import Channel, LexerOptions, LexerOutput, claim_next
from operators.delimiters._registry import register_format
from operators.delimiters._scan import Markers, space_end
from operators.delimiters._wrapped import WrappedJsonLexer

__all__ = ["Llama3JsonLexer"]

_PYTHON_TAG: Final = "<|python_tag|>"
_EOM: Final = "<|eom_id|>"
_EOT: Final = "<|eot_id|>"

_TEXT: Final = Markers(_PYTHON_TAG)
_SECTION: Final = Markers(_PYTHON_TAG, _EOM, _EOT)
_SEPARATORS: Final = re.compile(r"[\s;]*")

_CODE_TOOL: Final = "python"
"""Name of the call made of what follows ``<|python_tag|>`` when it is not JSON: Llama's code interpreter."""

_OPENING_KEYS: Final = ("name", "type")
_OPENING_LIMIT: Final = 256
"""How far a bare ``{`` is looked past to see ``{"name":`` (or ``{"type":``) before it counts as text."""


def _opens_call(text: str) -> bool | None:
    """Whether ``text`` (from a ``{``) begins ``{"name":`` or ``{"type":``; None while it still might."""
    index = space_end(text, 1)
    size = len(text)
    if index == size:
        return None
    if text[index] != '"':
        return False
    close = text.find('"', index + 1)
    key = text[index + 1 : size if close < 0 else close]
    if close < 0:
        return None if any(candidate.startswith(key) for candidate in _OPENING_KEYS) else False
    if key not in _OPENING_KEYS:
        return False
    index = space_end(text, close + 1)
    if index == size:
        return None
    return text[index] == ":"


_DETECT_FIELD: Final = re.compile(r'"(name|type)"\s*:\s*"((?:[^"\\]|\\.)*)"')


@register_format
class Llama3JsonLexer(WrappedJsonLexer):
    """Llama 3.x JSON tool calls (Meta's template: the model answers with JSON alone).

    After ``<|python_tag|>`` (a special token), a ``{`` opens a call: the wrapper
    ``{"name": ..., "parameters": {...}}`` (``"arguments"`` also accepted, a ``"type": "function"`` key
    skipped, a JSON-string value decoded) is read as it streams, the arguments verbatim. Calls follow
    each other separated by ``;`` and whitespace (dropped), until ``<|eom_id|>`` or ``<|eot_id|>``
    (dropped) or text. Anything else after ``<|python_tag|>`` is code for Llama's interpreter: a
    ``custom`` call named ``python`` whose input runs to ``<|eom_id|>`` / ``<|eot_id|>`` or the end of
    the stream (servers strip those stop tokens, so it counts as finished there); built-in tools written
    ``brave_search.call(query="...")`` arrive this way too.

    Without the tag, a call is recognised only at the start of a channel's text (after whitespace) or
    right after another call, and only when it begins ``{"name":`` or ``{"type":``: JSON in the middle of
    prose stays text, and an answer that is a JSON object with a ``name`` key cannot be told apart from
    a call. A wrapper that is not of this shape ends the call there (unfinished) and the rest is text; a
    marker outside a JSON string cuts the call it interrupts.
    """

    name: ClassVar[str] = "llama3_json"
    aliases: ClassVar[tuple[str, ...]] = ("llama3", "llama")
    models: ClassVar[tuple[str, ...]] = ("Llama 3.1", "Llama 3.2", "Llama 3.3 (JSON tool calls)")
    markers: ClassVar[tuple[str, ...]] = (_PYTHON_TAG, _EOM, _EOT)
    detect_openers: ClassVar[tuple[str, ...]] = (_PYTHON_TAG,)
    detect_at_start: ClassVar[tuple[str, ...]] = ("{",)

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<|python_tag|>``; or an answer that starts ``{"name": "NAME", "parameters"`` (or
        ``"arguments"``) or ``{"type": "function"``: a JSON answer of another shape is not a call."""
        if opener == _PYTHON_TAG:
            return True
        head = rest.lstrip()
        keyed = claim_next(head, final, '"name"', '"type"')
        if not keyed:
            return keyed
        field = _DETECT_FIELD.match(head)
        if field is None:
            return None
        if field[1] == "type":
            return field[2] == "function"
        after = head[field.end() :]
        comma = claim_next(after, final, ",")
        if not comma:
            return comma
        return claim_next(after.lstrip()[1:], final, '"parameters"', '"arguments"')

    wrapper_markers: ClassVar[Markers] = _SECTION

    text_markers: ClassVar[Markers] = _TEXT
    _tagged = False
    """The calls follow ``<|python_tag|>``: no need to see ``{"name":`` first."""

    # --- text -----------------------------------------------------------------------------------------------

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self.state = self._channel_start

    def _channel_start(self, buf: str, pos: int, final: bool) -> int:
        """Nothing but whitespace has gone out on this channel yet: a bare call may open here."""
        index, char = self.char_after_space(buf, pos)
        if char == "{":
            self._tagged = False
            self.state = self._confirm
        elif char:
            self.not_a_call()
        return index

    def opened(self, marker: str) -> None:
        self.hold_tentative(marker)
        self.state = self._after_tag

    def _confirm(self, buf: str, pos: int, final: bool) -> int:
        """At a bare ``{``: a call only if ``{"name":`` (or ``{"type":``) follows."""
        opens = _opens_call(buf[pos : pos + _OPENING_LIMIT])
        if opens is None and not final and len(buf) - pos < _OPENING_LIMIT:
            return pos  # not decided yet: hold the few characters seen
        if opens:
            self.enter_wrapper()
        else:
            self.not_a_call()
        return pos

    def _after_tag(self, buf: str, pos: int, final: bool) -> int:
        """After ``<|python_tag|>``: JSON calls, or code."""
        index, char = self.char_after_space(buf, pos)
        if not char:
            return index
        if char == "{":
            self._tagged = True
            self.enter_wrapper()
            return index
        stop, resume, marker = _SECTION.find(buf, index, final)
        if stop == index and marker is None and resume == index:
            return index  # perhaps a stop token
        self.take_tentative()
        self.start_call(_CODE_TOOL, kind="custom")
        self.state = self._code
        return index

    def _code(self, buf: str, pos: int, final: bool) -> int:
        resume, marker = self.stream_free_args(buf, pos, final, _SECTION)
        if marker is not None:
            self.end_call(finished=True)
            self._section_marker(marker)
        return resume

    # --- calls ----------------------------------------------------------------------------------------------

    def wrapper_closed(self) -> None:
        self.end_call(finished=True)
        self.state = self._between_calls

    def wrapper_interrupted(self, marker: str | None) -> None:
        self.end_call(finished=False)
        if marker is None:
            self.state = self.start
        else:
            self._section_marker(marker)

    def _section_marker(self, marker: str) -> None:
        """A marker came between or inside calls: a new tagged section, or the end of the message."""
        if marker == _PYTHON_TAG:
            self.hold_tentative(marker)
            self.state = self._after_tag
        else:
            self.state = self.start

    def _between_calls(self, buf: str, pos: int, final: bool) -> int:
        """Separators (``;`` and whitespace) are dropped if another call, a stop token or the end follows."""
        index = _SEPARATORS.match(buf, pos).end()  # type: ignore[union-attr]
        if index > pos and not self.hold_tentative(buf[pos:index]):
            self.not_a_call()
            return index
        if index == len(buf):
            return index
        if buf[index] == "{":
            if self._tagged:
                self.enter_wrapper()
            else:
                self.state = self._confirm
            return index
        stop, resume, marker = _SECTION.find(buf, index, final)
        if stop == index and marker is None and resume == index:
            return index  # perhaps a marker
        if stop == index and marker is not None:
            self.take_tentative()
            self._section_marker(marker)
            return resume
        self.not_a_call()
        return index

    # --- end of input ---------------------------------------------------------------------------------------

    def at_end(self) -> None:
        state = self.state
        if state == self._between_calls:
            self.take_tentative()
        elif state == self._after_tag:
            self.release_tentative()
        elif state == self._code:
            self.end_call(finished=True)
        super().at_end()
