"""Wire encoders: sans-IO cores from pipeline items to a wire format.

Modules: :mod:`~operators.encode.openai_chat` (OpenAI Chat Completions chunks and SSE, for the proxy and
``replay --output openai-sse``), :mod:`~operators.encode.responses` (the OpenAI Responses stream) and
:mod:`~operators.encode.anthropic` (the Anthropic Messages stream), for the proxy's other front doors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from operators.encode.anthropic import MessagesEncoder as MessagesEncoder
    from operators.encode.openai_chat import OpenAIChunkEncoder as OpenAIChunkEncoder
    from operators.encode.openai_chat import encode_openai_chat as encode_openai_chat
    from operators.encode.openai_chat import fold_openai_completion as fold_openai_completion
    from operators.encode.openai_chat import sse_line as sse_line
    from operators.encode.responses import ResponsesEncoder as ResponsesEncoder

__all__ = [
    "MessagesEncoder",
    "OpenAIChunkEncoder",
    "ResponsesEncoder",
    "encode_openai_chat",
    "fold_openai_completion",
    "sse_line",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.encode.openai_chat": (
            "OpenAIChunkEncoder",
            "encode_openai_chat",
            "fold_openai_completion",
            "sse_line",
        ),
        "operators.encode.responses": ("ResponsesEncoder",),
        "operators.encode.anthropic": ("MessagesEncoder",),
    },
)
