"""The delimiter-token rewriter: tool calls written into the text between delimiter tokens become
`ToolCallDelta`s; every other character passes through.

``rewrite_delimiters(source, "kimi_k2")`` is the operator, `DelimiterRewriter` its sans-IO core,
`FORMATS` the formats by name. The modules: ``rewriter`` (the core and its output packing),
``_lexer`` (the lexer engine; how the lexers work and how to add a format), ``_families`` and
``_wrapped`` / ``_invoke`` (building blocks), ``_registry`` (`FORMATS`), ``_scan`` (markers, JSON and
XML-style arguments), ``formats/`` (one module per family of models, registered on import).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Collection, Mapping
from typing import TYPE_CHECKING, Any

from aiostream import pipable_operator

from operators.delimiters import formats as _formats  # registers every format
from operators.delimiters._families import SectionLexer, TaggedCallLexer
from operators.delimiters._lexer import DEFAULT_MAX_BUFFERED_CHARS, FormatLexer
from operators.delimiters._registry import FORMATS, get_format, register_format
from operators.delimiters.auto import AutoDelimiterRewriter, delimiter_rewriter
from operators.delimiters.detect import detect_tool_format
from operators.delimiters.rewriter import DelimiterRewriter
from pipeline.models import IdFactory
from pipeline.stage import operator_stream as _operator_stream

if TYPE_CHECKING:
    from pipeline.models import ChunkResponse

__all__ = [
    "DEFAULT_MAX_BUFFERED_CHARS",
    "FORMATS",
    "AutoDelimiterRewriter",
    "DelimiterRewriter",
    "FormatLexer",
    "SectionLexer",
    "TaggedCallLexer",
    "delimiter_rewriter",
    "detect_tool_format",
    "get_format",
    "register_format",
    "rewrite_delimiters",
]

del _formats


@pipable_operator
def rewrite_delimiters(
    source: AsyncIterable[ChunkResponse],
    format: str,
    *,
    id_factory: IdFactory | None = None,
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    max_buffered_chars: int = DEFAULT_MAX_BUFFERED_CHARS,
    offered_tools: Collection[str] | None = None,
) -> AsyncIterator[ChunkResponse]:
    """Move the tool calls a model writes into ``content`` and ``reasoning`` to ``tool_calls``.

    Args:
        source: the converter's chunks.
        format: the format's name (`FORMATS`), or ``"auto"`` to tell it from the model's markers
            (`AutoDelimiterRewriter`).
        id_factory: makes the ids of the calls found (`new_call_id` by default).
        tool_schemas: tool name -> JSON schema of its parameters, to type XML-style values.
        max_buffered_chars: cap, in characters, of what one call holds back (see `DelimiterRewriter`).
        offered_tools: the names of the tools the request offers; a call to another stays text.
            ``None``: any name.

    Raises:
        ConfigurationError: ``format`` is not a format, or an option is out of range.
    """
    core = delimiter_rewriter(
        format,
        id_factory=id_factory,
        tool_schemas=tool_schemas,
        max_buffered_chars=max_buffered_chars,
        offered_tools=offered_tools,
    )
    return _operator_stream(source, core)
