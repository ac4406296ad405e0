"""How `pipeline.proxy.app.run` serves under uvicorn: the HTTP stack it names at startup, and the
listening socket that worker processes share."""

from __future__ import annotations

import socket
from importlib.util import find_spec
from typing import Any

import uvicorn

__all__ = ["http_stack", "serve_workers", "tcp_listener"]


def http_stack() -> str:
    """The event loop and HTTP parser uvicorn picks here (``auto``: uvloop and httptools if installed)."""
    loop = "uvloop" if find_spec("uvloop") else "asyncio"
    return f"{loop}, {'httptools' if find_spec('httptools') else 'h11'}"


def tcp_listener(config: uvicorn.Config) -> socket.socket:
    """uvicorn's listening socket for ``config``, marked as TCP.

    An accepted connection takes its protocol number from the listener, and asyncio turns Nagle's
    algorithm off (``TCP_NODELAY``) only on a socket that reports TCP. uvicorn binds with the number left
    at 0, so without uvloop each response on a kept-alive connection, and each small piece of a stream,
    would wait for the client's delayed acknowledgement (uvicorn issue 3149).
    """
    listener = config.bind_socket()
    if listener.family in (socket.AF_INET, socket.AF_INET6) and listener.proto != socket.IPPROTO_TCP:
        family, kind = listener.family, listener.type
        listener = socket.socket(family, kind, socket.IPPROTO_TCP, fileno=listener.detach())
        listener.set_inheritable(True)
    return listener


def serve_workers(app: str, **options: Any) -> None:
    """``uvicorn.run(app, **options)`` with ``workers`` above 1: the worker processes serve on one
    `tcp_listener`."""
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(app, **options)
    Multiprocess(config, sockets=[tcp_listener(config)]).run()
