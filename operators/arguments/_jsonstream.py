"""An incremental JSON parser for one tool call's arguments text: O(1) amortised work per character.

The SDKs re-parse the whole accumulated arguments text on every delta, which is quadratic in the size of
the arguments. `JSONStreamParser` keeps its state between chunks instead: the containers under
construction on an explicit stack, the pieces of the string being read, the digits of the number being
read, and at most a few characters of an escape or literal cut by the chunk boundary (re-read at the
start of the next chunk). Runs of string characters are decoded by the C string scanner of the standard
``json`` module, so the per-character work happens in C; Python code runs per chunk, per escaped quote
and per structural token.
"""

from __future__ import annotations

import re
from _json import scanstring as _scanstring
from json import JSONDecodeError
from typing import Any, Final, TypeAlias

import msgspec

from operators.arguments._jsonlex import (
    HEX_DIGITS,
    N_COMPLETE,
    N_EXP,
    N_EXPECTING,
    N_FRAC,
    N_INT,
    N_MINUS,
    N_ZERO,
    NUMBER_STEPS,
    describe,
    first_string_error,
    first_surrogate_error,
    is_high_surrogate,
    number_value,
    overflow_message,
)
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentErrorKind,
    ArgumentEvent,
    ArgumentValue,
    JSONPath,
    TextJoiner,
)

__all__ = ["DEFAULT_MAX_SIZE", "MAX_DEPTH", "JSONStreamParser"]

DEFAULT_MAX_SIZE: Final = 32 * 1024 * 1024
"""Characters of arguments text one parser accepts before it reports ``too_large``."""

MAX_DEPTH: Final = 512
"""Deepest nesting of objects and arrays accepted by default; deeper input is ``invalid_json``. The parser
itself has no limit (its stack is a list), but Python's own recursive code does: ``json.loads``,
``json.dumps``, ``msgspec``, ``repr`` and ``==`` all fail near 1000 levels on Python 3.11 (3.12 and 3.13
give C code more room), so a deeper value would break the stages and observers that encode or compare it."""

_Container: TypeAlias = dict[str, Any] | list[Any]

# Parser states.
_VALUE: Final = 0  # a value is expected: the root, after ':' or after ',' in an array
_VALUE_OR_CLOSE: Final = 1  # just after '[': a value or ']'
_KEY_OR_CLOSE: Final = 2  # just after '{': a key or '}'
_KEY: Final = 3  # after ',' in an object: a key
_COLON: Final = 4  # after a key
_COMMA_OR_CLOSE: Final = 5  # after a value inside an object or array
_TRAILING: Final = 6  # the root is complete: only whitespace may follow
_STRING: Final = 7  # inside a string value
_KEY_STRING: Final = 8  # inside an object key
_NUMBER: Final = 9  # inside a number
_DEAD: Final = 10  # after an error: further input is ignored
_FINISHED: Final = 11  # finish() was called

_EXPECTING: Final = {
    _VALUE: "a value",
    _VALUE_OR_CLOSE: "a value or ']'",
    _KEY_OR_CLOSE: "a key string or '}'",
    _KEY: "a key string",
    _COLON: "':' after the key",
    _TRAILING: "nothing more",
    _KEY_STRING: "the rest of an object key and its closing quote",
}
"""What each state expects next, for messages (the states whose expectation depends on more are not
here)."""

_WHITESPACE: Final = " \t\n\r"
_NUMBER_CHARS: Final = frozenset("0123456789+-.eE")
_LITERALS: Final[dict[str, tuple[str, Any]]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}

_WHITESPACE_RUN: Final = re.compile(r"[ \t\n\r]*")
_DIGIT_RUN: Final = re.compile(r"[0-9]*")
_NUMBER_TOKEN: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_decode_string: Final = msgspec.json.Decoder(str).decode
"""Decodes one JSON string (``'"' + content + '"'``) in C: the string hot path. It refuses what the
general route refuses (a lone surrogate, a control character, a bad or cut escape, a closing quote
inside), so that any refusal can go the general way, which says why and where."""

_FAST_STRINGS = True
"""Whether `JSONStreamParser.feed` decodes string chunks with `_decode_string`; the tests
turn it off to check the fast route against the general one."""


