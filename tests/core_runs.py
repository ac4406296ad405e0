"""Running a sans-IO core over items in a test, with its error kept as text beside what it gave.

Two ways a test compares cores: `run_to_end` gives what a driven stream gives (every output up to the
first error, those the error carries included, then the error), `each_item` what each item gives on its
own (the stream goes on after an error), for comparing two paths item by item.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline.errors import StreamfoldError
from pipeline.testing import feed_all

__all__ = ["Outcome", "each_item", "failure", "run_to_end"]

Outcome = tuple[list[Any], str | None]
"""What a core gave, and its error as ``"Kind: message"`` (``None`` if it did not fail)."""


def failure(error: StreamfoldError) -> str:
    """An error as a test compares it: its kind and its message."""
    return f"{type(error).__name__}: {error}"


def run_to_end(core: Any, items: Iterable[Any]) -> Outcome:
    """Every output of ``core`` fed ``items`` and then finished, those before an error included, and
    the error (`pipeline.testing.feed_all`, its error as text)."""
    outputs, error = feed_all(core, items)
    return outputs, None if error is None else failure(error)


def each_item(core: Any, items: Iterable[Any], *, finish: bool = True) -> list[Outcome]:
    """What each item gives (its outputs, or those its error carries and the error), then what
    ``finish`` gives, if ``finish``."""
    results: list[Outcome] = []
    for item in items:
        try:
            results.append((core.feed(item), None))
        except StreamfoldError as error:
            results.append((error.partial_outputs, failure(error)))
    if finish:
        try:
            results.append((core.finish(), None))
        except StreamfoldError as error:
            results.append((error.partial_outputs, failure(error)))
    return results
