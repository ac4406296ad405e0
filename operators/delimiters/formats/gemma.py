"""Gemma tool calls: ``call:NAME{key:<|"|>text<|"|>,n:42}`` between the model's call tokens.

- ``gemma4``: Gemma 4, ``<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>``.
- ``functiongemma``: FunctionGemma, ``<start_function_call>call:get_weather{city:<escape>Paris<escape>}
  <end_function_call>``.

Both write the arguments in Gemma's own syntax: keys bare (or between string delimiters), strings between
a delimiter token (``<|"|>``, ``<escape>``) with no escapes inside, numbers, ``true`` / ``false`` /
``null`` bare, objects ``{...}`` and arrays ``[...]``. `GemmaArguments` turns that into a JSON
object as it streams: a string character by character, a key or a bare value once it ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar, Final

from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput, Shortcut
from operators.delimiters._pyliteral import DONE, MALFORMED, NEEDS_MORE, json_number
from operators.delimiters._registry import register_format
from operators.delimiters._scan import HEADER_LIMIT, Markers, json_escape, space_end
from pipeline.models import ToolCallDelta

__all__ = ["BARE_LIMIT", "FunctionGemmaLexer", "Gemma4Lexer", "GemmaArguments", "GemmaCallLexer"]

BARE_LIMIT: Final = HEADER_LIMIT
"""Longest key or bare value held before the arguments count as malformed."""

_KEY: Final = 0
_KEY_TEXT: Final = 1
_KEY_STRING: Final = 2
_COLON: Final = 3
_VALUE: Final = 4
_STRING: Final = 5
_BARE: Final = 6
_AFTER: Final = 7

_KEY_END: Final = re.compile(r"[:}]")
_BARE_END: Final = re.compile(r"[,}\]]")
_JSON_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NULLS: Final = frozenset({"null", "none", "nil"})


def _bare_json(text: str) -> str:
    """The JSON of a bare value: a boolean, null, a number, else the text as a string."""
    value = text.strip()
    if value in ("true", "false"):
        return value
    if value.lower() in _NULLS:
        return "null"
    if _JSON_NUMBER.fullmatch(value) is not None:
        return json_number(value) or value
    return '"' + json_escape(value) + '"'


class GemmaArguments:
    """Writes a Gemma call's arguments (from just after its ``{``) as a JSON object, incrementally.

    `feed` returns where it stopped; ``status`` is then ``DONE`` (the object closed just before
    that position), ``MALFORMED`` or ``NEEDS_MORE``. Text it returns without consuming is the start of
    a string delimiter, to be given again with what follows. A string streams as it comes; a key or a
    bare value is held until it ends (at most `BARE_LIMIT` characters). Commas left out between
    two arguments (FunctionGemma writes ``a:<escape>x<escape>b:...``) are read as if written.
    """

    __slots__ = ("_comma", "_delimiter", "_emit", "_expect", "_key", "_parts", "_size", "_stack", "status")

    def __init__(self, emit: Callable[[str], None], delimiter: Markers) -> None:
        self._emit = emit
        self._delimiter = delimiter
        self._stack = ["}"]
        """The closing bracket of each open object or array."""
        self._expect = _KEY
        self._comma = False
        self._key = ""
        self._parts: list[str] = []
        self._size = 0
        self.status = NEEDS_MORE
        emit("{")

    def feed(self, buf: str, pos: int, final: bool) -> int:
        """Take the arguments' next characters from ``buf[pos:]`` (``final``: nothing follows)."""
        size = len(buf)
        while pos < size and self.status == NEEDS_MORE:
            expect = self._expect
            if expect in (_STRING, _KEY_STRING):
                resume = self._string(buf, pos, final)
                if resume == pos:
                    return pos  # (the start of a delimiter, split across chunks)
                pos = resume
            elif expect in (_KEY_TEXT, _BARE):
                pos = self._bare(buf, pos)
            else:
                index = space_end(buf, pos)
                if index == size:
                    return size
                if self._delimiter_may_start(buf, index, final):
                    return index
                pos = self._structure(buf, index)
        return pos

    def string_piece(self, text: str) -> str | None:
        """The JSON text of ``text`` when all of it is the next piece of a string value in which no
        delimiter can start, else None. What the lexer's shortcut streams without lexing."""
        if self._expect != _STRING or not self._delimiter.cannot_start_in(text):
            return None
        return json_escape(text)

    def cut(self) -> None:
        """The arguments end unfinished: emit a bare value held so far as it is."""
        if self._expect == _BARE and self._parts:
            self._emit("".join(self._parts))
        self._parts.clear()

    def _delimiter_may_start(self, buf: str, index: int, final: bool) -> bool:
        """Whether the end of ``buf`` from ``index`` may still grow into a string delimiter."""
        return not final and self._delimiter.may_grow(buf, index)

    # --- structure --------------------------------------------------------------------------------------

    def _structure(self, buf: str, index: int) -> int:
        """The character at ``index`` (not whitespace) where a key, ``:``, a value or what follows a
        value is expected."""
        char = buf[index]
        expect = self._expect
        if expect == _AFTER:
            return self._after(buf, index)
        if expect == _COLON:
            if char != ":":
                return self._malformed(index)
            self._write_key()
            return index + 1
        if expect == _VALUE and self._stack[-1] == "}" and char in ",}":  # "key:" without a value
            self._emit('""')
            self._value_done()
            return index
        if char == self._stack[-1]:  # an empty object or array, or after a trailing comma
            return self._close(index)
        opens_string = buf.startswith(self._delimiter.markers[0], index)
        if expect == _KEY:
            if char == ",":
                return index + 1
            return self._start_key(index, opens_string)
        return self._start_value(char, index, opens_string)

    def _start_key(self, index: int, opens_string: bool) -> int:
        self._parts.clear()
        self._size = 0
        if opens_string:
            self._expect = _KEY_STRING
            return index + len(self._delimiter.markers[0])
        self._expect = _KEY_TEXT
        return index

    def _write_key(self) -> None:
        prefix = ", " if self._comma else ""
        self._comma = False
        self._emit(prefix + '"' + json_escape(self._key) + '": ')
        self._expect = _VALUE

    def _start_value(self, char: str, index: int, opens_string: bool) -> int:
        if self._comma:
            self._comma = False
            self._emit(", ")
        if opens_string:
            self._emit('"')
            self._expect = _STRING
            return index + len(self._delimiter.markers[0])
        if char == "{" or char == "[":
            self._emit(char)
            self._stack.append("}" if char == "{" else "]")
            self._expect = _KEY if char == "{" else _VALUE
            return index + 1
        self._parts.clear()
        self._size = 0
        self._expect = _BARE
        return index

    def _after(self, buf: str, index: int) -> int:
        """What follows a value: ``,``, the closing bracket, or (in an object) the next key."""
        char = buf[index]
        top = self._stack[-1]
        if char == ",":
            self._comma = True
            self._expect = _KEY if top == "}" else _VALUE
            return index + 1
        if char == top:
            return self._close(index)
        if top == "}" and char not in "]{[":
            self._comma = True  # (a comma left out between two arguments)
            self._expect = _KEY
            return index
        return self._malformed(index)

    def _close(self, index: int) -> int:
        closer = self._stack.pop()
        self._comma = False
        self._emit(closer)
        self._value_done()
        return index + 1

    def _value_done(self) -> None:
        if self._stack:
            self._expect = _AFTER
        else:
            self.status = DONE

    def _malformed(self, index: int) -> int:
        self.status = MALFORMED
        return index

    # --- text -------------------------------------------------------------------------------------------

    def _string(self, buf: str, pos: int, final: bool) -> int:
        """A string up to its closing delimiter (the start of one at the end held back)."""
        stop, resume, marker = self._delimiter.find(buf, pos, final)
        if stop > pos:
            if self._expect == _STRING:
                self._emit(json_escape(buf[pos:stop]))
            elif not self._take(buf[pos:stop]):
                return self._malformed(stop)
        if marker is not None:
            if self._expect == _STRING:
                self._emit('"')
                self._value_done()
            else:
                self._key = "".join(self._parts)
                self._expect = _COLON
        return resume

    def _bare(self, buf: str, pos: int) -> int:
        """A bare key (up to ``:``) or a bare value (up to ``,``, ``}`` or ``]``)."""
        key = self._expect == _KEY_TEXT
        hit = (_KEY_END if key else _BARE_END).search(buf, pos)
        stop = len(buf) if hit is None else hit.start()
        if stop > pos and not self._take(buf[pos:stop]):
            return self._malformed(stop)
        if hit is None:
            return stop
        text = "".join(self._parts)
        self._parts.clear()
        if not key:
            self._emit(_bare_json(text))
            self._value_done()
            return stop
        if buf[stop] != ":" or not text.strip():
            return self._malformed(stop)
        self._key = text.strip()
        self._write_key()
        return stop + 1

    def _take(self, text: str) -> bool:
        """Hold ``text`` of a key or a bare value; False past `BARE_LIMIT`."""
        self._parts.append(text)
        self._size += len(text)
        return self._size <= BARE_LIMIT


