"""``__all__`` is the documented surface (the httpx check): in every facade and every public module, each
public name is in ``__all__`` and everything in ``__all__`` exists.

A public name is one not starting with ``_``: in a module, one it defines (a class, a function, a constant);
in a package facade, every name it offers. Submodules, TypeVars and typing helpers (type aliases such as
``Chunks``) are neither required nor forbidden; in a facade, names imported from outside the project are not
public. A module's ``__all__`` may also re-export what it imports (``JSONStreamParser`` from a private
module). Private modules (``_base.py`` ...) are internal as a whole and not checked.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path
from typing import TypeVar

import pytest

from pipeline._lazy import TABLES

ROOT = Path(__file__).parent.parent


def public_modules() -> list[str]:
    names = []
    for package in ("pipeline", "operators"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(part.startswith("_") for part in parts):
                continue
            names.append(".".join(parts))
    return names


MODULES = public_modules()


def defined_names(module: types.ModuleType) -> set[str]:
    """Names a module's top level defines (not imports), without the ``_`` ones."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def is_typing_helper(value: object) -> bool:
    """A module, a TypeVar, a type alias (``list[str]``, ``A | B``, ``Literal[...]``), ``__future__``."""
    if isinstance(value, types.ModuleType | TypeVar):
        return True
    helpers = {"typing", "types", "collections.abc", "__future__"}
    return not isinstance(value, type) and type(value).__module__ in helpers


def is_foreign(value: object) -> bool:
    """Defined outside the project (``Any``, ``pipable_operator``, ...), or the facades' own machinery."""
    origin = getattr(value, "__module__", None)
    if origin == "pipeline._lazy":
        return True
    return isinstance(origin, str) and origin.split(".")[0] not in {"pipeline", "operators"}


def public_names(module: types.ModuleType) -> set[str]:
    names = defined_names(module)
    package = hasattr(module, "__path__")
    if package:
        names |= {name for name in dir(module) if not name.startswith("_") and name != "TYPE_CHECKING"}
    return {
        name
        for name in names
        if not is_typing_helper(value := getattr(module, name, None)) and not (package and is_foreign(value))
    }


@pytest.mark.parametrize("name", MODULES)
def test_all_is_the_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == [], f"{name}.__all__ names what it does not have"
    assert sorted(public_names(module) - set(exported)) == [], f"public in {name} but not in __all__"


def test_every_public_module_is_checked() -> None:
    expected = {"pipeline", "operators", "pipeline.models", "operators.adapter.sse", "pipeline.fanout.hub"}
    assert expected <= set(MODULES)


FACADES = [name for name in MODULES if "lazy_exports" in vars(importlib.import_module(name))]


def type_checking_imports(module: types.ModuleType) -> set[tuple[str, str]]:
    """The ``(module, X)`` of each ``from module import X as X`` a facade has under ``if TYPE_CHECKING:``:
    what type checkers see."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    blocks = [
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    return {
        (node.module or "", alias.name)
        for block in blocks
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }


def table_imports(package: str) -> set[tuple[str, str]]:
    """The ``(module, X)`` pairs of a facade's one table."""
    return {(module, name) for module, names in TABLES[package].items() for name in names}


@pytest.mark.parametrize("name", FACADES)
def test_a_lazy_facade_shows_type_checkers_what_its_table_gives(name: str) -> None:
    module = importlib.import_module(name)
    assert type_checking_imports(module) == table_imports(name), (
        f"{name}: its TYPE_CHECKING block is not its table: run `python -m tests.test_public_surface`"
    )
    assert {export for _, export in table_imports(name)} == set(module.__all__)
    assert set(module.__all__) <= set(dir(module))
    for export in module.__all__:
        assert getattr(module, export) is not None


def test_the_facades_are_lazy() -> None:
    assert {"pipeline", "operators", "operators.adapter", "operators.convert", "pipeline.fanout"} <= set(
        FACADES
    )


def export_order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name.lower())


def type_checking_block(package: str) -> str:
    """The ``if TYPE_CHECKING:`` block written from a facade's table."""
    lines = ["if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`"]
    for module, names in sorted(TABLES[package].items()):
        for name in sorted(names, key=export_order):
            line = f"    from {module} import {name} as {name}"
            if len(line) > 110:
                line = f"    from {module} import (\n        {name} as {name},\n    )"
            lines.append(line)
    return "\n".join(lines) + "\n"


def write_type_checking_blocks() -> None:
    """Rewrite the ``if TYPE_CHECKING:`` block that ends each facade from its table."""
    for package in FACADES:
        path = importlib.import_module(package).__file__
        assert path is not None
        text = Path(path).read_text(encoding="utf-8")
        start = text.index("\nif TYPE_CHECKING:") + 1
        updated = text[:start] + type_checking_block(package)
        if updated != text:
            Path(path).write_text(updated, encoding="utf-8")
            print(f"rewrote {path}")


if __name__ == "__main__":
    write_type_checking_blocks()
