"""streamfold's stages, in pipeline order; each is a synchronous core plus its async operator.

=================  ===========================================  ===========================================
stage              operator                                     core
=================  ===========================================  ===========================================
adapter            ``decode_sse``, ``decode_jsonl``,            ``SSEDecoder``, ``JSONLinesDecoder``,
                   ``parse_events``, ``sse_events``, sources    ``EventParser``, ``EventStreamDecoder``
converter          ``convert_openai_chat``, ``convert_openai_   ``OpenAIChatConverter``, ...
                   responses``, ``convert_anthropic``,
                   ``convert_gemini``, ``convert_cohere``,
                   ``convert_bedrock_converse``
                   ``convert_ollama``
rewriter           ``rewrite_delimiters``                       ``DelimiterRewriter``
splitter           ``split_arguments``                          ``ArgumentSplitter``, ``JSONStreamParser``
emitter            ``emit_segments``                            ``SegmentEmitter``
folder             ``fold_invocations``                         ``InvocationFolder``
re-encoder         ``encode_openai_chat``                       ``OpenAIChunkEncoder``
=================  ===========================================  ===========================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.adapter.sources": (
            "from_bytes",
            "from_dicts",
            "from_file",
            "from_httpx",
            "from_sdk",
            "provider_events",
        ),
        "operators.adapter.jsonl": (
            "JSONLinesDecoder",
            "decode_jsonl",
        ),
        "operators.adapter.sse": (
            "EventParser",
            "ServerSentEvent",
            "SSEDecoder",
            "decode_sse",
            "parse_events",
            "sse_events",
        ),
        "operators.arguments.splitter": (
            "ArgumentSplitter",
            "JSONStreamParser",
            "split_arguments",
        ),
        "operators.adapter.detect": (
            "detect_framing",
            "detect_wire_format",
        ),
        "operators.adapter.eventstream": (
            "EventStreamDecoder",
            "decode_eventstream",
        ),
        "operators.convert": (
            "AnthropicConverter",
            "BedrockConverseConverter",
            "CohereConverter",
            "GeminiConverter",
            "OllamaConverter",
            "OpenAIChatConverter",
            "OpenAIResponsesConverter",
            "convert_anthropic",
            "convert_bedrock_converse",
            "convert_cohere",
            "convert_gemini",
            "convert_ollama",
            "convert_openai_chat",
            "convert_openai_responses",
        ),
        "operators.delimiters": (
            "FORMATS",
            "DelimiterRewriter",
            "get_format",
            "register_format",
            "rewrite_delimiters",
        ),
        "operators.encode.openai_chat": (
            "OpenAIChunkEncoder",
            "encode_openai_chat",
        ),
        "operators.invocations": (
            "InvocationFolder",
            "ToolSchemas",
            "fold_invocations",
        ),
        "operators.segments": (
            "DEFAULT_FILE_TOOLS",
            "FileTool",
            "SegmentEmitter",
            "emit_segments",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.adapter.detect import detect_framing as detect_framing
    from operators.adapter.detect import detect_wire_format as detect_wire_format
    from operators.adapter.eventstream import EventStreamDecoder as EventStreamDecoder
    from operators.adapter.eventstream import decode_eventstream as decode_eventstream
    from operators.adapter.jsonl import JSONLinesDecoder as JSONLinesDecoder
    from operators.adapter.jsonl import decode_jsonl as decode_jsonl
    from operators.adapter.sources import from_bytes as from_bytes
    from operators.adapter.sources import from_dicts as from_dicts
    from operators.adapter.sources import from_file as from_file
    from operators.adapter.sources import from_httpx as from_httpx
    from operators.adapter.sources import from_sdk as from_sdk
    from operators.adapter.sources import provider_events as provider_events
    from operators.adapter.sse import EventParser as EventParser
    from operators.adapter.sse import ServerSentEvent as ServerSentEvent
    from operators.adapter.sse import SSEDecoder as SSEDecoder
    from operators.adapter.sse import decode_sse as decode_sse
    from operators.adapter.sse import parse_events as parse_events
    from operators.adapter.sse import sse_events as sse_events
    from operators.arguments.splitter import ArgumentSplitter as ArgumentSplitter
    from operators.arguments.splitter import JSONStreamParser as JSONStreamParser
    from operators.arguments.splitter import split_arguments as split_arguments
    from operators.convert import AnthropicConverter as AnthropicConverter
    from operators.convert import BedrockConverseConverter as BedrockConverseConverter
    from operators.convert import CohereConverter as CohereConverter
    from operators.convert import GeminiConverter as GeminiConverter
    from operators.convert import OllamaConverter as OllamaConverter
    from operators.convert import OpenAIChatConverter as OpenAIChatConverter
    from operators.convert import OpenAIResponsesConverter as OpenAIResponsesConverter
    from operators.convert import convert_anthropic as convert_anthropic
    from operators.convert import convert_bedrock_converse as convert_bedrock_converse
    from operators.convert import convert_cohere as convert_cohere
    from operators.convert import convert_gemini as convert_gemini
    from operators.convert import convert_ollama as convert_ollama
    from operators.convert import convert_openai_chat as convert_openai_chat
    from operators.convert import convert_openai_responses as convert_openai_responses
    from operators.delimiters import FORMATS as FORMATS
    from operators.delimiters import DelimiterRewriter as DelimiterRewriter
    from operators.delimiters import get_format as get_format
    from operators.delimiters import register_format as register_format
    from operators.delimiters import rewrite_delimiters as rewrite_delimiters
    from operators.encode.openai_chat import OpenAIChunkEncoder as OpenAIChunkEncoder
    from operators.encode.openai_chat import encode_openai_chat as encode_openai_chat
    from operators.invocations import InvocationFolder as InvocationFolder
    from operators.invocations import ToolSchemas as ToolSchemas
    from operators.invocations import fold_invocations as fold_invocations
    from operators.segments import DEFAULT_FILE_TOOLS as DEFAULT_FILE_TOOLS
    from operators.segments import FileTool as FileTool
    from operators.segments import SegmentEmitter as SegmentEmitter
    from operators.segments import emit_segments as emit_segments
