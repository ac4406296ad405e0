"""Wire encoders: sans-IO cores from pipeline items to a wire format.

Module: :mod:`~operators.encode.openai_chat` (OpenAI Chat Completions chunks and SSE, for the proxy and
``replay --output openai-sse``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from operators.encode.openai_chat import OpenAIChunkEncoder as OpenAIChunkEncoder
    from operators.encode.openai_chat import encode_openai_chat as encode_openai_chat
    from operators.encode.openai_chat import sse_line as sse_line

__all__ = ["OpenAIChunkEncoder", "encode_openai_chat", "sse_line"]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.encode.openai_chat": (
            "OpenAIChunkEncoder",
            "encode_openai_chat",
            "sse_line",
        ),
    },
)
