"""The proxy's operations surface: metrics in Prometheus text (``GET /metrics``), the health answer
(``GET /health``) and structured access logs (one JSON object a line, logger ``streamfold.proxy.access``).

Metrics are plain counters on one object per process (each worker reports its own, as Prometheus
expects of a multi-process server scraped per instance): updating one is an integer addition, so the
per-chunk path pays nothing measurable. The added latency is the time the proxy spends on one upstream
read, from the moment it has the bytes to the moment it has handed the rewritten bytes to the server
(rewriting plus the send), observed into a fixed-bucket histogram.
"""

from __future__ import annotations

import logging
import os
import time
from bisect import bisect_left
from typing import Any, Final

from pipeline._jsonenc import encode_json
from pipeline.proxy.policy import TOOL_RULE_CODES

__all__ = [
    "ACCESS_LOG",
    "LATENCY_BUCKETS",
    "UPSTREAM_ERROR_CODES",
    "Metrics",
    "RequestLog",
    "access_record",
    "label_value",
]

ACCESS_LOG: Final = logging.getLogger("streamfold.proxy.access")
"""Where the access records go: one INFO record per request, its message one JSON object."""

LATENCY_BUCKETS: Final[tuple[float, ...]] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
)
"""Upper bounds (seconds) of the added-latency histogram's buckets (``+Inf`` follows)."""


UPSTREAM_ERROR_CODES: Final = frozenset(
    {
        "invalid_upstream_response",
        "upstream_disconnected",
        "upstream_error",
        "upstream_error_event",
        "upstream_response_too_large",
        "upstream_timeout",
        "upstream_truncated",
        "upstream_unreachable",
        *(f"upstream_status_{status}" for status in range(100, 600)),
    }
)
"""The ``code`` label values of ``streamfold_proxy_upstream_errors_total``: the proxy's own codes and
``upstream_status_<status>``; any other code (an upstream's own, in an error event) counts as
``upstream_other``, so that an upstream cannot mint a series per value."""

_PROXY_ERROR_CODES: Final = frozenset({*TOOL_RULE_CODES, "proxy_error"})
"""The codes of answers that failed on the proxy's side (the model broke the request's tool rules, a
defect of the proxy): not upstream failures. Every other code an answer ends with is one."""