_NAME_CHARS: Final = re.compile(r"[\w.\-]*")
_CALL: Final = "call:"


class GemmaCallLexer(FormatLexer):
    """Calls ``OPENER call:NAME{...} END``: ``text_markers`` holds the opener, ``end_markers`` the
    tokens that may end a call (dropped), ``string_delimiter`` the token around strings.

    The opener is a special token, but it counts as a call only once ``call:NAME{`` follows it (else it
    and what followed are text). The call is finished at the ``}`` that closes its arguments; an end
    token after it is dropped. Arguments that do not parse end the call there, unfinished, and what
    follows up to the end token is dropped. A call cut off keeps what was written of it.
    """

    end_markers: ClassVar[tuple[str, ...]]
    string_delimiter: ClassVar[Markers]

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._name_parts: list[str] = []
        self._arguments: GemmaArguments | None = None
        self._end = Markers(*self.end_markers)

    def opened(self, marker: str) -> None:
        self.hold_tentative(marker)
        self.state = self._call_prefix

    def shortcut(self, text: str) -> Shortcut:
        """A piece of a string argument goes into the call as its JSON text without lexing (what
        `_args` would emit); else the engine's shortcut."""
        arguments = self._arguments
        index = self.call_index
        if arguments is not None and index is not None and index >= 0 and not self._held:
            piece = arguments.string_piece(text)
            if piece is not None:
                self._call_has_args = True
                return ToolCallDelta(index, None, None, piece, False, self.call_kind)
        return super().shortcut(text)

    def _call_prefix(self, buf: str, pos: int, final: bool) -> int:
        index, found = self.expect_after_space(buf, pos, final, (_CALL,))
        if found:
            self.hold_tentative(found)
            self._name_parts.clear()
            self.state = self._name
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def _name(self, buf: str, pos: int, final: bool) -> int:
        end = _NAME_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
        if end > pos:
            if not self.hold_tentative(buf[pos:end]):
                self.not_a_call()
                return end
            self._name_parts.append(buf[pos:end])
        if end == len(buf):
            return end
        if buf[end] != "{" or not self._name_parts:
            self.not_a_call()
            return end
        self.take_tentative()
        self.start_call("".join(self._name_parts))
        self._arguments = GemmaArguments(self.emit_args, self.string_delimiter)
        self.state = self._args
        return end + 1

    def _args(self, buf: str, pos: int, final: bool) -> int:
        arguments = self._arguments
        assert arguments is not None  # (set with the state)
        resume = arguments.feed(buf, pos, final)
        if arguments.status == DONE:
            self._arguments = None
            self.end_call(finished=True)
            self.state = self._call_end
        elif arguments.status == MALFORMED:
            self._arguments = None
            self.end_call(finished=False)
            self.state = self._skip_to_end
        return resume

    def _call_end(self, buf: str, pos: int, final: bool) -> int:
        """After a call's ``}``: its end token (dropped with the whitespace before it), else text."""
        index, found = self.expect_after_space(buf, pos, final, self.end_markers)
        if found:
            self.take_tentative()
            self.state = self.start
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def _skip_to_end(self, buf: str, pos: int, final: bool) -> int:
        """Arguments that do not parse: drop the rest of the call, up to its end token."""
        _stop, resume, marker = self._end.find(buf, pos, final)
        if marker is not None:
            self.state = self.start
        return resume

    def at_end(self) -> None:
        if self._arguments is not None:
            self._arguments.cut()
            self._arguments = None
        if self.state == self._call_end:
            self.take_tentative()
        super().at_end()


