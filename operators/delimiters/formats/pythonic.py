"""Pythonic tool calls: ``[get_weather(city="Paris"), get_time()]``, the arguments Python literals.

- ``pythonic``: Llama 3.2 and Llama 4 answer with the list alone (Llama 4 may wrap it in
  ``<|python_start|>`` ... ``<|python_end|>``).
- ``olmo3``: Olmo 3 writes one call per line inside ``<function_calls>`` ... ``</function_calls>``.
- ``lfm2``: LFM2 and LFM2.5 wrap the list in ``<|tool_call_start|>`` ... ``<|tool_call_end|>``.

The arguments become a JSON object as they stream (`operators.delimiters._pyliteral`): a string
argument streams character by character as JSON text, and each call is finished at its ``)``. A lexer
holds at most the text since the last call while the next one is undecided
(`HEADER_LIMIT` characters), an argument's name of that length, a
number or word of `TOKEN_LIMIT` characters, and a partial escape.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput, Shortcut
from operators.delimiters._pyliteral import DONE, MALFORMED, PythonArguments, PythonLiteral
from operators.delimiters._registry import register_format
from operators.delimiters._scan import HEADER_LIMIT, Markers, space_end
from pipeline.models import ToolCallDelta

__all__ = ["LfmLexer", "OlmoLexer", "PythonicCallsLexer", "PythonicLexer", "calls_follow"]

_NAME_START: Final = re.compile(r"[^\W\d]")
"""What a tool or argument name starts with: a letter or ``_``."""
_NAME_CHARS: Final = re.compile(r"[\w.]*")
"""A tool name's characters (``grocery.orderIngredients``)."""
_KEY_CHARS: Final = re.compile(r"\w*")


def calls_follow(rest: str, final: bool) -> bool | None:
    """Whether ``rest`` (after an opener) begins like pythonic calls: optional ``[``, a name and
    ``(``; None while more text may tell. For ``detect_after``."""
    index = space_end(rest, 0)
    if index < len(rest) and rest[index] == "[":
        index = space_end(rest, index + 1)
    if index == len(rest):
        return None if not final else False
    if _NAME_START.match(rest, index) is None:
        return False
    index = space_end(rest, _NAME_CHARS.match(rest, index).end())  # type: ignore[union-attr]
    if index == len(rest):
        return None if not final else False
    return rest[index] == "("