def _is_unescaped(text: str, position: int, start: int) -> bool:
    """Whether the character at ``position`` is not escaped: an even run of backslashes precedes it.

    A backslash that is not escaped begins an escape. ``text[start]`` is known to be outside any escape,
    so the count never looks before it.
    """
    run_start = position
    while run_start > start and text[run_start - 1] == "\\":
        run_start -= 1
    return not (position - run_start) & 1


def _held_back_from(text: str, start: int, end: int) -> int:
    """Where string content ``text[start:end]`` must be cut so that the decoded part is final.

    Held back: an escape cut by the end of the chunk (``\\``, ``\\u``, ``\\u12``...) and a complete high
    surrogate escape that a low surrogate escape may still follow (``\\ud83d`` then ``\\ude00`` decode to
    one character). Returns ``end`` when nothing needs holding back. An invalid escape is not held back:
    the decoder reports it.
    """
    backslash = text.rfind("\\", max(start, end - 6), end)
    if backslash < 0 or not _is_unescaped(text, backslash, start):
        return end
    tail = end - backslash
    if tail >= 2:
        if text[backslash + 1] != "u":
            return end
        hex_digits = text[backslash + 2 : end]
        if hex_digits.strip(HEX_DIGITS):
            return end
        if tail == 6:
            return backslash if is_high_surrogate(hex_digits) else end
    # An incomplete escape: if a complete high surrogate escape is right before it, hold that back too.
    high = backslash - 6
    return high if _is_high_surrogate_escape(text, high, start) else backslash


def _is_high_surrogate_escape(text: str, position: int, start: int) -> bool:
    """Whether ``text[position:position + 6]`` is an unescaped high surrogate escape (``\\ud83d``) of
    string content that starts at ``start``."""
    digits = text[position + 2 : position + 6]
    return (
        position >= start
        and text[position : position + 2] == "\\u"
        and not digits.strip(HEX_DIGITS)
        and is_high_surrogate(digits)
        and _is_unescaped(text, position, start)
    )


def _string_piece(text: str) -> tuple[str, int] | None:
    """String content that starts outside any escape, decoded by one C call up to an escape cut by its
    end: ``(decoded, where the cut is)``; None when it closes the string or holds an error (the general
    route says which)."""
    end = len(text)
    backslash = text.rfind("\\", -6)
    cut = end if backslash < 0 else _cut_at_escape(text, backslash)
    try:
        return _decode_string('"' + (text[:cut] if cut < end else text) + '"'), cut
    except (msgspec.DecodeError, UnicodeEncodeError):
        return None


def _cut_at_escape(text: str, backslash: int) -> int:
    """Where a piece with a backslash among its last six characters is cut: before an escape its end
    cuts, before a high surrogate escape a low one may follow, or at its end."""
    end = len(text)
    if backslash == end - 1:
        # A run of backslashes at the end: an odd one leaves the last escape open.
        if not (end - len(text.rstrip("\\"))) & 1:
            return end
        return end - 1 if end < 7 or text[end - 7] != "\\" else _held_back_from(text, 0, end)
    if text[backslash + 1] != "u":
        return end
    if text[backslash - 1 : backslash] == "\\" or (backslash >= 6 and text[backslash - 6] == "\\"):
        return _held_back_from(text, 0, end)  # maybe escaped, or after another escape
    digits = text[backslash + 2 :]
    if not digits.strip(HEX_DIGITS) and (len(digits) < 4 or is_high_surrogate(digits)):
        return backslash  # cut short, or a high surrogate whose low one may follow
    return end


def _remembered_piece(text: str) -> tuple[str, int] | None:
    """`_string_piece` of a piece not seen before, remembered when the piece is short."""
    decoded = _string_piece(text)
    if len(text) <= _MEMO_PIECE:
        if len(_decoded_pieces) >= _MEMO_SIZE:
            _decoded_pieces.clear()
        _decoded_pieces[text] = decoded
    return decoded


_MEMO_PIECE: Final = 16
_MEMO_SIZE: Final = 4096
_NOT_KNOWN: Final = ("", -1)
_decoded_pieces: dict[str, tuple[str, int] | None] = {}
"""`_string_piece` of pieces of at most ``_MEMO_PIECE`` characters, remembered (up to ``_MEMO_SIZE``
of them, then forgotten all at once): the pieces of strings streamed a token at a time repeat (an escaped
quote or newline and what is next to it), and a lookup is much cheaper than a decode
(``benchmarks/bench_arguments_parser.py`` measures the parser)."""


