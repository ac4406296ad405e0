"""Converters, one per wire format: provider event dicts to `pipeline.ChunkResponse`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.convert._base": (
            "IdFactory",
            "new_call_id",
        ),
        "operators.convert.anthropic": (
            "AnthropicConverter",
            "convert_anthropic",
        ),
        "operators.convert.bedrock_converse": (
            "BedrockConverseConverter",
            "convert_bedrock_converse",
        ),
        "operators.convert.cohere": (
            "CohereConverter",
            "convert_cohere",
        ),
        "operators.convert.gemini": (
            "GeminiConverter",
            "convert_gemini",
        ),
        "operators.convert.ollama": (
            "OllamaConverter",
            "convert_ollama",
        ),
        "operators.convert.openai_chat": (
            "OpenAIChatConverter",
            "convert_openai_chat",
        ),
        "operators.convert.openai_responses": (
            "OpenAIResponsesConverter",
            "convert_openai_responses",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.convert._base import IdFactory as IdFactory
    from operators.convert._base import new_call_id as new_call_id
    from operators.convert.anthropic import AnthropicConverter as AnthropicConverter
    from operators.convert.anthropic import convert_anthropic as convert_anthropic
    from operators.convert.bedrock_converse import BedrockConverseConverter as BedrockConverseConverter
    from operators.convert.bedrock_converse import convert_bedrock_converse as convert_bedrock_converse
    from operators.convert.cohere import CohereConverter as CohereConverter
    from operators.convert.cohere import convert_cohere as convert_cohere
    from operators.convert.gemini import GeminiConverter as GeminiConverter
    from operators.convert.gemini import convert_gemini as convert_gemini
    from operators.convert.ollama import OllamaConverter as OllamaConverter
    from operators.convert.ollama import convert_ollama as convert_ollama
    from operators.convert.openai_chat import OpenAIChatConverter as OpenAIChatConverter
    from operators.convert.openai_chat import convert_openai_chat as convert_openai_chat
    from operators.convert.openai_responses import OpenAIResponsesConverter as OpenAIResponsesConverter
    from operators.convert.openai_responses import convert_openai_responses as convert_openai_responses