class PythonicCallsLexer(FormatLexer):
    """Calls written ``name(key=literal, ...)``, in a list ``[...]`` or (``brackets_optional``) one
    after another separated by whitespace, after an opener in ``text_markers`` and until one of
    ``end_markers`` (dropped).

    A call is taken for one only once ``name(`` is followed by ``key=`` or ``)``: until then what
    follows the opener (or the last call) is held, at most `HEADER_LIMIT` characters, and
    released as text if anything else comes. A call that goes wrong after that (a positional argument,
    a value that is not a literal) ends there unfinished, and the rest is text.
    """

    end_markers: ClassVar[tuple[str, ...]] = ()
    brackets_optional: ClassVar[bool] = True
    gap_is_next_call: ClassVar[bool] = True
    """What comes between two calls (``, ``) belongs to the second: a guard of tools not offered
    (``._guard``) gives it back with the call when that call's tool is not offered."""

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._bracketed = False
        self._bare = False
        """The calls opened with a bare ``[`` (no marker): an empty list is text."""
        self._calls = 0
        """Calls made since the opener."""
        self._name_parts: list[str] = []
        self._key_parts: list[str] = []
        self._key_size = 0
        self._arguments: PythonArguments | None = None
        self._literal: PythonLiteral | None = None

    def shortcut(self, text: str) -> Shortcut:
        """A piece of a string argument goes into the call as its JSON text without lexing (what
        `_value` would emit); else the engine's shortcut."""
        literal = self._literal
        index = self.call_index
        if literal is not None and index is not None and index >= 0 and not self._held:
            piece = literal.string_piece(text)
            if piece is not None:
                self._call_has_args = True
                return ToolCallDelta(index, None, None, piece, False, self.call_kind)
        return super().shortcut(text)

    def opened(self, marker: str) -> None:
        self.hold_tentative(marker)
        self._bare = False
        self._calls = 0
        self.state = self._list_open

    def open_list(self, bare: bool) -> None:
        """A ``[`` (held) opens a list of calls."""
        self.hold_tentative("[")
        self._bare = bare
        self._calls = 0
        self._bracketed = True
        self.state = self._call_start

    # --- between calls (held until a call is confirmed) -------------------------------------------------

    def _hold(self, text: str) -> bool:
        """Hold ``text`` while no call is open (it is released as text if no call follows); False once
        the held text passed the cap (then it was text: released)."""
        if self.call_index is not None or not text or self.hold_tentative(text):
            return True
        self.not_a_call()
        return False

    def _next(self, buf: str, pos: int) -> tuple[int, str]:
        """Hold the whitespace at ``pos`` (see `_hold`), then the character after it: ``(index,
        char)``, ``char`` empty when the chunk ended or the held text passed the cap."""
        index = space_end(buf, pos)
        if not self._hold(buf[pos:index]) or index == len(buf):
            return index, ""
        return index, buf[index]

    def _list_open(self, buf: str, pos: int, final: bool) -> int:
        """After an opener: ``[``, or (``brackets_optional``) the first call's name."""
        index, char = self._next(buf, pos)
        if not char:
            return index
        if char == "[":
            self.open_list(bare=False)
            return index + 1
        if self.brackets_optional and _NAME_START.match(char) is not None:
            self._bracketed = False
            return self._name_start(index)
        self.not_a_call()
        return index

    def _call_start(self, buf: str, pos: int, final: bool) -> int:
        """After ``[`` or a ``,`` between calls: a call's name, or ``]``."""
        index, char = self._next(buf, pos)
        if not char:
            return index
        if char == "]":
            self.hold_tentative(char)
            self._list_closed()
            return index + 1
        if _NAME_START.match(char) is not None:
            return self._name_start(index)
        self.not_a_call()
        return index

    def _name_start(self, index: int) -> int:
        self._name_parts.clear()
        self.state = self._call_name
        return index

    def _call_name(self, buf: str, pos: int, final: bool) -> int:
        end = _NAME_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
        if end > pos:
            if not self._hold(buf[pos:end]):
                return end
            self._name_parts.append(buf[pos:end])
        if end < len(buf):
            self.state = self._call_paren
        return end

    def _call_paren(self, buf: str, pos: int, final: bool) -> int:
        index, char = self._next(buf, pos)
        if not char:
            return index
        if char != "(":
            self.not_a_call()
            return index
        self.hold_tentative("(")
        self._arguments = None
        self.state = self._arg_start
        return index + 1

    def _confirm(self) -> PythonArguments:
        """The call held is one: what was held is its syntax."""
        self.take_tentative()
        self.start_call("".join(self._name_parts))
        arguments = self._arguments = PythonArguments(self.emit_args)
        return arguments

    # --- inside a call --------------------------------------------------------------------------------

    def _arg_start(self, buf: str, pos: int, final: bool) -> int:
        """After ``(`` or a ``,`` between arguments: an argument's name, or ``)``."""
        index, char = self._next(buf, pos)
        if not char:
            return index
        if char == ")":
            self._close_call()
            return index + 1
        if _NAME_START.match(char) is None:
            return self._wrong(index)
        self._key_parts.clear()
        self._key_size = 0
        self.state = self._key
        return index

    def _key(self, buf: str, pos: int, final: bool) -> int:
        end = _KEY_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
        if end > pos:
            if not self._hold(buf[pos:end]):
                return end
            self._key_parts.append(buf[pos:end])
            self._key_size += end - pos
            if self._key_size > HEADER_LIMIT:
                return self._wrong(end)
        if end < len(buf):
            self.state = self._equals
        return end

    def _equals(self, buf: str, pos: int, final: bool) -> int:
        index, char = self._next(buf, pos)
        if not char:
            return index
        if char != "=":
            return self._wrong(index)
        arguments = self._arguments if self.call_index is not None else None
        if arguments is None:
            arguments = self._confirm()
        self._literal = arguments.key("".join(self._key_parts))
        self.state = self._value
        return index + 1

    def _value(self, buf: str, pos: int, final: bool) -> int:
        literal = self._literal
        assert literal is not None  # (set with the state)
        resume = literal.feed(buf, pos, final)
        if literal.status == DONE:
            self.state = self._after_value
        elif literal.status == MALFORMED:
            return self._wrong(resume)
        return resume

    def _after_value(self, buf: str, pos: int, final: bool) -> int:
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        char = buf[index]
        if char == ",":
            self.state = self._arg_start
            return index + 1
        if char == ")":
            self._close_call()
            return index + 1
        return self._wrong(index)

    def _close_call(self) -> None:
        arguments = self._arguments if self.call_index is not None else None
        if arguments is None:
            arguments = self._confirm()
        arguments.close()
        self.end_call(finished=True)
        self._literal = None
        self._calls += 1
        self.state = self._after_call

    def _wrong(self, index: int) -> int:
        """What is at ``index`` does not belong in a call: a call held is text; an open call ends
        there, unfinished, and the rest is text."""
        if self.call_index is None:
            self.not_a_call()
            return index
        if self._literal is not None:
            self._literal.cut()
            self._literal = None
        self.end_call(finished=False)
        self.state = self.start
        return index

    # --- after a call ---------------------------------------------------------------------------------

    def _after_call(self, buf: str, pos: int, final: bool) -> int:
        """``,`` and the next call or ``]`` in a list; else the next call's name or the end."""
        index, char = self._next(buf, pos)
        if not char:
            return index
        if self._bracketed:
            if char == ",":
                self.hold_tentative(char)
                self.state = self._call_start
                return index + 1
            if char == "]":
                self.hold_tentative(char)
                self._list_closed()
                return index + 1
            self.not_a_call()
            return index
        if _NAME_START.match(char) is not None:
            return self._name_start(index)
        self.state = self._after_list
        return index

    def _list_closed(self) -> None:
        if self._bare and self._calls == 0:  # "[]" in prose
            self.not_a_call()
            return
        self.take_tentative()
        self.state = self._after_list

    def _after_list(self, buf: str, pos: int, final: bool) -> int:
        """After the calls: one of ``end_markers`` (dropped, with the whitespace before it), or text."""
        index, found = self.expect_after_space(buf, pos, final, self.end_markers)
        if found:
            self.take_tentative()
            self.state = self.start
            return index + len(found)
        if found == "":
            self.not_a_call()
        return index

    def at_end(self) -> None:
        if self.state == self._after_call or self.state == self._after_list:
            self.take_tentative()  # whitespace after the calls
        if self._literal is not None:
            self._literal.cut()
            self._literal = None
        super().at_end()


