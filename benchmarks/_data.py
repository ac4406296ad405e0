"""The streams the benchmarks share: code full of JSON escapes, cut into token-sized deltas."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

__all__ = ["CHUNK", "CODE_LINES", "code_lines", "deltas"]

CHUNK = 4
"""Characters a delta: about one token, as OpenAI streams tool-call arguments."""

CODE_LINES = (
    'print("hello, \\"world\\"")',
    "path = 'C:\\\\Users\\\\dev\\\\file.txt'",
    '\tif value == "naïve café → ☕":',
    '\t\treturn {"key": "value\\n", "tab": "\\t"}',
    "pattern = re.compile(r'\\d+\\s*\\\\')",
    "# 日本語のコメント and emoji 🎉",
    'sql = "SELECT * FROM t WHERE name = \\"x\\""',
)
"""Python-looking lines dense with what JSON escapes: quotes, backslashes, tabs, non-ASCII text."""


def code_lines(
    size: int, *, seed: int = 1, lines: Sequence[str] = CODE_LINES, cost: Callable[[str], int] = len
) -> list[str]:
    """Lines drawn from ``lines`` by a seeded random choice, each ending in a newline, until their
    ``cost`` (by default their length) adds up to at least ``size``."""
    rng = random.Random(seed)
    picked: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(lines) + "\n"
        picked.append(line)
        total += cost(line)
    return picked


def deltas(text: str, chunk: int = CHUNK) -> list[str]:
    """``text`` cut into ``chunk``-character deltas."""
    return [text[start : start + chunk] for start in range(0, len(text), chunk)]
