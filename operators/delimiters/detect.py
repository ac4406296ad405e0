"""Which delimiter format an answer is written in, told from the model's own markers.

Every registered format says what names it (`detect_openers`: text that may
appear anywhere; `detect_at_start`: text that names it only at the start of
the answer, for formats with no marker such as bare JSON or Python calls) and, for an opener several
formats share, which of them the text after it means (`detect_after`).
`detect_tool_format` reads the registry, so a format registered at run time is detected too.

The first opener in the text decides. While the text's end could still become an opener, or what follows
an opener does not yet tell, the answer is ``""`` (undecided) if more text is coming, for at most
`MAX_HELD_CHARS` characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from operators.delimiters._lexer import FormatLexer
from operators.delimiters._registry import FORMATS

__all__ = [
    "MAX_HELD_CHARS",
    "UNDECIDED",
    "FormatDetector",
    "detect_tool_format",
    "detected_formats",
    "registry_detector",
]

MAX_HELD_CHARS: Final = 512
"""How long an opener may stay undecided (the text after it) before it counts as no call."""

UNDECIDED: Final = ""
"""What `FormatDetector.detect` answers while more text will tell."""

_Claims = dict[str, tuple[type[FormatLexer], ...]]


class FormatDetector:
    """The openers of a set of formats, compiled once; `detect` names the format of a text."""

    __slots__ = ("_anywhere", "_at_start", "_first_chars", "_longest", "_pattern", "formats")

    def __init__(self, formats: Mapping[str, type[FormatLexer]]) -> None:
        lexers = list(dict.fromkeys(formats.values()))
        self.formats: tuple[str, ...] = tuple(
            lexer.name for lexer in lexers if lexer.detect_openers or lexer.detect_at_start
        )
        """The formats this detector can name, in registration order."""
        self._anywhere = _claims(lexers, "detect_openers")
        self._at_start = _claims(lexers, "detect_at_start")
        openers = sorted(self._anywhere, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, openers))) if openers else None
        self._first_chars = frozenset(opener[0] for opener in openers)
        self._longest = max(map(len, openers), default=0)

    def detect(self, text: str, final: bool = True, *, at_start: bool = True) -> str | None:
        """The format of ``text``: the format whose opener comes first.

        Args:
            text: the answer's text so far (or a part of it that ends where it ends).
            final: the answer is complete; if not, ``""`` means more text will tell.
            at_start: ``text`` begins the answer, so the formats without a marker may claim its start.

        Returns:
            The format's name, ``None`` if no format's opener is in ``text``, or ``""`` (not ``final``).
        """
        start = self.start(text, final) if at_start else None
        if start:
            return start
        within = self.within(text, final)
        if within:
            return within
        if not final and (UNDECIDED in (start, within) or self.may_start(text)):
            return UNDECIDED
        return None

    def start(self, head: str, final: bool = True) -> str | None:
        """The format that claims the start of an answer.

        Args:
            head: the answer's text so far, after any leading whitespace.
            final: the answer is complete.

        Returns:
            The format's name, ``None`` if none claims it, or ``""`` while more text may tell (not
            ``final``).
        """
        head = head.lstrip()
        pending = False
        for opener, lexers in self._at_start.items():
            if head.startswith(opener):
                decided = _verdict(lexers, opener, head[len(opener) :], final)
                if decided:
                    return decided
                pending = pending or decided == UNDECIDED
            elif not final and opener.startswith(head):
                pending = True
        return UNDECIDED if pending else None

    def within(self, text: str, final: bool = True) -> str | None:
        """The format whose opener comes first in ``text`` and is confirmed by what follows it.

        Args:
            text: the answer's text so far (or a part of it that ends where it ends).
            final: the answer is complete.

        Returns:
            The format's name, ``None`` if none is found, or ``""`` while what follows the first opener
            does not yet tell (not ``final``).
        """
        if self._pattern is None:
            return None
        for match in self._pattern.finditer(text):
            opener = match[0]
            decided = _verdict(self._anywhere[opener], opener, text[match.end() :], final)
            if decided is not None:
                return decided
        return None

    def may_start(self, text: str) -> bool:
        """Whether the end of ``text`` is the start of an opener."""
        for index in range(max(0, len(text) - self._longest), len(text)):
            if text[index] in self._first_chars:
                tail = text[index:]
                if any(opener.startswith(tail) for opener in self._anywhere):
                    return True
        return False


def _claims(lexers: list[type[FormatLexer]], attribute: str) -> _Claims:
    """Opener -> the formats that name it, in registration order."""
    claims: dict[str, list[type[FormatLexer]]] = {}
    for lexer in lexers:
        openers: tuple[str, ...] = getattr(lexer, attribute)
        for opener in openers:
            claims.setdefault(opener, []).append(lexer)
    return {opener: tuple(claimants) for opener, claimants in claims.items()}


def _verdict(lexers: tuple[type[FormatLexer], ...], opener: str, rest: str, final: bool) -> str | None:
    """The first of ``lexers`` that takes ``opener`` + ``rest`` for its call; ``""`` if one may still."""
    pending = False
    for lexer in lexers:
        claimed = lexer.detect_after(opener, rest, final)
        if claimed:
            return lexer.name
        pending = pending or claimed is None
    if pending and not final and len(rest) < MAX_HELD_CHARS:
        return UNDECIDED
    return None


_cache: tuple[int, FormatDetector] | None = None


def registry_detector() -> FormatDetector:
    """The detector of every registered format, made again when a format was registered since."""
    global _cache
    if _cache is None or _cache[0] != len(FORMATS):
        _cache = (len(FORMATS), FormatDetector(FORMATS))
    return _cache[1]


def detect_tool_format(text: str, final: bool = True, *, at_start: bool = True) -> str | None:
    """The registered format whose opener comes first in ``text`` (see `FormatDetector.detect`).

    Args:
        text: the answer's text so far (or a part of it that ends where it ends).
        final: whether the answer is complete; if not, ``""`` means more text will tell.
        at_start: whether ``text`` begins the answer (formats without a marker claim only its start).

    Returns:
        The format's name, ``None`` if no format's opener is in ``text``, or ``""`` (not ``final``).
    """
    return registry_detector().detect(text, final, at_start=at_start)


def detected_formats() -> tuple[str, ...]:
    """The registered formats ``--tool-format auto`` can tell, in registration order."""
    return registry_detector().formats