_PYTHON_START: Final = "<|python_start|>"
_PYTHON_END: Final = "<|python_end|>"


_BARE_CALL: Final = re.compile(r"\s*[^\W\d][\w.]*\s*\(\s*(?:[^\W\d]\w*\s*=|\))")
"""The start of a bare list of calls, after its ``[``: a name, ``(``, then ``key=`` or ``)``."""
_BARE_CALL_START: Final = re.compile(r"\s*(?:[^\W\d][\w.]*\s*(?:\(\s*(?:[^\W\d]\w*\s*)?)?)?")
"""What may still become `_BARE_CALL`."""


@register_format
class PythonicLexer(PythonicCallsLexer):
    """Llama 3.2 / Llama 4 pythonic tool calls: ``[get_weather(city="Paris"), get_time()]``, alone or
    inside ``<|python_start|>`` ... ``<|python_end|>``.

    Without the marker, a list is taken for calls only at the start of a channel's text (after
    whitespace), and only once ``[name(`` is followed by ``key=`` or ``)``: a list, a Markdown link or a
    bracket in prose stays text, as does a list that comes after any text. An answer that is a Python
    list of calls written as an example cannot be told apart from calls. Arguments are keyword
    arguments whose values are Python literals (JSON's ``true`` / ``false`` / ``null`` too); a set, a
    name or an expression ends the call there, unfinished.
    """

    name: ClassVar[str] = "pythonic"
    aliases: ClassVar[tuple[str, ...]] = ("llama4_pythonic",)
    models: ClassVar[tuple[str, ...]] = ("Llama 3.2", "Llama 4", "ToolACE")
    detect_openers: ClassVar[tuple[str, ...]] = (_PYTHON_START,)
    detect_at_start: ClassVar[tuple[str, ...]] = ("[",)
    markers: ClassVar[tuple[str, ...]] = (_PYTHON_START, _PYTHON_END)
    text_markers: ClassVar[Markers] = Markers(_PYTHON_START)
    end_markers: ClassVar[tuple[str, ...]] = (_PYTHON_END,)

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self.state = self._channel_start

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        """``<|python_start|>`` then a call; or an answer that starts ``[name(`` then ``key=`` or ``)``."""
        if opener != "[":
            return calls_follow(rest, final)
        if _BARE_CALL.match(rest):
            return True
        return None if _BARE_CALL_START.fullmatch(rest) else False

    def _channel_start(self, buf: str, pos: int, final: bool) -> int:
        """Nothing but whitespace has gone out on this channel yet: a bare list may open here."""
        index, char = self.char_after_space(buf, pos)
        if char == "[":
            self.open_list(bare=True)
            return index + 1
        if char:
            self.not_a_call()
        return index

    def at_end(self) -> None:
        if self.state == self._channel_start:
            self.release_tentative()
        super().at_end()


