"""Converters, one per wire format: provider event dicts to :class:`pipeline.ChunkResponse`."""

from operators.adapter.detect import detect_framing, detect_wire_format
from operators.adapter.eventstream import EventStreamDecoder, decode_eventstream
from operators.convert._base import CallIndexer, IdFactory, new_call_id
from operators.convert.anthropic import AnthropicConverter, convert_anthropic
from operators.convert.cohere import CohereConverter, convert_cohere
from operators.convert.gemini import GeminiConverter, convert_gemini
from operators.convert.openai_chat import OpenAIChatConverter, convert_openai_chat
from operators.convert.openai_responses import OpenAIResponsesConverter, convert_openai_responses

__all__ = [
    "AnthropicConverter",
    "CallIndexer",
    "CohereConverter",
    "EventStreamDecoder",
    "GeminiConverter",
    "IdFactory",
    "OpenAIChatConverter",
    "OpenAIResponsesConverter",
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
