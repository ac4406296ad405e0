"""The UI fan-out: a hub that multicasts a response to subscribers, each with a bounded buffer and a
declared policy; reactivex observers and web clients (SSE, WebSocket) subscribe through it.

Modules: `hub`, `rx`, `web`;
`access`: who may start, list, read and stop served responses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "pipeline.fanout.hub": (
            "DEFAULT_MAX_BUFFER",
            "MAX_REPLAY",
            "RETAINED_SUBSCRIBERS",
            "Hub",
            "HubClosedError",
            "HubStatistics",
            "Policy",
            "ReplayUnavailableError",
            "SourceState",
            "SubscriberState",
            "SubscriberStatistics",
            "Subscription",
            "broadcast",
            "fan_out",
        ),
        "pipeline.fanout.rx": (
            "as_observable",
            "observe",
            "to_observable",
        ),
        "pipeline.fanout.web": (
            "DEFAULT_SEND_TIMEOUT",
            "DEFAULT_WEB_MAX_BUFFER",
            "DEFAULT_WEB_POLICY",
            "MAX_SEND_BYTES",
            "HubResolver",
            "ResponseRegistry",
            "SSEEndpoint",
            "WebSocketEndpoint",
            "error_to_wire",
            "sse_endpoint",
            "stream_routes",
            "to_wire",
            "websocket_endpoint",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from pipeline.fanout.hub import DEFAULT_MAX_BUFFER as DEFAULT_MAX_BUFFER
    from pipeline.fanout.hub import MAX_REPLAY as MAX_REPLAY
    from pipeline.fanout.hub import RETAINED_SUBSCRIBERS as RETAINED_SUBSCRIBERS
    from pipeline.fanout.hub import Hub as Hub
    from pipeline.fanout.hub import HubClosedError as HubClosedError
    from pipeline.fanout.hub import HubStatistics as HubStatistics
    from pipeline.fanout.hub import Policy as Policy
    from pipeline.fanout.hub import ReplayUnavailableError as ReplayUnavailableError
    from pipeline.fanout.hub import SourceState as SourceState
    from pipeline.fanout.hub import SubscriberState as SubscriberState
    from pipeline.fanout.hub import SubscriberStatistics as SubscriberStatistics
    from pipeline.fanout.hub import Subscription as Subscription
    from pipeline.fanout.hub import broadcast as broadcast
    from pipeline.fanout.hub import fan_out as fan_out
    from pipeline.fanout.rx import as_observable as as_observable
    from pipeline.fanout.rx import observe as observe
    from pipeline.fanout.rx import to_observable as to_observable
    from pipeline.fanout.web import DEFAULT_SEND_TIMEOUT as DEFAULT_SEND_TIMEOUT
    from pipeline.fanout.web import DEFAULT_WEB_MAX_BUFFER as DEFAULT_WEB_MAX_BUFFER
    from pipeline.fanout.web import DEFAULT_WEB_POLICY as DEFAULT_WEB_POLICY
    from pipeline.fanout.web import MAX_SEND_BYTES as MAX_SEND_BYTES
    from pipeline.fanout.web import HubResolver as HubResolver
    from pipeline.fanout.web import ResponseRegistry as ResponseRegistry
    from pipeline.fanout.web import SSEEndpoint as SSEEndpoint
    from pipeline.fanout.web import WebSocketEndpoint as WebSocketEndpoint
    from pipeline.fanout.web import error_to_wire as error_to_wire
    from pipeline.fanout.web import sse_endpoint as sse_endpoint
    from pipeline.fanout.web import stream_routes as stream_routes
    from pipeline.fanout.web import to_wire as to_wire
    from pipeline.fanout.web import websocket_endpoint as websocket_endpoint
