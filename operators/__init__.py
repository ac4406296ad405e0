"""streamfold's stages, in pipeline order; each is a synchronous core plus its async operator.

=================  ===========================================  ===========================================
stage              operator                                     core
=================  ===========================================  ===========================================
adapter            ``decode_sse``, ``decode_jsonl``,            ``SSEDecoder``, ``JSONLinesDecoder``,
                   ``parse_events``, ``sse_events``, sources    ``EventParser``, ``EventStreamDecoder``
converter          ``convert_openai_chat``, ``convert_openai_   ``OpenAIChatConverter``, ...
                   responses``, ``convert_anthropic``,
                   ``convert_gemini``, ``convert_cohere``
rewriter           ``rewrite_delimiters``                       ``DelimiterRewriter``
splitter           ``split_arguments``                          ``ArgumentSplitter``, ``JSONStreamParser``
emitter            ``emit_segments``                            ``SegmentEmitter``
folder             ``fold_invocations``                         ``InvocationFolder``
re-encoder         ``encode_openai_chat``                       ``OpenAIChunkEncoder``
=================  ===========================================  ===========================================
"""

from operators.adapter.sources import from_bytes, from_dicts, from_file, from_httpx, from_sdk, provider_events
from operators.adapter.sse import (
    EventParser,
    JSONLinesDecoder,
    ServerSentEvent,
    SSEDecoder,
    decode_jsonl,
    decode_sse,
    parse_events,
    sse_events,
)
from operators.arguments.splitter import ArgumentSplitter, JSONStreamParser, split_arguments
from operators.convert import (
    AnthropicConverter,
    CohereConverter,
    EventStreamDecoder,
    GeminiConverter,
    OpenAIChatConverter,
    OpenAIResponsesConverter,
    convert_anthropic,
    convert_cohere,
    convert_gemini,
    convert_openai_chat,
    convert_openai_responses,
    decode_eventstream,
    detect_framing,
    detect_wire_format,
)
from operators.delimiters import FORMATS, DelimiterRewriter, get_format, register_format, rewrite_delimiters
from operators.encode.openai_chat import OpenAIChunkEncoder, encode_openai_chat, fold_openai_completion
from operators.invocations import InvocationFolder, ToolSchemas, fold_invocations
from operators.segments import DEFAULT_FILE_TOOLS, FileTool, SegmentEmitter, emit_segments

__all__ = [
    "DEFAULT_FILE_TOOLS",
    "FORMATS",
    "AnthropicConverter",
    "ArgumentSplitter",
    "CohereConverter",
    "DelimiterRewriter",
    "EventParser",
    "EventStreamDecoder",
    "FileTool",
    "GeminiConverter",
    "InvocationFolder",
    "JSONLinesDecoder",
    "JSONStreamParser",
    "OpenAIChatConverter",
    "OpenAIChunkEncoder",
    "OpenAIResponsesConverter",
    "SSEDecoder",
    "SegmentEmitter",
    "ServerSentEvent",
    "ToolSchemas",
    "convert_anthropic",
    "convert_cohere",
    "convert_gemini",
    "convert_openai_chat",
    "convert_openai_responses",
    "decode_eventstream",
    "decode_jsonl",
    "decode_sse",
    "detect_framing",
    "detect_wire_format",
    "emit_segments",
    "encode_openai_chat",
    "fold_invocations",
    "fold_openai_completion",
    "from_bytes",
    "from_dicts",
    "from_file",
    "from_httpx",
    "from_sdk",
    "get_format",
    "parse_events",
    "provider_events",
    "register_format",
    "rewrite_delimiters",
    "split_arguments",
    "sse_events",
]
