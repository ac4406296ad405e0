"""streamfold's data model and runtime: chunk, segment and invocation types, composition, fan-out, CLI.

The stages themselves are in `operators`; `process` chains them for a provider's stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

_SEEDS = (
    "ApiToolCallStreamingResponseHandler",
    "ParsingStreamingResponseHandler",
    "PassThroughStreamingResponseHandler",
    "StreamingResponseHandler",
    "ToolDefinition",
    "anthropic_tool",
    "create_streaming_handler",
    "gemini_tool",
    "openai_responses_tool",
    "openai_tool",
)
"""The seeds' names this package offered before they moved to `pipeline.seeds`."""

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "pipeline.compose": (
            "PROVIDERS",
            "process",
            "to_chunks",
        ),
        "pipeline.errors": (
            "ConfigurationError",
            "ConverterError",
            "HubClosedError",
            "ProviderError",
            "ReplayUnavailableError",
            "StreamDecodeError",
            "StreamfoldError",
            "SubscriberError",
        ),
        "pipeline.fanout.hub": (
            "Hub",
            "HubStatistics",
            "Policy",
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
        "pipeline.models": (
            "ArgumentDelta",
            "ArgumentError",
            "ArgumentErrorKind",
            "ArgumentEvent",
            "ArgumentValue",
            "ChunkResponse",
            "JSONPath",
            "PipelineEvent",
            "ResponseEnd",
            "SegmentEvent",
            "SegmentEventType",
            "SegmentType",
            "TokenUsage",
            "ToolCallDelta",
            "ToolCallError",
            "ToolCallErrorKind",
            "ToolCallKind",
            "ToolInvocation",
            "ToolResult",
        ),
        "pipeline.stage": (
            "Core",
            "chain",
            "drive",
            "operator_stream",
        ),
    },
    moved=dict.fromkeys(_SEEDS, "pipeline.seeds"),
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from pipeline.compose import PROVIDERS as PROVIDERS
    from pipeline.compose import process as process
    from pipeline.compose import to_chunks as to_chunks
    from pipeline.errors import ConfigurationError as ConfigurationError
    from pipeline.errors import ConverterError as ConverterError
    from pipeline.errors import HubClosedError as HubClosedError
    from pipeline.errors import ProviderError as ProviderError
    from pipeline.errors import ReplayUnavailableError as ReplayUnavailableError
    from pipeline.errors import StreamDecodeError as StreamDecodeError
    from pipeline.errors import StreamfoldError as StreamfoldError
    from pipeline.errors import SubscriberError as SubscriberError
    from pipeline.fanout.hub import Hub as Hub
    from pipeline.fanout.hub import HubStatistics as HubStatistics
    from pipeline.fanout.hub import Policy as Policy
    from pipeline.fanout.hub import SubscriberStatistics as SubscriberStatistics
    from pipeline.fanout.hub import Subscription as Subscription
    from pipeline.fanout.hub import broadcast as broadcast
    from pipeline.fanout.hub import fan_out as fan_out
    from pipeline.fanout.rx import as_observable as as_observable
    from pipeline.fanout.rx import observe as observe
    from pipeline.fanout.rx import to_observable as to_observable
    from pipeline.models import ArgumentDelta as ArgumentDelta
    from pipeline.models import ArgumentError as ArgumentError
    from pipeline.models import ArgumentErrorKind as ArgumentErrorKind
    from pipeline.models import ArgumentEvent as ArgumentEvent
    from pipeline.models import ArgumentValue as ArgumentValue
    from pipeline.models import ChunkResponse as ChunkResponse
    from pipeline.models import JSONPath as JSONPath
    from pipeline.models import PipelineEvent as PipelineEvent
    from pipeline.models import ResponseEnd as ResponseEnd
    from pipeline.models import SegmentEvent as SegmentEvent
    from pipeline.models import SegmentEventType as SegmentEventType
    from pipeline.models import SegmentType as SegmentType
    from pipeline.models import TokenUsage as TokenUsage
    from pipeline.models import ToolCallDelta as ToolCallDelta
    from pipeline.models import ToolCallError as ToolCallError
    from pipeline.models import ToolCallErrorKind as ToolCallErrorKind
    from pipeline.models import ToolCallKind as ToolCallKind
    from pipeline.models import ToolInvocation as ToolInvocation
    from pipeline.models import ToolResult as ToolResult
    from pipeline.stage import Core as Core
    from pipeline.stage import chain as chain
    from pipeline.stage import drive as drive
    from pipeline.stage import operator_stream as operator_stream
