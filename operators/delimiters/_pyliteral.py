"""Python literals to JSON text as they stream: the arguments of pythonic tool calls.

`PythonArguments` writes the keyword arguments of one call, ``f(city='Paris', days=[1, 2])``, as
the JSON object ``{"city": "Paris", "days": [1, 2]}``: the key as soon as its ``=`` comes, a string
character by character (Python escapes decoded, JSON escapes written), containers as their brackets
come. Nothing is parsed twice: a number or a word (``True``, ``None``) is held until the character after
it, at most `TOKEN_LIMIT` characters, and an escape split across chunks is held until it is whole.

Accepted: strings in either quote (no prefixes, no triple quotes), integers and floats (``_`` separators,
leading zeros, a sign), ``True`` / ``False`` / ``None`` and their JSON spellings, lists, tuples (written
as arrays) and dicts with string or number keys, nested. Anything else (a set, a name, an expression)
stops the value as malformed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from operators.delimiters._scan import json_escape, space_end

__all__ = [
    "DONE",
    "MALFORMED",
    "NEEDS_MORE",
    "TOKEN_LIMIT",
    "PythonArguments",
    "PythonLiteral",
    "json_number",
]

TOKEN_LIMIT: Final = 256
"""Longest number or word held before the value counts as malformed."""

_STOPS: Final = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}
_NUMBER_CHARS: Final = re.compile(r"[0-9_.eE+\-]*")
_WORD_CHARS: Final = re.compile(r"\w*")
_NUMBER: Final = re.compile(r"([+-]?)(\d[\d_]*)?(?:\.([\d_]*))?(?:[eE]([+-]?\d+))?")
_WORDS: Final = {
    "True": "true",
    "False": "false",
    "None": "null",
    "true": "true",
    "false": "false",
    "null": "null",
}
_SIMPLE_ESCAPES: Final = {
    "\n": "",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_OCTAL: Final = frozenset("01234567")
_OCTAL_DIGITS: Final = re.compile("[0-7]{1,3}")
_CLOSERS: Final = {"[": "]", "(": ")", "{": "}"}

# What the literal expects next.
_VALUE: Final = 0
_AFTER: Final = 1
_KEY: Final = 2
_COLON: Final = 3
_STRING: Final = 4
_NUMBER_TOKEN: Final = 5
_WORD_TOKEN: Final = 6

NEEDS_MORE: Final = 0
"""A converter's ``status`` while its value goes on."""
DONE: Final = 1
"""A converter's ``status`` once its value ended."""
MALFORMED: Final = 2
"""A converter's ``status`` once it met what cannot be part of its value."""


def _escape(buf: str, index: int, final: bool) -> tuple[int, str | None]:
    """The Python escape at ``buf[index]`` (a backslash): ``(end, text)``; text None while the escape
    may still grow (the chunk ended inside it). An unknown escape is kept as written, as Python does."""
    size = len(buf)
    if index + 1 >= size:
        return (size, "\\") if final else (index, None)
    char = buf[index + 1]
    simple = _SIMPLE_ESCAPES.get(char)
    if simple is not None:
        return index + 2, simple
    width = _HEX_ESCAPES.get(char)
    if width is not None:
        return _hex_escape(buf, index, width, final)
    if char in _OCTAL:
        return _octal_escape(buf, index, final)
    return index + 2, buf[index : index + 2]


def _octal_escape(buf: str, index: int, final: bool) -> tuple[int, str | None]:
    """`_escape` of a backslash and one to three octal digits."""
    digits = _OCTAL_DIGITS.match(buf, index + 1)
    assert digits is not None  # the character after the backslash is an octal digit
    end = digits.end()
    if end == len(buf) and end < index + 4 and not final:
        return index, None
    return end, chr(int(digits[0], 8))


def _hex_escape(buf: str, index: int, width: int, final: bool) -> tuple[int, str | None]:
    """`_escape` of ``\\x``, ``\\u`` or ``\\U`` and its ``width`` hex digits."""
    digits = buf[index + 2 : index + 2 + width]
    if not all(digit in _HEX for digit in digits):
        return index + 2, buf[index : index + 2]
    if len(digits) < width:
        return (index, None) if not final else (index + 2, buf[index : index + 2])
    code = int(digits, 16)
    end = index + 2 + width
    return end, chr(code) if code < 0x110000 else buf[index:end]