_FUNCTION_CALLS: Final = "<function_calls>"
_FUNCTION_CALLS_END: Final = "</function_calls>"


@register_format
class OlmoLexer(PythonicCallsLexer):
    """Olmo 3: ``<function_calls>`` then one pythonic call per line, then ``</function_calls>``::

        <function_calls>get_weather(city="Paris")
        get_time(zone=null)</function_calls>

    ``<function_calls>`` is taken for calls only once a call follows it (as in `PythonicLexer`):
    prose that mentions the tag stays text; prose that writes the tag and a call cannot be told apart. A
    list (``[f(), g()]``) inside the tags is read too.
    """

    name: ClassVar[str] = "olmo3"
    models: ClassVar[tuple[str, ...]] = ("Olmo 3",)
    detect_openers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALLS,)
    markers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALLS, _FUNCTION_CALLS_END)
    text_markers: ClassVar[Markers] = Markers(_FUNCTION_CALLS)
    end_markers: ClassVar[tuple[str, ...]] = (_FUNCTION_CALLS_END,)

    @classmethod
    def detect_after(cls, opener: str, rest: str, final: bool) -> bool | None:
        return calls_follow(rest, final)


_TOOL_CALL_START: Final = "<|tool_call_start|>"
_TOOL_CALL_END: Final = "<|tool_call_end|>"


@register_format
class LfmLexer(PythonicCallsLexer):
    """LFM2 / LFM2.5: ``<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>``, then text.

    The markers are special tokens; the list is still read as `PythonicLexer` reads it (calls
    without the brackets too). LFM2 sometimes repeats the call's text after ``<|tool_call_end|>``: that
    repetition is text.
    """

    name: ClassVar[str] = "lfm2"
    models: ClassVar[tuple[str, ...]] = ("LFM2", "LFM2.5")
    detect_openers: ClassVar[tuple[str, ...]] = (_TOOL_CALL_START,)
    markers: ClassVar[tuple[str, ...]] = (_TOOL_CALL_START, _TOOL_CALL_END)
    text_markers: ClassVar[Markers] = Markers(_TOOL_CALL_START)
    end_markers: ClassVar[tuple[str, ...]] = (_TOOL_CALL_END,)
