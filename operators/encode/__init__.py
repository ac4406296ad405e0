"""Wire encoders: sans-IO cores from pipeline items to a wire format.

Modules: `openai_chat` (OpenAI Chat Completions chunks and SSE, for the proxy and
``replay --output openai-sse``); `vercel` (the Vercel AI SDK UI message stream, for
``useChat``); `agui` (AG-UI events); `protocols`
(streamfold's own SSE, and `encoder_for`, which picks a protocol's core, media type and headers);
`responses` (the OpenAI Responses stream) and `anthropic` (the
Anthropic Messages stream), for the proxy's other front doors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.encode.openai_chat": (
            "OpenAIChunkEncoder",
            "encode_openai_chat",
            "sse_line",
        ),
        "operators.encode.agui": ("AGUIEncoder", "encode_agui"),
        "operators.encode.protocols": (
            "StreamfoldSSEEncoder",
            "WireEncoding",
            "encode_streamfold",
            "encoder_for",
        ),
        "operators.encode.vercel": ("VercelUIEncoder", "encode_vercel"),
        "operators.encode.responses": ("ResponsesEncoder",),
        "operators.encode.anthropic": ("MessagesEncoder",),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.encode.agui import AGUIEncoder as AGUIEncoder
    from operators.encode.agui import encode_agui as encode_agui
    from operators.encode.anthropic import MessagesEncoder as MessagesEncoder
    from operators.encode.openai_chat import OpenAIChunkEncoder as OpenAIChunkEncoder
    from operators.encode.openai_chat import encode_openai_chat as encode_openai_chat
    from operators.encode.openai_chat import sse_line as sse_line
    from operators.encode.protocols import StreamfoldSSEEncoder as StreamfoldSSEEncoder
    from operators.encode.protocols import WireEncoding as WireEncoding
    from operators.encode.protocols import encode_streamfold as encode_streamfold
    from operators.encode.protocols import encoder_for as encoder_for
    from operators.encode.responses import ResponsesEncoder as ResponsesEncoder
    from operators.encode.vercel import VercelUIEncoder as VercelUIEncoder
    from operators.encode.vercel import encode_vercel as encode_vercel
