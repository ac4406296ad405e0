"""A web replica: the live page and the serving routes over the shared Redis log; it starts nothing.

    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.replicas.web:app --port 8001
    STREAMFOLD_REDIS_URL=redis://127.0.0.1:6379/0 uvicorn examples.replicas.web:app --port 8002

Any replica serves any response from any id: the page at ``/?response=ID`` reads
``/responses/ID/events``, and when its replica dies, ``EventSource`` reconnects (through the load
balancer, to another replica) with ``Last-Event-ID`` and continues without a gap.
"""

from __future__ import annotations

import os

from pipeline.cli.serve import create_serve_app
from pipeline.fanout.serving.redis import RedisEventLog

app = create_serve_app(
    None,
    mode="viewer",
    label="replica " + os.environ.get("REPLICA_NAME", os.environ.get("HOSTNAME", "")),
    log=RedisEventLog(os.environ.get("STREAMFOLD_REDIS_URL", "redis://127.0.0.1:6379/0")),
)
