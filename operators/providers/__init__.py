"""Converters, one per wire format: provider event dicts to :class:`pipeline.ChunkResponse`."""

from operators.providers._common import CallIndexer, IdFactory, new_call_id
from operators.providers.anthropic import AnthropicConverter, convert_anthropic
from operators.providers.bedrock import EventStreamDecoder, decode_eventstream
from operators.providers.cohere import CohereConverter, convert_cohere
from operators.providers.detect import WireFormat, detect_framing, detect_wire_format
from operators.providers.gemini import GeminiConverter, convert_gemini
from operators.providers.openai_chat import OpenAIChatConverter, convert_openai_chat
from operators.providers.openai_responses import OpenAIResponsesConverter, convert_openai_responses

__all__ = [
    "AnthropicConverter",
    "CallIndexer",
    "CohereConverter",
    "EventStreamDecoder",
    "GeminiConverter",
    "IdFactory",
    "OpenAIChatConverter",
    "OpenAIResponsesConverter",
    "WireFormat",
    "convert_anthropic",
    "convert_cohere",
    "convert_gemini",
    "convert_openai_chat",
    "convert_openai_responses",
    "decode_eventstream",
    "detect_framing",
    "detect_wire_format",
    "new_call_id",
]
