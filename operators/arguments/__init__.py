"""Stage 4, the argument-chunk splitter: one incremental JSON parser per tool call.

Module: `splitter` (the core and its operator); the parser itself is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.arguments.splitter": (
            "DEFAULT_MAX_ARGUMENT_SIZE",
            "MAX_DEPTH",
            "ArgumentSplitter",
            "JSONStreamParser",
            "SplitChunk",
            "split_arguments",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.arguments.splitter import DEFAULT_MAX_ARGUMENT_SIZE as DEFAULT_MAX_ARGUMENT_SIZE
    from operators.arguments.splitter import MAX_DEPTH as MAX_DEPTH
    from operators.arguments.splitter import ArgumentSplitter as ArgumentSplitter
    from operators.arguments.splitter import JSONStreamParser as JSONStreamParser
    from operators.arguments.splitter import SplitChunk as SplitChunk
    from operators.arguments.splitter import split_arguments as split_arguments
