"""Optional dependencies: a missing one is a `MissingExtraError` naming the extra to install."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pipeline.errors import MissingExtraError

__all__ = ["needs_extra"]


@contextmanager
def needs_extra(extra: str, feature: str) -> Iterator[None]:
    """Imports inside the block that fail for a missing third-party module raise
    `MissingExtraError`: ``FEATURE needs the EXTRA extra: pip install 'streamfold[EXTRA]'``."""
    try:
        yield
    except ModuleNotFoundError as exc:
        module = (exc.name or "").split(".")[0]
        if not module or module in ("pipeline", "operators"):
            raise
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra (module {module!r} is not installed):"
            f" pip install 'streamfold[{extra}]'",
            extra=extra,
            name=module,
        ) from exc