def label_value(value: object) -> str:
    """``value`` escaped for a Prometheus text label (backslash, double quote, line feed)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """The proxy's counters (one instance per app); `render` writes them as Prometheus text."""

    __slots__ = (
        "_latency_buckets",
        "_latency_count",
        "_latency_sum",
        "calls_dropped",
        "calls_rewritten",
        "chunks",
        "requests",
        "started",
        "streams_open",
        "upstream_errors",
    )

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        """(route, status) -> requests answered."""
        self.streams_open = 0
        self.chunks = 0
        """SSE events written to clients on rewritten streams."""
        self.calls_rewritten = 0
        self.calls_dropped = 0
        self.upstream_errors: dict[str, int] = {}
        """Error code -> upstream failures (transport, timeouts, error events, cut streams)."""
        self._latency_buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self._latency_sum = 0.0
        self._latency_count = 0
        self.started = time.time()

    def request_done(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def upstream_error(self, code: str) -> None:
        """Count an upstream failure under ``code``, or ``upstream_other`` when it is not one of
        `UPSTREAM_ERROR_CODES`."""
        if code not in UPSTREAM_ERROR_CODES:
            code = "upstream_other"
        self.upstream_errors[code] = self.upstream_errors.get(code, 0) + 1

    def added_latency(self, seconds: float) -> None:
        """One upstream read's time in the proxy."""
        self._latency_buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self._latency_sum += seconds
        self._latency_count += 1

    def render(self) -> bytes:
        """The metrics in the Prometheus text exposition format (version 0.0.4)."""
        lines = [
            "# HELP streamfold_proxy_requests_total Requests answered, by route and status.",
            "# TYPE streamfold_proxy_requests_total counter",
        ]
        for (route, status), count in sorted(self.requests.items()):
            lines.append(
                f'streamfold_proxy_requests_total{{route="{label_value(route)}",status="{status}"}} {count}'
            )
        lines += [
            "# HELP streamfold_proxy_streams_open Rewritten streams open now.",
            "# TYPE streamfold_proxy_streams_open gauge",
            f"streamfold_proxy_streams_open {self.streams_open}",
            "# HELP streamfold_proxy_chunks_total SSE events written on rewritten streams.",
            "# TYPE streamfold_proxy_chunks_total counter",
            f"streamfold_proxy_chunks_total {self.chunks}",
            "# HELP streamfold_proxy_tool_calls_total Tool calls written to clients (rewritten streams).",
            "# TYPE streamfold_proxy_tool_calls_total counter",
            f"streamfold_proxy_tool_calls_total {self.calls_rewritten}",
            "# HELP streamfold_proxy_tool_calls_dropped_total Calls dropped by the request's tool rules.",
            "# TYPE streamfold_proxy_tool_calls_dropped_total counter",
            f"streamfold_proxy_tool_calls_dropped_total {self.calls_dropped}",
            "# HELP streamfold_proxy_upstream_errors_total Upstream failures, by error code.",
            "# TYPE streamfold_proxy_upstream_errors_total counter",
        ]
        for code, count in sorted(self.upstream_errors.items()):
            lines.append(f'streamfold_proxy_upstream_errors_total{{code="{label_value(code)}"}} {count}')
        lines += [
            "# HELP streamfold_proxy_added_latency_seconds Time in the proxy per upstream read.",
            "# TYPE streamfold_proxy_added_latency_seconds histogram",
        ]
        cumulative = 0
        for bound, count in zip((*LATENCY_BUCKETS, None), self._latency_buckets, strict=True):
            cumulative += count
            le = "+Inf" if bound is None else repr(bound)
            lines.append(f'streamfold_proxy_added_latency_seconds_bucket{{le="{le}"}} {cumulative}')
        lines += [
            f"streamfold_proxy_added_latency_seconds_sum {self._latency_sum!r}",
            f"streamfold_proxy_added_latency_seconds_count {self._latency_count}",
            "",
        ]
        return "\n".join(lines).encode()

    def health(self) -> dict[str, Any]:
        """The body of ``GET /health``: the proxy process is up and serving."""
        return {
            "status": "ok",
            "pid": os.getpid(),
            "streams_open": self.streams_open,
            "uptime_seconds": round(time.time() - self.started, 3),
        }


def access_record(**fields: Any) -> str:
    """One access-log line: ``fields`` (``None`` values left out) as a JSON object."""
    return encode_json({key: value for key, value in fields.items() if value is not None}).decode()


class RequestLog:
    """One request's status, error code and tool calls, and at its end its metrics and access record:
    the same ``requests_total`` / ``upstream_errors_total`` counts and JSON access line on every route."""

    __slots__ = (
        "_started",
        "error",
        "input_tokens",
        "method",
        "model",
        "output_tokens",
        "route",
        "status",
        "stream",
        "tool_calls",
    )

    def __init__(self, route: str, method: str, model: str | None, stream: bool) -> None:
        self.route = route
        self.method = method
        self.model = model
        self.stream = stream
        self.status = 0
        self.error: str | None = None
        self.tool_calls = 0
        self.input_tokens: int | None = None
        """The upstream's usage, when it reported one (the access record's tokens)."""
        self.output_tokens: int | None = None
        self._started = time.perf_counter()

    def start(self) -> None:
        self._started = time.perf_counter()

    def done(self, metrics: Metrics, scope: Any) -> None:
        """Count the request and write its access line (status 499 when the client went away)."""
        status = self.status or 499
        metrics.request_done(self.route, status)
        if self.error is not None and self.error not in _PROXY_ERROR_CODES:
            metrics.upstream_error(self.error)
        if ACCESS_LOG.isEnabledFor(logging.INFO):
            client = scope.get("client")
            ACCESS_LOG.info(
                access_record(
                    time=round(time.time(), 3),
                    client=f"{client[0]}:{client[1]}" if client else None,
                    method=self.method,
                    path=scope.get("path"),
                    route=self.route,
                    model=self.model,
                    stream=self.stream or None,
                    status=status,
                    duration_ms=round((time.perf_counter() - self._started) * 1000, 3),
                    tool_calls=self.tool_calls or None,
                    input_tokens=self.input_tokens,
                    output_tokens=self.output_tokens,
                    error=self.error,
                )
            )
