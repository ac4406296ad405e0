"""The registry of delimiter formats: `FORMATS` by name and alias, filled by ``@register_format``."""

from __future__ import annotations

from typing import TypeVar

from operators.delimiters._lexer import FormatLexer
from pipeline.errors import ConfigurationError

__all__ = ["FORMATS", "get_format", "register_format"]

FORMATS: dict[str, type[FormatLexer]] = {}
"""Every delimiter format by name (and alias)."""

_L = TypeVar("_L", bound=type[FormatLexer])


def register_format(lexer: _L) -> _L:
    """Class decorator: make ``lexer`` available under its ``name`` and ``aliases``.

    Raises:
        ValueError: the lexer has no name, or a name is taken by another lexer.
    """
    for name in (lexer.name, *lexer.aliases):
        if not name:
            raise ValueError(f"{lexer.__name__} has no name")
        if FORMATS.get(name, lexer) is not lexer:
            raise ValueError(f"delimiter format {name!r} is already registered")
        FORMATS[name] = lexer
    return lexer


def get_format(name: str) -> type[FormatLexer]:
    """The lexer class of the format ``name``.

    Raises:
        ConfigurationError: no format has that name (the message names the known ones).
    """
    try:
        return FORMATS[name]
    except KeyError:
        # Worded as operators.registry.resolve_tool_format words it: one message for one condition.
        known = ", ".join(["none", *sorted(FORMATS)])
        raise ConfigurationError(f"unknown tool format {name!r}; expected one of: {known}") from None