def json_number(token: str) -> str | None:
    """The JSON text of a Python number ``token``, None when it is not one."""
    match = _NUMBER.fullmatch(token)
    if match is None:
        return None
    sign, whole, fraction, exponent = match.groups()
    if whole is None and not fraction:
        return None
    whole = (whole or "0").replace("_", "").lstrip("0") or "0"
    text = sign.removeprefix("+") + whole  # JSON writes no plus sign
    if fraction is not None:
        text += "." + (fraction.replace("_", "") or "0")
    if exponent is not None:
        text += "e" + exponent
    return text


class PythonLiteral:
    """Converts one Python literal to JSON text as it streams (see the module doc).

    `feed` takes ``buf[pos:]`` as far as the literal goes and returns where it stopped; ``status``
    is then `DONE` (the literal ended just before that position), `MALFORMED` (what is
    there is not part of a literal) or `NEEDS_MORE`. Text it returns without consuming is the start
    of an escape, to be given again with what follows.
    """

    __slots__ = ("_comma", "_emit", "_expect", "_key", "_quote", "_stack", "_token", "_token_size", "status")

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._stack: list[str] = []
        """The closing bracket of each open container."""
        self._expect = _VALUE
        self._comma = False
        self._quote = ""
        self._key = False
        """The string or number being read is a dict key."""
        self._token: list[str] = []
        self._token_size = 0
        self.status = NEEDS_MORE

    def feed(self, buf: str, pos: int, final: bool) -> int:
        """Take the literal's next characters from ``buf[pos:]`` (``final``: nothing follows)."""
        size = len(buf)
        while pos < size and self.status == NEEDS_MORE:
            expect = self._expect
            if expect == _STRING:
                resume = self._string(buf, pos, final)
                if resume == pos:
                    return pos  # (an escape split across chunks)
                pos = resume
            elif expect >= _NUMBER_TOKEN:
                pos = self._token_chars(buf, pos, final)
            else:
                index = space_end(buf, pos)
                if index == size:
                    return size
                pos = self._structure(buf, index)
        if final and self._expect >= _NUMBER_TOKEN and self.status == NEEDS_MORE:
            self._end_token()
        return pos

    def string_piece(self, text: str) -> str | None:
        """The JSON text of ``text`` when all of it is the next piece of the string being read (no quote,
        no backslash: nothing changes), else None. What the lexer's shortcut streams without lexing."""
        if self._expect != _STRING or self._quote in text or "\\" in text:
            return None
        return json_escape(text)

    def cut(self) -> None:
        """The literal ends unfinished (the input ended, or it is malformed): emit a number or word held
        so far as it is, so that nothing read is lost."""
        if self._expect >= _NUMBER_TOKEN and self._token:
            self._emit("".join(self._token))
            self._token.clear()

    # --- structure --------------------------------------------------------------------------------------

    def _structure(self, buf: str, index: int) -> int:
        """The character at ``index`` (not whitespace) where a value, a key, ``:`` or what follows a
        value is expected."""
        char = buf[index]
        expect = self._expect
        if expect == _AFTER:
            return self._after(char, index)
        if expect == _COLON:
            if char != ":":
                return self._malformed(index)
            self._emit(": ")
            self._expect = _VALUE
            return index + 1
        stack = self._stack
        if stack and char == stack[-1]:  # right after the opening bracket, or after a trailing comma
            self._comma = False
            return self._close(index)
        if self._comma:
            self._comma = False
            self._emit(", ")
        if expect == _KEY:
            return self._start_key(char, index)
        return self._start_value(char, index)

    def _start_value(self, char: str, index: int) -> int:
        if char in _CLOSERS:
            self._emit("{" if char == "{" else "[")
            self._stack.append(_CLOSERS[char])
            self._expect = _KEY if char == "{" else _VALUE
            return index + 1
        return self._start_scalar(char, index, key=False)

    def _start_key(self, char: str, index: int) -> int:
        if char in "'\"" or char in "+-.0123456789":
            return self._start_scalar(char, index, key=True)
        return self._malformed(index)

    def _start_scalar(self, char: str, index: int, *, key: bool) -> int:
        self._key = key
        if char in "'\"":
            self._quote = char
            self._expect = _STRING
            self._emit('"')
            return index + 1
        self._token.clear()
        self._token_size = 0
        if char in "+-.0123456789":
            self._expect = _NUMBER_TOKEN
        elif char.isalpha() and not key:
            self._expect = _WORD_TOKEN
        else:
            return self._malformed(index)
        return index

    def _after(self, char: str, index: int) -> int:
        """What follows a complete value: ``,`` or the container's closing bracket."""
        stack = self._stack
        if not stack:
            self.status = DONE
            return index
        if char == ",":
            self._comma = True  # (written when a value follows: a trailing comma is not JSON)
            self._expect = _KEY if stack[-1] == "}" else _VALUE
            return index + 1
        if char == stack[-1]:
            return self._close(index)
        return self._malformed(index)

    def _close(self, index: int) -> int:
        closer = self._stack.pop()
        self._emit("}" if closer == "}" else "]")
        self._value_done()
        return index + 1

    def _value_done(self) -> None:
        if self._key:
            self._key = False
            self._expect = _COLON
        else:
            self._expect = _AFTER
            if not self._stack:
                self.status = DONE

    def _malformed(self, index: int) -> int:
        self.status = MALFORMED
        return index

    # --- scalars ----------------------------------------------------------------------------------------

    def _string(self, buf: str, pos: int, final: bool) -> int:
        """The next characters of a string, up to its closing quote."""
        stops = _STOPS[self._quote]
        size = len(buf)
        index = pos
        while index < size:
            hit = stops.search(buf, index)
            stop = size if hit is None else hit.start()
            if stop > index:
                self._emit(json_escape(buf[index:stop]))
            if hit is None:
                return size
            if buf[stop] != "\\":
                self._emit('"')
                self._value_done()
                return stop + 1
            end, text = _escape(buf, stop, final)
            if text is None:
                return stop
            if text:
                self._emit(json_escape(text))
            index = end
        return index

    def _token_chars(self, buf: str, pos: int, final: bool) -> int:
        """The next characters of a number or a word, up to the first that cannot be part of it."""
        pattern = _NUMBER_CHARS if self._expect == _NUMBER_TOKEN else _WORD_CHARS
        end = pattern.match(buf, pos).end()  # type: ignore[union-attr]
        if end > pos:
            self._token.append(buf[pos:end])
            self._token_size += end - pos
            if self._token_size > TOKEN_LIMIT:
                return self._malformed(end)
        if end < len(buf):
            self._end_token()
        return end

    def _end_token(self) -> None:
        token = "".join(self._token)
        self._token.clear()
        self._token_size = 0
        if self._expect == _NUMBER_TOKEN:
            text = json_number(token)
            if text is not None and self._key:
                text = '"' + text + '"'
        else:
            text = _WORDS.get(token)
        if text is None:
            self.status = MALFORMED
            self._token.append(token)
            return
        self._emit(text)
        self._value_done()


class PythonArguments:
    """Writes one call's keyword arguments as a JSON object: ``key(name)`` emits ``{"name": `` (or
    ``, "name": ``), `value` converts the value that follows (`PythonLiteral`), ``close()``
    emits ``}`` (``{}`` without arguments)."""

    __slots__ = ("_emit", "count", "value")

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self.count = 0
        """Arguments begun so far."""
        self.value = PythonLiteral(emit)

    def key(self, name: str) -> PythonLiteral:
        """Start argument ``name``: emit its key; the literal that reads its value."""
        self._emit(("{" if self.count == 0 else ", ") + '"' + json_escape(name) + '": ')
        self.count += 1
        self.value = PythonLiteral(self._emit)
        return self.value

    def close(self) -> None:
        """All arguments are done: close the object."""
        self._emit("}" if self.count else "{}")
