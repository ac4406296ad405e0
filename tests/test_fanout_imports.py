"""The fan-out package's modules import one way: no circle, and each imports first in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
FANOUT = ROOT / "pipeline" / "fanout"


def fanout_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in FANOUT.rglob("*.py")
    )


def test_no_module_of_the_fanout_package_imports_itself_back() -> None:
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")
    graph = grimp.build_graph("pipeline", exclude_type_checking_imports=True)
    modules = [module for module in fanout_modules() if module in graph.modules]
    circles = [
        (importer, imported)
        for importer in modules
        for imported in modules
        if importer < imported
        and graph.direct_import_exists(importer=importer, imported=imported, as_packages=False)
        and graph.chain_exists(importer=imported, imported=importer)
    ]
    assert circles == []


def test_each_fanout_module_imports_first_in_a_fresh_interpreter() -> None:
    script = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    for module in fanout_modules():
        done = subprocess.run(
            [sys.executable, "-c", script, module],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, f"{module}: {done.stderr}"
