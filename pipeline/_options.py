"""Checks of the numeric options every public entry point takes: a bad value is a
`ConfigurationError` that names the option and the value, raised when the pipeline is built, not at
the first item. Names (providers, framings, tool formats) are checked by `operators.registry`."""

from __future__ import annotations

from pipeline.errors import ConfigurationError

__all__ = ["check_count"]


def check_count(option: str, value: object, *, minimum: int) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``; else a ConfigurationError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{option} must be an integer >= {minimum}, got {value!r}")
    return value
