"""Stage 5, the segment emitter: chunks to text, reasoning, tool-call and file segments.

Module: `emitter` (the core and its operator); what it keeps open (runs, calls) is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline._lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "operators.segments.emitter": (
            "DEFAULT_FILE_TOOLS",
            "RAW_KEPT",
            "FileTool",
            "SegmentEmitter",
            "SegmentIdFactory",
            "Splitter",
            "emit_segments",
        ),
    },
)

if TYPE_CHECKING:  # written from the table by `python -m tests.test_public_surface`
    from operators.segments.emitter import DEFAULT_FILE_TOOLS as DEFAULT_FILE_TOOLS
    from operators.segments.emitter import RAW_KEPT as RAW_KEPT
    from operators.segments.emitter import FileTool as FileTool
    from operators.segments.emitter import SegmentEmitter as SegmentEmitter
    from operators.segments.emitter import SegmentIdFactory as SegmentIdFactory
    from operators.segments.emitter import Splitter as Splitter
    from operators.segments.emitter import emit_segments as emit_segments
