"""The public surface: every name in ``__all__`` exists, and ``__all__`` is sorted."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["pipeline", "operators", "operators.convert", "operators.delimiters"]


def sort_key(name: str) -> tuple[int, str]:
    """Constants first, then classes, then functions (ruff's RUF022 order)."""
    if name.isupper():
        return (0, name)
    return (1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_complete_and_sorted(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(module, name), f"{package}.{name} is in __all__ but missing"
    assert exported == sorted(exported, key=sort_key)


def test_the_stages_are_reachable_from_operators() -> None:
    import operators

    for name in ["rewrite_delimiters", "split_arguments", "emit_segments", "fold_invocations", "sse_events"]:
        assert name in operators.__all__
