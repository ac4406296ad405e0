"""Token rules of `operators.arguments._jsonstream`: the JSON number grammar and its values, and the
first error in a string's content (the helpers of an error run once per call, at its first error)."""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "HEX_DIGITS",
    "NUMBER_STEPS",
    "N_COMPLETE",
    "N_DOT",
    "N_E",
    "N_EXP",
    "N_EXPECTING",
    "N_E_SIGN",
    "N_FRAC",
    "N_INT",
    "N_MINUS",
    "N_ZERO",
    "describe",
    "first_string_error",
    "first_surrogate_error",
    "is_high_surrogate",
    "number_value",
    "overflow_message",
]

# Number states (the JSON number grammar as a DFA).
N_MINUS: Final = 0  # after '-'
N_ZERO: Final = 1  # integer part '0'
N_INT: Final = 2  # integer digits
N_DOT: Final = 3  # after '.'
N_FRAC: Final = 4  # fraction digits
N_E: Final = 5  # after 'e' or 'E'
N_E_SIGN: Final = 6  # after the exponent's sign
N_EXP: Final = 7  # exponent digits
N_COMPLETE: Final = frozenset({N_ZERO, N_INT, N_FRAC, N_EXP})
N_EXPECTING: Final = {
    N_MINUS: "a digit after '-'",
    N_DOT: "a digit after the decimal point",
    N_E: "a digit or sign in the exponent",
    N_E_SIGN: "a digit in the exponent",
}

_DIGITS: Final = "0123456789"
_EXPONENT: Final = {"e": N_E, "E": N_E}
NUMBER_STEPS: Final[tuple[dict[str, int], ...]] = (
    {"0": N_ZERO, **dict.fromkeys(_DIGITS[1:], N_INT)},  # N_MINUS
    {".": N_DOT, **_EXPONENT},  # N_ZERO
    {**dict.fromkeys(_DIGITS, N_INT), ".": N_DOT, **_EXPONENT},  # N_INT
    dict.fromkeys(_DIGITS, N_FRAC),  # N_DOT
    {**dict.fromkeys(_DIGITS, N_FRAC), **_EXPONENT},  # N_FRAC
    {**dict.fromkeys(_DIGITS, N_EXP), "+": N_E_SIGN, "-": N_E_SIGN},  # N_E
    dict.fromkeys(_DIGITS, N_EXP),  # N_E_SIGN
    dict.fromkeys(_DIGITS, N_EXP),  # N_EXP
)
"""The number DFA, by state: each character that continues the number -> the state after it."""

LARGEST_INTEGER_DIGITS: Final = 308
"""Integers with more digits than this may overflow a double (checked then)."""

HEX_DIGITS: Final = "0123456789abcdefABCDEF"
_SIMPLE_ESCAPES: Final = frozenset('"\\/bfnrt')
_SURROGATE_OR_ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)|[\ud800-\udfff]", re.DOTALL)
_LOW_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def describe(char: str) -> str:
    return repr(char) if char.isprintable() else f"{char!r} (U+{ord(char):04X})"


def is_high_surrogate(hex_digits: str) -> bool:
    return hex_digits[0] in "dD" and hex_digits[1] in "89abAB"


def first_string_error(text: str, start: int, end: int) -> tuple[int, int, str]:
    """The first error in string content ``text[start:end]``: (start of the bad escape or character,
    offset of the offending character, message)."""
    position = start
    while position < end:
        char = text[position]
        if char == "\\":
            escape = text[position + 1] if position + 1 < len(text) else ""
            if escape == "u":
                for digit_at in range(position + 2, min(position + 6, len(text))):
                    if text[digit_at] not in HEX_DIGITS:
                        found = describe(text[digit_at])
                        return position, digit_at, f"expected 4 hex digits after '\\u', found {found}"
                position += 6
            elif escape in _SIMPLE_ESCAPES:
                position += 2
            else:
                return position, position + 1, f"invalid escape '\\{escape}' in a string"
        elif char < " ":
            return position, position, f"unescaped control character {describe(char)} in a string"
        else:
            position += 1
    raise AssertionError(f"no error in string content {text[start:end]!r}")  # pragma: no cover


def first_surrogate_error(text: str, start: int, end: int) -> tuple[int, str]:
    """The first lone surrogate in string content ``text[start:end]`` (I-JSON, RFC 7493, has none):
    (offset of its escape or character, message)."""
    position = start
    while True:
        match = _SURROGATE_OR_ESCAPE.search(text, position, end)
        if match is None:
            raise AssertionError(f"no lone surrogate in {text[start:end]!r}")  # pragma: no cover
        found = match.start()
        position = match.end()
        if text[found] != "\\":
            return found, f"lone surrogate {describe(text[found])} in a string"
        digits = match.group(1)
        if digits is None or not "d800" <= digits.lower() <= "dfff":
            continue
        escape = text[found:position]
        if digits.lower() >= "dc00":
            return found, f"low surrogate escape '{escape}' without a high surrogate escape before it"
        low = _LOW_SURROGATE_ESCAPE.match(text, position, end)
        if low is None:
            return found, f"high surrogate escape '{escape}' not followed by a low surrogate escape"
        position = low.end()


def number_value(token: str) -> int | float:
    """Exactly what ``json.loads`` gives: an int without fraction or exponent, else a float; ValueError
    when its magnitude overflows a double (``1e999``: ``json.loads`` gives ``inf``, I-JSON forbids it)."""
    if "." in token or "e" in token or "E" in token:
        value = float(token)
        if value - value != 0.0:  # inf - inf is nan
            raise ValueError(f"the number {_shorten(token)} overflows a double")
        return value
    number = int(token)
    if len(token) > LARGEST_INTEGER_DIGITS:
        try:
            float(number)
        except OverflowError:
            raise ValueError(f"the number {_shorten(token)} overflows a double") from None
    return number


def overflow_message(token: str) -> str | None:
    """Why the complete number ``token`` is not accepted, if it is not."""
    try:
        number_value(token)
    except ValueError as exc:
        return str(exc)
    return None


def _shorten(token: str) -> str:
    return token if len(token) <= 40 else f"{token[:20]}...{token[-12:]} ({len(token)} characters)"
