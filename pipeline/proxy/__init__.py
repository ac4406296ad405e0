"""The OpenAI-compatible rewriting proxy (``streamfold proxy``): delimiter tool calls become ``tool_calls``.

Modules: `rewriter` (the sans-IO stream rewriter) and `app`
(the HTTP app; needs the ``server`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "pipeline.proxy.app": (
            "DEFAULT_KEEPALIVE_EXPIRY",
            "DEFAULT_MAX_CONNECTIONS",
            "DEFAULT_MAX_REQUEST_BYTES",
            "DEFAULT_SERVER_KEEP_ALIVE",
            "DEFAULT_TIMEOUT",
            "DEFAULT_TOOL_FORMAT",
            "create_app",
            "serve",
        ),
        "pipeline.proxy.rewriter": (
            "DEFAULT_MAX_EVENT_SIZE",
            "DEFAULT_MAX_RESPONSE_BYTES",
            "ChatStreamRewriter",
            "error_body",
            "fold_openai_completion",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from pipeline.proxy.app import DEFAULT_KEEPALIVE_EXPIRY as DEFAULT_KEEPALIVE_EXPIRY
    from pipeline.proxy.app import DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS
    from pipeline.proxy.app import DEFAULT_MAX_REQUEST_BYTES as DEFAULT_MAX_REQUEST_BYTES
    from pipeline.proxy.app import DEFAULT_SERVER_KEEP_ALIVE as DEFAULT_SERVER_KEEP_ALIVE
    from pipeline.proxy.app import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
    from pipeline.proxy.app import DEFAULT_TOOL_FORMAT as DEFAULT_TOOL_FORMAT
    from pipeline.proxy.app import create_app as create_app
    from pipeline.proxy.app import serve as serve
    from pipeline.proxy.rewriter import DEFAULT_MAX_EVENT_SIZE as DEFAULT_MAX_EVENT_SIZE
    from pipeline.proxy.rewriter import DEFAULT_MAX_RESPONSE_BYTES as DEFAULT_MAX_RESPONSE_BYTES
    from pipeline.proxy.rewriter import ChatStreamRewriter as ChatStreamRewriter
    from pipeline.proxy.rewriter import error_body as error_body
    from pipeline.proxy.rewriter import fold_openai_completion as fold_openai_completion
