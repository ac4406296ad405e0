"""mypy run as a subprocess, for the tests that type-check snippets.

Not ``mypy.api`` in the test's own process: a run there holds its whole build (hundreds of MB) in the
xdist worker and competes with the worker's other tests for its core; a process of its own frees that at
exit. One process per test, whatever the number of files it checks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["TEST_TIMEOUT", "run_mypy"]

ROOT = Path(__file__).parent.parent
HANG_GUARD = 500  # seconds: mypy's first run on a busy machine, without a cache, takes a minute or more
TEST_TIMEOUT = 600
"""pytest-timeout's limit for a test that runs mypy (``@pytest.mark.timeout(TEST_TIMEOUT)``): the suite's
120 s is too short for a cold run on a busy machine, and the subprocess' own guard should fire first."""


def run_mypy(*arguments: str) -> tuple[str, int]:
    """mypy's report (stdout and stderr) and exit status, run from the repository's root."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    return done.stdout + done.stderr, done.returncode
