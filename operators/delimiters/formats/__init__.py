"""The delimiter formats, one module per family of models; importing this package registers them all.

Every public module here defines its formats with ``@register_format``; add a module and it is found.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
