from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def anyio_backend() -> str:
    """aiostream is asyncio-only, so every async test runs on anyio's asyncio backend."""
    return "asyncio"
