"""``--tool-format auto`` of the proxy: `AutoDelimiterRewriter` under the
name the proxy has always used, and the detector (`operators.delimiters.detect`)."""

from __future__ import annotations

from operators.delimiters.auto import AutoDelimiterRewriter
from operators.delimiters.detect import MAX_HELD_CHARS, detect_tool_format, detected_formats

__all__ = ["MAX_HELD_CHARS", "AutoToolRewriter", "detect_tool_format", "detected_formats"]

AutoToolRewriter = AutoDelimiterRewriter
"""The proxy's name of `AutoDelimiterRewriter`."""
