"""Optional dependencies: a missing one is a :class:`MissingExtraError` naming the extra to install."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.errors import MissingExtraError

__all__ = ["needs_extra"]


@contextmanager
def needs_extra(extra: str, feature: str) -> Iterator[None]:
    """Imports inside the block that fail for a missing third-party module raise
    :class:`MissingExtraError`: ``FEATURE needs the EXTRA extra: pip install 'streamfold[EXTRA]'``."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in ("pipeline", "operators"):
            raise
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra (module {exc.name!r} is not installed):"
            f" pip install 'streamfold[{extra}]'",
            extra=extra,
            name=exc.name,
        ) from exc
