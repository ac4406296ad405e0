"""Lazy package facades (PEP 562): a name is imported from its module the first time it is used.

``import pipeline`` or ``import operators`` then costs almost nothing, and decoding SSE never loads the
fan-out, reactivex, pydantic or Starlette. Each facade writes its names once, in the table it passes to
`lazy_exports`, which gives its ``__all__``, ``__getattr__`` and ``__dir__``. Type checkers do not run
that code, so each facade ends with an ``if TYPE_CHECKING:`` block of ``from module import X as X``, written
from the table by ``python -m tests.test_public_surface`` (never by hand); the same file's tests fail when a
block and its table differ.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["TABLES", "lazy_exports"]

TABLES: dict[str, Mapping[str, tuple[str, ...]]] = {}
"""Each facade's table (module -> the names taken from it), by package, as `lazy_exports` got it."""


def lazy_exports(
    namespace: dict[str, Any],
    exports: Mapping[str, tuple[str, ...]],
    *,
    moved: Mapping[str, str] | None = None,
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is ``namespace``.

    Args:
        exports: each module, and the names the package takes from it. A resolved name is stored in the
            namespace, so that each is looked up once.
        moved: names the package no longer offers, each with the module that has it now: using one still
            works, with a `DeprecationWarning` saying where to import it from.

    Returns:
        ``__all__`` (constants, classes, then functions, each sorted) and the two module functions.
    """
    package = namespace["__name__"]
    TABLES[package] = exports
    where = {name: module for module, names in exports.items() for name in names}
    gone = dict(moved or {})

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            if name in gone:
                return _moved(package, name, gone[name])
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return sorted(where, key=_export_order), __getattr__, __dir__


def _moved(package: str, name: str, module: str) -> Any:
    """A name that moved: from its new module, with a warning that points there."""
    warnings.warn(
        f"{package}.{name} moved: import it from {module} ({package}.{name} will go in a later release)",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(module), name)


def _export_order(name: str) -> tuple[int, str]:
    """Constants first, then classes, then functions (ruff's RUF022 order)."""
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)
