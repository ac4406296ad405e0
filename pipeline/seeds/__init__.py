"""The seeds' synchronous API, a facade over the same cores as `pipeline.process`.

Modules: `handlers` (``StreamingResponseHandler`` & co), `schemas`
(tool schema formatters for OpenAI, Anthropic and Gemini).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "pipeline.seeds.handlers": (
            "PARSER_ENVIRONMENT_VARIABLE",
            "ApiToolCallStreamingResponseHandler",
            "ParsingStreamingResponseHandler",
            "PassThroughStreamingResponseHandler",
            "StreamingResponseHandler",
            "create_streaming_handler",
            "resolve_parser_name",
        ),
        "pipeline.seeds.schemas": (
            "AnthropicJsonSchemaFormatter",
            "GeminiJsonSchemaFormatter",
            "OpenAiJsonSchemaFormatter",
            "OpenAiResponsesJsonSchemaFormatter",
            "ToolDefinition",
            "anthropic_tool",
            "gemini_tool",
            "openai_responses_tool",
            "openai_tool",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from pipeline.seeds.handlers import PARSER_ENVIRONMENT_VARIABLE as PARSER_ENVIRONMENT_VARIABLE
    from pipeline.seeds.handlers import (
        ApiToolCallStreamingResponseHandler as ApiToolCallStreamingResponseHandler,
    )
    from pipeline.seeds.handlers import ParsingStreamingResponseHandler as ParsingStreamingResponseHandler
    from pipeline.seeds.handlers import (
        PassThroughStreamingResponseHandler as PassThroughStreamingResponseHandler,
    )
    from pipeline.seeds.handlers import StreamingResponseHandler as StreamingResponseHandler
    from pipeline.seeds.handlers import create_streaming_handler as create_streaming_handler
    from pipeline.seeds.handlers import resolve_parser_name as resolve_parser_name
    from pipeline.seeds.schemas import AnthropicJsonSchemaFormatter as AnthropicJsonSchemaFormatter
    from pipeline.seeds.schemas import GeminiJsonSchemaFormatter as GeminiJsonSchemaFormatter
    from pipeline.seeds.schemas import OpenAiJsonSchemaFormatter as OpenAiJsonSchemaFormatter
    from pipeline.seeds.schemas import (
        OpenAiResponsesJsonSchemaFormatter as OpenAiResponsesJsonSchemaFormatter,
    )
    from pipeline.seeds.schemas import ToolDefinition as ToolDefinition
    from pipeline.seeds.schemas import anthropic_tool as anthropic_tool
    from pipeline.seeds.schemas import gemini_tool as gemini_tool
    from pipeline.seeds.schemas import openai_responses_tool as openai_responses_tool
    from pipeline.seeds.schemas import openai_tool as openai_tool
