"""streamfold's data model and runtime: chunk, segment and invocation types, composition, fan-out, CLI.

The stages themselves are in :mod:`operators`; :func:`process` chains them for a provider's stream.
"""

from pipeline.compose import PROVIDERS, process, to_chunks
from pipeline.errors import (
    ConfigurationError,
    ConverterError,
    HubClosedError,
    ProviderError,
    ReplayUnavailableError,
    StreamDecodeError,
    StreamfoldError,
    SubscriberError,
)
from pipeline.handlers import (
    ApiToolCallStreamingResponseHandler,
    ParsingStreamingResponseHandler,
    PassThroughStreamingResponseHandler,
    StreamingResponseHandler,
    create_streaming_handler,
)
from pipeline.hub import Hub, HubStatistics, Policy, SubscriberStatistics, Subscription, broadcast, fan_out
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentEvent,
    ArgumentValue,
    ChunkResponse,
    JSONPath,
    PipelineEvent,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolCallDelta,
    ToolCallError,
    ToolCallKind,
    ToolInvocation,
)
from pipeline.rx import as_observable, observe, to_observable
from pipeline.schemas import ToolDefinition, anthropic_tool, gemini_tool, openai_responses_tool, openai_tool

__all__ = [
    "PROVIDERS",
    "ApiToolCallStreamingResponseHandler",
    "ArgumentDelta",
    "ArgumentError",
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
    "ToolCallKind",
    "ToolDefinition",
    "ToolInvocation",
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
