"""Checks of the options every public entry point takes: a bad value is a :class:`ConfigurationError`
that names the option, the value and the choices, raised when the pipeline is built, not at the first item.

``"none"`` is the one documented spelling of "no delimiter rewriting" (the provider sends structured tool
calls); ``"api_tool_call"``, the seeds' name for the same thing and long documented for ``process()`` and
the CLI, is accepted as an alias. ``None`` (the Python value) is the default and means the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from pipeline.errors import ConfigurationError

__all__ = [
    "NO_REWRITE",
    "NO_REWRITE_ALIASES",
    "check_choice",
    "check_count",
    "rewrite_format",
    "tool_format_choices",
]

NO_REWRITE: Final = "none"
"""The tool format that means: no delimiter rewriting, tool calls come structured from the provider."""

NO_REWRITE_ALIASES: Final = frozenset({NO_REWRITE, "api_tool_call"})
"""Every accepted spelling of :data:`NO_REWRITE` (``api_tool_call`` is the seeds' name, kept as an alias)."""


def check_choice(option: str, value: object, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; else a :class:`ConfigurationError` listing them."""
    known = tuple(choices)
    if isinstance(value, str) and value in known:
        return value
    raise ConfigurationError(f"unknown {option} {value!r}; expected one of: {', '.join(known)}")


def check_count(option: str, value: object, *, minimum: int) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``; else a ConfigurationError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{option} must be an integer >= {minimum}, got {value!r}")
    return value


def tool_format_choices() -> list[str]:
    """What a ``tool_format`` option accepts: ``none`` first, then every delimiter format (and alias)."""
    from operators.delimiters import FORMATS

    return [NO_REWRITE, *sorted(FORMATS)]


def rewrite_format(tool_format: Any) -> str | None:
    """The delimiter format to rewrite with, or ``None`` for no rewriting (``None``, ``"none"``,
    ``"api_tool_call"``); a :class:`ConfigurationError` listing the choices for anything else."""
    if tool_format is None or (isinstance(tool_format, str) and tool_format in NO_REWRITE_ALIASES):
        return None
    from operators.delimiters import FORMATS

    if isinstance(tool_format, str) and tool_format in FORMATS:
        return tool_format
    known = ", ".join(tool_format_choices())
    raise ConfigurationError(f"unknown delimiter format {tool_format!r}; expected one of: {known}")
