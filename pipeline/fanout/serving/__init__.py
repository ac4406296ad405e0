"""Serving live responses: an event log with ids, resumable reads, a detached lifecycle, backends.

- `MemoryEventLog`: the default backend (embedded, no server); `RedisEventLog` (Redis
  Streams, the ``redis`` extra) and `NatsEventLog` (NATS JetStream, the ``nats`` extra) for a
  producer and readers in several processes.
- `ResponseManager`: starts, stops and lists responses over any `EventLog`.
- `pipeline.fanout.web.serving_routes`: the HTTP routes (SSE and WebSocket, resumable).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.fanout.serving._log import (
        DEFAULT_HEARTBEAT_TIMEOUT,
        DEFAULT_RETENTION,
        Entry,
        EventLog,
        ResponseState,
        ResponseStatus,
        Retention,
    )
    from pipeline.fanout.serving.manager import ResponseManager
    from pipeline.fanout.serving.memory import MemoryEventLog
    from pipeline.fanout.serving.nats import NatsEventLog
    from pipeline.fanout.serving.redis import RedisEventLog

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "DEFAULT_RETENTION",
    "Entry",
    "EventLog",
    "MemoryEventLog",
    "NatsEventLog",
    "RedisEventLog",
    "ResponseManager",
    "ResponseState",
    "ResponseStatus",
    "Retention",
]

_WHERE = {
    "MemoryEventLog": "pipeline.fanout.serving.memory",
    "NatsEventLog": "pipeline.fanout.serving.nats",
    "RedisEventLog": "pipeline.fanout.serving.redis",
    "ResponseManager": "pipeline.fanout.serving.manager",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_WHERE.get(name, "pipeline.fanout.serving._log"))
    return getattr(module, name)