_GEMMA4_START: Final = "<|tool_call>"
_GEMMA4_END: Final = "<tool_call|>"
_GEMMA4_TURN_END: Final = "<turn|>"
_GEMMA4_QUOTE: Final = '<|"|>'


@register_format
class Gemma4Lexer(GemmaCallLexer):
    """Gemma 4: ``<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>``, several calls
    one after another with nothing between them.

    Some Gemma 4 checkpoints end a call with ``<turn|>`` instead of ``<tool_call|>``: dropped the same
    way. Gemma 4's reasoning (``<|channel>thought ... <channel|>``) is not this format's: it passes as
    text. ``<tool_call|>`` inside a string is part of the string.
    """

    name: ClassVar[str] = "gemma4"
    models: ClassVar[tuple[str, ...]] = ("Gemma 4",)
    detect_openers: ClassVar[tuple[str, ...]] = (_GEMMA4_START,)
    markers: ClassVar[tuple[str, ...]] = (_GEMMA4_START, _GEMMA4_END, _GEMMA4_TURN_END, _GEMMA4_QUOTE)
    text_markers: ClassVar[Markers] = Markers(_GEMMA4_START)
    end_markers: ClassVar[tuple[str, ...]] = (_GEMMA4_END, _GEMMA4_TURN_END)
    string_delimiter: ClassVar[Markers] = Markers(_GEMMA4_QUOTE)


_FG_START: Final = "<start_function_call>"
_FG_END: Final = "<end_function_call>"
_FG_QUOTE: Final = "<escape>"


@register_format
class FunctionGemmaLexer(GemmaCallLexer):
    """FunctionGemma: ``<start_function_call>call:get_weather{city:<escape>Paris<escape>}
    <end_function_call>``.

    A value between ``<escape>`` tokens is a string, as FunctionGemma's chat template writes strings
    (vLLM's parser also reads ``<escape>42<escape>`` as the number 42: here it stays the string
    ``"42"``); numbers and booleans are written bare.
    """

    name: ClassVar[str] = "functiongemma"
    models: ClassVar[tuple[str, ...]] = ("FunctionGemma",)
    detect_openers: ClassVar[tuple[str, ...]] = (_FG_START,)
    markers: ClassVar[tuple[str, ...]] = (_FG_START, _FG_END, _FG_QUOTE)
    text_markers: ClassVar[Markers] = Markers(_FG_START)
    end_markers: ClassVar[tuple[str, ...]] = (_FG_END,)
    string_delimiter: ClassVar[Markers] = Markers(_FG_QUOTE)
