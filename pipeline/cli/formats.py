"""``streamfold formats``: every tool-call format, the models that write it, and what ``auto`` tells it by."""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec

from operators.delimiters import FORMATS, FormatLexer

__all__ = ["FormatInfo", "describe_formats", "render_formats"]


class FormatInfo(msgspec.Struct, frozen=True):
    """One row of ``streamfold formats``."""

    name: str
    aliases: tuple[str, ...]
    models: tuple[str, ...]
    detected_by: tuple[str, ...]
    """What names the format for ``--tool-format auto`` (empty: name it yourself)."""


def describe_formats(formats: Mapping[str, type[FormatLexer]] = FORMATS) -> list[FormatInfo]:
    """The registered formats (aliases folded into their format), sorted by name."""
    lexers = sorted(dict.fromkeys(formats.values()), key=lambda lexer: lexer.name)
    return [
        FormatInfo(
            name=lexer.name,
            aliases=lexer.aliases,
            models=lexer.models,
            detected_by=_detected_by(lexer),
        )
        for lexer in lexers
    ]


def _detected_by(lexer: type[FormatLexer]) -> tuple[str, ...]:
    """The openers, or what the format's own ``detect_after`` says it looks for after them."""
    if not (lexer.detect_openers or lexer.detect_at_start):
        return ()
    rule = lexer.detect_after.__doc__ or ""
    if lexer.detect_after.__func__ is not FormatLexer.detect_after.__func__ and rule:  # type: ignore[attr-defined]
        return (" ".join(rule.split("\n\n")[0].split()).replace("``", "").rstrip("."),)
    return (*lexer.detect_openers, *(f"an answer starting {opener}" for opener in lexer.detect_at_start))


def render_formats(as_json: bool = False) -> str:
    """The text ``streamfold formats`` prints: a table, or one JSON object per line."""
    rows = describe_formats()
    if as_json:
        return "".join(json.dumps(msgspec.to_builtins(row), ensure_ascii=False) + "\n" for row in rows)
    table = [("FORMAT", "MODELS", "AUTO-DETECTED BY", "ALIASES")]
    table.append(("none", "providers that send structured tool calls", "-", "api_tool_call"))
    table += [
        (row.name, ", ".join(row.models) or "-", " or ".join(row.detected_by) or "-", ", ".join(row.aliases))
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(3)]
    return "".join(
        (
            "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)) + "  " + line[3]
        ).rstrip()
        + "\n"
        for line in table
    )