class _Discarded(TextJoiner):
    """The joiner of a string value that is streamed but not kept: it keeps nothing."""

    __slots__ = ()

    def append(self, piece: str) -> None:
        del piece


_DISCARDED: Final = _Discarded()


class JSONStreamParser:
    """Parses one JSON text fed in pieces; sans-IO: ``feed(text)`` and ``finish()`` return events.

    Reported:

    - ``ArgumentDelta(path, text)``: decoded text of every string value, at any depth, as it streams
      (at most one delta per string per ``feed``; never empty). Keys are not streamed.
    - ``ArgumentValue((key,), value)``: a member of a root object, as soon as its value is complete (a
      number when the character after it arrives). With ``report_depth=n``, also every value at most ``n``
      levels deep (object members and array elements, ``(key, 0, "name")``) as it completes, inner ones
      first (structured output uses this for its "field complete" signal).
    - ``ArgumentValue((), root)``: the root value, as soon as it is complete (a root number at the
      whitespace after it or at ``finish()``). Input that is empty or only whitespace gives ``{}`` at
      ``finish()``, as providers send ``""`` for a call without arguments.
    - ``ArgumentError(kind, message, offset)``: ``invalid_json`` at the first character that cannot
      continue a JSON text (or that opens a container deeper than ``max_depth``), ``truncated`` at
      ``finish()`` when the root is incomplete, ``too_large`` when more than ``max_size`` characters
      arrive. After an error nothing more is reported.

    Values are exactly what ``json.loads`` gives (duplicate keys: the last wins), restricted to I-JSON
    (RFC 7493), so that every value encodes back to JSON and UTF-8: NaN, Infinity and unescaped control
    characters are rejected, and so are (``invalid_json``) a lone surrogate in a string or key (a high
    surrogate escape ``\\ud800``-``\\udbff`` not followed by a low one ``\\udc00``-``\\udfff``, a
    low one alone, or a surrogate code point in the text itself), at the offset of its backslash or
    character, and a number whose magnitude overflows a double (``1e999``, ``-1e999``, an integer
    past about 1.8e308; ``1e-999`` underflows to 0.0 and is accepted), at the offset of its first
    character. Offsets count characters of all text fed.

    With ``keep_values=False`` values are streamed but never built, so memory stays flat however long
    the arguments are: string values give their ``ArgumentDelta``s, and the only ``ArgumentValue`` is
    ``ArgumentValue((), None)`` when the root is complete. Errors are the same.

    Args:
        max_size: cap, in characters, of the text fed (``too_large`` beyond it).
        max_depth: deepest nesting of containers accepted (``invalid_json`` beyond it).
        report_depth: also report every completed value at most this deep; ``None``: root members only.
        keep_values: build the values; False streams them without building them.
    """

    __slots__ = (
        "_base",
        "_carry",
        "_consumed",
        "_keep_values",
        "_max_depth",
        "_max_size",
        "_number_parts",
        "_number_start",
        "_number_state",
        "_parts",
        "_path",
        "_report_depth",
        "_stack",
        "_state",
        "_string_path",
    )

    def __init__(
        self,
        max_size: int = DEFAULT_MAX_SIZE,
        *,
        max_depth: int = MAX_DEPTH,
        report_depth: int | None = None,
        keep_values: bool = True,
    ) -> None:
        self._max_size = max_size
        self._keep_values = keep_values
        self._max_depth = max_depth
        self._report_depth = report_depth or 0
        """Values completed at most this deep are reported as they complete (0: the root object's members
        only)."""
        self._state = _VALUE
        self._consumed = 0
        """Characters fed so far."""
        self._base = 0
        """Offset of the first character of the text being parsed (the carry included)."""
        self._carry = ""
        """The start of an escape or literal cut by the end of the last chunk; re-read with the next."""
        self._stack: list[_Container] = []
        self._path: list[str | int] = []
        """Per open container: the current key (object) or the index of the next element (array)."""
        self._parts = TextJoiner()
        """Decoded pieces of the string being read."""
        self._string_path: JSONPath = ()
        self._number_parts: list[str] = []
        self._number_state = N_MINUS
        self._number_start = 0

    def feed(self, text: str) -> list[ArgumentEvent]:
        """Parse the next piece of the arguments text; return what it streamed or completed.

        Raises:
            RuntimeError: called after `finish`.
        """
        state = self._state
        if state >= _DEAD:
            if state == _FINISHED:
                raise RuntimeError("JSONStreamParser.feed() called after finish()")
            return []
        start = self._consumed
        consumed = start + len(text)
        if consumed > self._max_size:
            return self._feed_past_limit(text)
        self._consumed = consumed
        carry = self._carry
        if carry:
            self._carry = ""
            text = carry + text
            start -= len(carry)
        if state == _STRING:
            # The hot path of long string values: the chunk decoded by one C call, up to an escape cut
            # by its end (held back for the next feed); the general route when it closes the string or
            # holds an error.
            if '"' not in text and "\\" not in text and text.isprintable():
                piece = text  # nothing to decode (checked in C, much cheaper than a decoder call)
            else:
                decoded = _decoded_pieces.get(text, _NOT_KNOWN) if _FAST_STRINGS else None
                if decoded is _NOT_KNOWN:
                    decoded = _remembered_piece(text)
                if decoded is None:  # a closing quote, or an error
                    self._base = start
                    return self._feed_string(text, [])
                piece, cut = decoded
                if cut < len(text):
                    self._carry = text[cut:]
            if not piece:
                return []
            self._parts.append(piece)  # _take_piece, inline: this runs once per delta of a long string
            return [ArgumentDelta(self._string_path, piece)]
        events: list[ArgumentEvent] = []
        self._base = start
        self._parse(text, 0, events)
        return events

    def _feed_string(self, text: str, events: list[ArgumentEvent]) -> list[ArgumentEvent]:
        """A chunk that starts inside a string value (outside any escape), the general way: the string
        may close in it, and its errors are reported at their offset."""
        end = len(text)
        cut = end
        if "\\" in text:
            backslash = text.rfind("\\", -6)
            if backslash >= 0 and (backslash == end - 1 or text[backslash + 1] == "u"):
                cut = _held_back_from(text, 0, end)
        try:
            piece, after = _scanstring((text[:cut] if cut < end else text) + '"', 0, True)
        except JSONDecodeError:
            self._string_error(text, 0, cut, events)
            return events
        if not piece.isascii() and _SURROGATE.search(piece) is not None:
            self._surrogate_error(text, 0, after - 1, events)
            return events
        if after <= cut:
            self._close_string(piece, events)
            self._parse(text, after, events)
            return events
        if cut < end:
            self._carry = text[cut:]
        if piece:
            self._take_piece(piece, events)
        return events

    def _feed_past_limit(self, text: str) -> list[ArgumentEvent]:
        """Parse the characters up to the size limit, then report ``too_large``."""
        limit = self._max_size
        allowed = max(limit - self._consumed, 0)
        events = self.feed(text[:allowed])
        self._consumed += len(text) - allowed
        if self._state != _DEAD:
            message = f"the arguments are longer than the limit of {limit} characters"
            self._fail(events, "too_large", message, limit)
        return events

    def finish(self) -> list[ArgumentEvent]:
        """The text has ended: report the root if it completes here, else why it is incomplete."""
        state = self._state
        events: list[ArgumentEvent] = []
        if state in (_DEAD, _TRAILING, _FINISHED):
            pass
        elif state == _VALUE and not self._stack and not self._carry:
            events.append(ArgumentValue((), {} if self._keep_values else None))
        elif state == _NUMBER and not self._stack and self._number_state in N_COMPLETE:
            self._complete_number(events)
        else:
            offset = self._consumed
            message = f"the arguments end at offset {offset} where {self._expectation()} was expected"
            self._fail(events, "truncated", message, offset)
        self._state = _FINISHED
        return events

    # The main loop: structure, whitespace, numbers and literals.

    def _parse(self, text: str, position: int, events: list[ArgumentEvent]) -> None:
        end = len(text)
        while position < end:
            state = self._state
            if state in (_STRING, _KEY_STRING):
                position = self._read_string(text, position, events)
            elif state == _NUMBER:
                position = self._read_number(text, position, events)
            elif text[position] in _WHITESPACE:
                position += 1
                if position < end and text[position] in _WHITESPACE:
                    match = _WHITESPACE_RUN.match(text, position)
                    assert match is not None
                    position = match.end()
            elif state in (_VALUE, _VALUE_OR_CLOSE):
                position = self._start_value(text, position, events)
            else:
                position = self._punctuation(state, text, position, events)

    def _punctuation(self, state: int, text: str, position: int, events: list[ArgumentEvent]) -> int:
        """Read the ``,``, ``:``, key quote or closing bracket expected in ``state``; where to go on (the
        end of ``text`` after an error)."""
        char = text[position]
        if state == _COMMA_OR_CLOSE:
            is_object = type(self._stack[-1]) is dict
            if char == ",":
                self._state = _KEY if is_object else _VALUE
            elif char == ("}" if is_object else "]"):
                self._close_container(events)
            else:
                return self._fail_at(events, text, position)
        elif state == _COLON:
            if char != ":":
                return self._fail_at(events, text, position)
            self._state = _VALUE
        elif state in (_KEY, _KEY_OR_CLOSE):
            if char == '"':
                self._parts = TextJoiner()
                self._state = _KEY_STRING
            elif char == "}" and state == _KEY_OR_CLOSE:
                self._close_container(events)
            else:
                return self._fail_at(events, text, position)
        elif state == _TRAILING:
            return self._fail_at(events, text, position)
        else:  # _DEAD
            return len(text)
        return position + 1

    def _start_value(self, text: str, position: int, events: list[ArgumentEvent]) -> int:
        char = text[position]
        if char == '"':
            self._string_path = tuple(self._path)
            self._parts = TextJoiner() if self._keep_values else _DISCARDED
            self._state = _STRING
            return position + 1
        if char == "{" or char == "[":
            if len(self._stack) >= self._max_depth:
                offset = self._base + position
                message = f"invalid JSON at offset {offset}: nesting deeper than {self._max_depth} levels"
                self._fail(events, "invalid_json", message, offset)
                return len(text)
            if char == "{":
                self._stack.append({})
                self._path.append("")
                self._state = _KEY_OR_CLOSE
            else:
                self._stack.append([])
                self._path.append(0)
                self._state = _VALUE_OR_CLOSE
            return position + 1
        if char in "-0123456789":
            return self._start_number(text, position, events)
        literal = _LITERALS.get(char)
        if literal is not None:
            word, value = literal
            if text.startswith(word, position):
                self._complete(value, events)
                return position + len(word)
            end = len(text)
            for index in range(1, len(word)):
                if position + index == end:
                    self._carry = text[position:]
                    return end
                if text[position + index] != word[index]:
                    offset = self._base + position + index
                    found = describe(text[position + index])
                    message = f"invalid JSON at offset {offset}: expected {word!r}, found {found}"
                    self._fail(events, "invalid_json", message, offset)
                    return end
        if char == "]" and self._state == _VALUE_OR_CLOSE:
            self._close_container(events)
            return position + 1
        self._fail_at(events, text, position)
        return len(text)

    def _start_number(self, text: str, position: int, events: list[ArgumentEvent]) -> int:
        match = _NUMBER_TOKEN.match(text, position)
        if match is not None:
            number_end = match.end()
            if number_end < len(text) and text[number_end] not in _NUMBER_CHARS:
                if not self._ends_number(text[number_end]):
                    if not self._overflows(events, match.group(), self._base + position):
                        self._fail_after_value(events, text, number_end)
                    return len(text)
                self._complete_number(events, match.group(), self._base + position)
                return number_end
        self._state = _NUMBER
        self._number_state = N_MINUS if text[position] == "-" else N_ZERO if text[position] == "0" else N_INT
        self._number_parts = [text[position]]
        self._number_start = self._base + position
        return position + 1

    def _read_number(self, text: str, position: int, events: list[ArgumentEvent]) -> int:
        end = len(text)
        state = self._number_state
        start = position
        while position < end:
            if state in (N_INT, N_FRAC, N_EXP):
                match = _DIGIT_RUN.match(text, position)
                assert match is not None
                position = match.end()
                if position == end:
                    break
            following = NUMBER_STEPS[state].get(text[position], -1)
            if following < 0:
                break
            state = following
            position += 1
        self._number_state = state
        if position > start:
            self._number_parts.append(text[start:position])
        if position == end:
            return end
        char = text[position]
        if state not in N_COMPLETE:
            offset = self._base + position
            found = describe(char)
            message = f"invalid JSON at offset {offset}: expected {N_EXPECTING[state]}, found {found}"
            self._fail(events, "invalid_json", message, offset)
            return end
        if not self._ends_number(char):
            if not self._overflows(events, "".join(self._number_parts), self._number_start):
                self._fail_after_value(events, text, position)
            return end
        self._complete_number(events)
        return position

    def _ends_number(self, char: str) -> bool:
        """Whether ``char`` may follow a complete number here (so the number is complete)."""
        if char in _WHITESPACE:
            return True
        if not self._stack:
            return False
        return char == "," or char == ("}" if type(self._stack[-1]) is dict else "]")

    def _overflows(self, events: list[ArgumentEvent], token: str, offset: int) -> bool:
        """Report the complete number ``token`` at ``offset`` if it is not accepted (before what follows
        it, which may be wrong too); whether it was."""
        message = overflow_message(token)
        if message is None:
            return False
        self._fail(events, "invalid_json", f"invalid JSON at offset {offset}: {message}", offset)
        return True

    def _complete_number(self, events: list[ArgumentEvent], token: str = "", offset: int = 0) -> None:
        """Complete the number ``token`` starting at ``offset`` (by default: the one read in pieces)."""
        if not token:
            token, offset = "".join(self._number_parts), self._number_start
            self._number_parts = []
        try:
            value = number_value(token)
        except ValueError as exc:  # an integer longer than sys.get_int_max_str_digits()
            self._fail(events, "invalid_json", f"invalid JSON at offset {offset}: {exc}", offset)
            return
        self._complete(value, events)

    # Strings.

    def _read_string(self, text: str, position: int, events: list[ArgumentEvent]) -> int:
        """Read string content from ``position`` (outside any escape) to the closing quote or the end.

        This is the hot path of long values: a few C-speed calls per chunk, whatever its length.
        """
        quote = text.find('"', position)
        while quote >= 0 and not _is_unescaped(text, quote, position):
            quote = text.find('"', quote + 1)
        if quote >= 0:
            return self._read_to_quote(text, position, quote, events)
        end = len(text)
        backslash = text.rfind("\\", max(position, end - 6))
        if backslash >= 0 and (backslash == end - 1 or text[backslash + 1] == "u"):
            cut = _held_back_from(text, position, end)
            if cut < end:
                self._carry = text[cut:]
                if cut == position:
                    return end
        else:
            cut = end
        try:
            piece = _scanstring(text[position:cut] + '"' if position or cut < end else text + '"', 0, True)[0]
        except JSONDecodeError:
            self._string_error(text, position, cut, events)
            return end
        if not piece.isascii() and _SURROGATE.search(piece) is not None:
            self._surrogate_error(text, position, cut, events)
            return end
        if piece:
            self._take_piece(piece, events)
        return end

    def _read_to_quote(self, text: str, position: int, quote: int, events: list[ArgumentEvent]) -> int:
        """Read string content from ``position`` to its closing quote at ``quote``; where reading goes on."""
        try:
            piece, after = _scanstring(text, position, True)
        except JSONDecodeError:
            self._string_error(text, position, quote, events)
            return len(text)
        if not piece.isascii() and _SURROGATE.search(piece) is not None:
            self._surrogate_error(text, position, after - 1, events)
            return len(text)
        self._close_string(piece, events)
        return after

    def _take_piece(self, piece: str, events: list[ArgumentEvent]) -> None:
        """Keep a decoded piece of the string being read, streamed when it is part of a value (not a key)."""
        self._parts.append(piece)
        if self._state == _STRING:
            events.append(ArgumentDelta(self._string_path, piece))

    def _close_string(self, piece: str, events: list[ArgumentEvent]) -> None:
        parts = self._parts
        if parts:
            if piece:
                parts.append(piece)
            value = parts.take()
        else:
            value = piece
        if self._state == _KEY_STRING:
            self._path[-1] = value
            self._state = _COLON
            return
        if piece:
            events.append(ArgumentDelta(self._string_path, piece))
        self._complete(value, events)

    def _string_error(self, text: str, position: int, end: int, events: list[ArgumentEvent]) -> None:
        """Report the first bad escape or control character in ``text[position:end]``, after streaming
        the valid text before it."""
        bad_start, bad_at, reason = first_string_error(text, position, end)
        if bad_start > position:
            piece = _scanstring(text[position:bad_start] + '"', 0, True)[0]
            if _SURROGATE.search(piece) is not None:  # an earlier error
                self._surrogate_error(text, position, bad_start, events)
                return
            if piece and self._state == _STRING:
                events.append(ArgumentDelta(self._string_path, piece))
        offset = self._base + bad_at
        self._fail(events, "invalid_json", f"invalid JSON at offset {offset}: {reason}", offset)

    def _surrogate_error(self, text: str, position: int, end: int, events: list[ArgumentEvent]) -> None:
        """Report the first lone surrogate in string content ``text[position:end]``, after streaming the
        valid text before it."""
        bad_at, reason = first_surrogate_error(text, position, end)
        if bad_at > position and self._state == _STRING:
            piece = _scanstring(text[position:bad_at] + '"', 0, True)[0]
            if piece:
                events.append(ArgumentDelta(self._string_path, piece))
        offset = self._base + bad_at
        self._fail(events, "invalid_json", f"invalid JSON at offset {offset}: {reason}", offset)

    # Containers and completed values.

    def _close_container(self, events: list[ArgumentEvent]) -> None:
        container = self._stack.pop()
        self._path.pop()
        self._complete(container, events)

    def _complete(self, value: Any, events: list[ArgumentEvent]) -> None:
        """A value is complete: attach it to its container (reporting a root member) or report the root."""
        stack = self._stack
        if not stack:
            events.append(ArgumentValue((), value if self._keep_values else None))
            self._state = _TRAILING
            return
        container = stack[-1]
        if not self._keep_values:  # the containers stay empty: only the position in an array moves
            if type(container) is list:
                index = self._path[-1]
                assert isinstance(index, int)
                self._path[-1] = index + 1
        elif type(container) is dict:
            key = self._path[-1]
            assert isinstance(key, str)
            container[key] = value
            if len(stack) == 1:
                events.append(ArgumentValue((key,), value))
            elif len(stack) <= self._report_depth:
                events.append(ArgumentValue(tuple(self._path), value))
        else:
            assert isinstance(container, list)
            if len(stack) <= self._report_depth:
                events.append(ArgumentValue(tuple(self._path), value))
            container.append(value)
            self._path[-1] = len(container)
        self._state = _COMMA_OR_CLOSE

    # Errors.

    def _expectation(self) -> str:
        """What the parser expects next, for messages."""
        state = self._state
        if self._carry:
            if state in (_STRING, _KEY_STRING):
                return "the rest of the escape sequence"
            word = _LITERALS[self._carry[0]][0]
            return f"the rest of {word!r}"
        if state == _STRING:
            return f"the rest of the string at path {self._string_path!r} and its closing quote"
        if state == _NUMBER and self._number_state not in N_COMPLETE:
            return N_EXPECTING[self._number_state]
        if state == _NUMBER:
            return f"more of the number, ',' or {self._closer()}"
        if state == _COMMA_OR_CLOSE:
            return f"',' or {self._closer()}"
        return _EXPECTING.get(state, "nothing")

    def _closer(self) -> str:
        """The character that closes the innermost container, quoted for messages."""
        return "'}'" if type(self._stack[-1]) is dict else "']'"

    def _fail_at(self, events: list[ArgumentEvent], text: str, position: int) -> int:
        """Report the character at ``position`` as unexpected in the current state; the end of ``text``."""
        offset = self._base + position
        found = describe(text[position])
        if self._state == _TRAILING:
            message = f"invalid JSON at offset {offset}: unexpected data after the arguments: {found}"
        else:
            message = f"invalid JSON at offset {offset}: expected {self._expectation()}, found {found}"
        self._fail(events, "invalid_json", message, offset)
        return len(text)

    def _fail_after_value(self, events: list[ArgumentEvent], text: str, position: int) -> None:
        """Report the character at ``position``, which follows a complete number, as unexpected."""
        offset = self._base + position
        found = describe(text[position])
        if self._stack:
            expected = f"',' or {self._closer()} after the number"
        else:
            expected = "the end of the arguments after the number"
        message = f"invalid JSON at offset {offset}: expected {expected}, found {found}"
        self._fail(events, "invalid_json", message, offset)

    def _fail(self, events: list[ArgumentEvent], kind: ArgumentErrorKind, message: str, offset: int) -> None:
        events.append(ArgumentError(kind, message, offset))
        self._state = _DEAD
        self._carry = ""
        self._stack = []
        self._path = []
        self._parts = TextJoiner()
        self._number_parts = []
