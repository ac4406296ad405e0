"""The ``streamfold`` command: ``demo``, ``replay``, ``proxy``.

Modules: `main` (the entry point, ``main(argv)``), `render` (the live
terminal view). Nothing is re-exported here: ``pipeline.cli.main`` is both a module and its function.
"""

from __future__ import annotations

__all__: list[str] = []
