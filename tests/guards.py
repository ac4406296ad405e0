"""The suite's hang guard: how long a test waits for something that should happen before it fails.

Only a hang guard, never a timing assertion: a bug that deadlocks fails the test with a ``TimeoutError``
where it waits instead of at pytest-timeout's limit (``timeout`` in ``pyproject.toml``, 120 s). Generous,
because the suite runs with ``pytest -n 2`` on busy 2-core machines, where a step that takes milliseconds
alone can wait seconds for a core.
"""

from __future__ import annotations

__all__ = ["GUARD"]

GUARD = 60.0  # seconds
