"""The ``streamfold`` command: ``demo``, ``replay``, ``proxy``.

Modules: :mod:`~pipeline.cli.main` (the entry point, ``main(argv)``), :mod:`~pipeline.cli.render` (the live
terminal view). Nothing is re-exported here: ``pipeline.cli.main`` is both a module and its function.
"""

from __future__ import annotations

__all__: list[str] = []
