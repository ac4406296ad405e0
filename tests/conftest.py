from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
"""The tests' own directory."""
ROOT = TESTS.parent
"""The project's root."""
FIXTURES = TESTS / "fixtures"
UI_CLIENTS = Path(__file__).parent / "ui_clients"
UI_CLIENT_PACKAGES = ("ai", "@ag-ui/core", "@ag-ui/client")
"""The npm packages of tests/ui_clients/package.json: one missing (a checkout older than it) reinstalls."""

# No test asserts a wall-clock time, and hypothesis' default 200 ms deadline per example and its "too slow"
# health check both do: a busy machine can fail a property test that has not set them off itself.
settings.register_profile(
    "streamfold", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("streamfold")


@pytest.fixture
def anyio_backend() -> str:
    """aiostream is asyncio-only, so every async test runs on anyio's asyncio backend."""
    return "asyncio"


def pytest_configure(config: pytest.Config) -> None:
    """Install the pinned npm packages of the UI clients once, before any worker starts, so that
    ``pip install -e '.[test]' && pytest`` is the whole test command wherever Node and npm are."""
    installed = all((UI_CLIENTS / "node_modules" / name).is_dir() for name in UI_CLIENT_PACKAGES)
    if hasattr(config, "workerinput") or installed:
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return  # the conformance tests skip, saying why
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=UI_CLIENTS,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        print(f"npm ci in {UI_CLIENTS} failed; the UI conformance tests will say so:\n{done.stderr[-2000:]}")
