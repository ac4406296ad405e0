"""Lazy package facades (PEP 562): a name is imported from its module the first time it is used.

``import pipeline`` or ``import operators`` then costs almost nothing, and decoding SSE never loads the
fan-out, reactivex, pydantic or Starlette. Each facade also imports its names under ``TYPE_CHECKING`` as
``X as X``, so that type checkers and IDEs see them as explicit re-exports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is ``namespace``.

    ``exports`` maps each module to the names the package takes from it. A resolved name is stored in the
    namespace, so that each is looked up once.
    """
    package = namespace["__name__"]
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
