"""streamfold's data model and runtime: chunk, segment and invocation types, composition, fan-out, CLI.

The stages themselves are in :mod:`operators`; :func:`process` chains them for a provider's stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

if TYPE_CHECKING:
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
    from pipeline.seeds.handlers import (
        ApiToolCallStreamingResponseHandler as ApiToolCallStreamingResponseHandler,
    )
    from pipeline.seeds.handlers import ParsingStreamingResponseHandler as ParsingStreamingResponseHandler
    from pipeline.seeds.handlers import (
        PassThroughStreamingResponseHandler as PassThroughStreamingResponseHandler,
    )
    from pipeline.seeds.handlers import StreamingResponseHandler as StreamingResponseHandler
    from pipeline.seeds.handlers import create_streaming_handler as create_streaming_handler
    from pipeline.seeds.schemas import ToolDefinition as ToolDefinition
    from pipeline.seeds.schemas import anthropic_tool as anthropic_tool
    from pipeline.seeds.schemas import gemini_tool as gemini_tool
    from pipeline.seeds.schemas import openai_responses_tool as openai_responses_tool
    from pipeline.seeds.schemas import openai_tool as openai_tool

__all__ = [
    "PROVIDERS",
    "ApiToolCallStreamingResponseHandler",
    "ArgumentDelta",
    "ArgumentError",
    "ArgumentErrorKind",
    "ArgumentEvent",
    "ArgumentValue",
    "ChunkResponse",
    "ConfigurationError",
    "ConverterError",
    "Hub",
    "HubClosedError",
    "HubStatistics",
    "JSONPath",
    "ParsingStreamingResponseHandler",
    "PassThroughStreamingResponseHandler",
    "PipelineEvent",
    "Policy",
    "ProviderError",
    "ReplayUnavailableError",
    "ResponseEnd",
    "SegmentEvent",
    "SegmentEventType",
    "SegmentType",
    "StreamDecodeError",
    "StreamfoldError",
    "StreamingResponseHandler",
    "SubscriberError",
    "SubscriberStatistics",
    "Subscription",
    "TokenUsage",
    "ToolCallDelta",
    "ToolCallError",
    "ToolCallErrorKind",
    "ToolCallKind",
    "ToolDefinition",
    "ToolInvocation",
    "ToolResult",
    "anthropic_tool",
    "as_observable",
    "broadcast",
    "create_streaming_handler",
    "fan_out",
    "gemini_tool",
    "observe",
    "openai_responses_tool",
    "openai_tool",
    "process",
    "to_chunks",
    "to_observable",
]

__getattr__, __dir__ = lazy_exports(
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
        "pipeline.seeds.handlers": (
            "ApiToolCallStreamingResponseHandler",
            "ParsingStreamingResponseHandler",
            "PassThroughStreamingResponseHandler",
            "StreamingResponseHandler",
            "create_streaming_handler",
        ),
        "pipeline.seeds.schemas": (
            "ToolDefinition",
            "anthropic_tool",
            "gemini_tool",
            "openai_responses_tool",
            "openai_tool",
        ),
    },
)
