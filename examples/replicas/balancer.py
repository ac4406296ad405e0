"""A tiny round-robin TCP load balancer for the demo: each new connection goes to the next backend that
accepts it (a dead one is skipped), as a load balancer with health checks would.

    python examples/replicas/balancer.py --port 8000 127.0.0.1:8001 127.0.0.1:8002
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence

import anyio
from anyio.abc import ByteStream, SocketStream


class Balancer:
    """Round-robin over ``backends`` (``host:port``); ``routed`` records (first bytes, backend) per
    request, so a test can tell which replica holds which request. ``announce``: also print each request
    line and its backend (``GET /responses/demo/events -> 127.0.0.1:8001``), so a person can tell which
    replica to kill."""

    def __init__(self, backends: Sequence[str], *, announce: bool = False) -> None:
        self.backends = list(backends)
        self._next = itertools.cycle(range(len(self.backends)))
        self.routed: list[tuple[bytes, str]] = []
        self._announce = announce

    def _route(self, first: bytes, backend: str) -> None:
        self.routed.append((first[:200], backend))
        if self._announce:
            line = first[:200].split(b"\r\n", 1)[0].rsplit(b" HTTP/", 1)[0]
            print(f"{line.decode('latin-1')} -> {backend}", flush=True)

    async def _connect(self) -> tuple[SocketStream, str]:
        for _ in self.backends:
            backend = self.backends[next(self._next)]
            host, port = backend.rsplit(":", 1)
            try:
                return await anyio.connect_tcp(host, int(port)), backend
            except OSError:
                continue  # that replica is down: the next one
        raise OSError("no backend accepts connections")

    async def handle(self, client: SocketStream) -> None:
        async with client:
            try:
                first = await client.receive()
                upstream, backend = await self._connect()
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError):
                return
            self._route(first, backend)
            async with upstream, anyio.create_task_group() as tasks:
                await upstream.send(first)
                tasks.start_soon(self._requests, client, upstream, backend, tasks.cancel_scope)
                tasks.start_soon(_pipe, upstream, client, tasks.cancel_scope)

    async def _requests(
        self, client: ByteStream, upstream: ByteStream, backend: str, scope: anyio.CancelScope
    ) -> None:
        """Client to backend, recording each later request's first bytes too (keep-alive reuse)."""
        try:
            async for chunk in client:
                if chunk[:4] in (b"GET ", b"POST"):
                    self._route(chunk, backend)
                await upstream.send(chunk)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        scope.cancel()

    def serving(self, path_part: bytes) -> list[str]:
        """The backends that got a request whose first line contains ``path_part``, in order."""
        return [backend for first, backend in self.routed if path_part in first.split(b"\r\n", 1)[0]]


async def _pipe(source: ByteStream, target: ByteStream, scope: anyio.CancelScope) -> None:
    try:
        async for chunk in source:
            await target.send(chunk)
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    scope.cancel()  # one side closed or died: close both, as a load balancer does


async def main(port: int, backends: Sequence[str]) -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    await listener.serve(Balancer(backends, announce=True).handle)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("backends", nargs="+", metavar="HOST:PORT")
    arguments = parser.parse_args()
    anyio.run(main, arguments.port, arguments.backends)
