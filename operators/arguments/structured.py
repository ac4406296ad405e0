"""Structured output streamed: JSON written as a response's content, parsed as it arrives.

JSON mode, a response schema or "structured output" make the model write one JSON value as its text.
`ContentJSONParser` runs that text through the same incremental parser as tool arguments
(`operators.arguments._jsonstream.JSONStreamParser`, O(1) amortised work per character) and gives
the same path-addressed events: ``ArgumentDelta(path, text)`` while a string streams,
``ArgumentValue(path, value)`` as each value completes (at every depth, inner values first, so a consumer
knows which field just completed), ``ArgumentValue((), root)`` when the whole value is complete, and
``ArgumentError`` (``invalid_json`` at its offset, ``truncated``, ``too_large``) instead of raising.

Policies: the text must be the JSON value alone (leading and trailing whitespace allowed). A Markdown
code fence around it (```` ```json ````) is ``invalid_json`` at offset 0, as is any other prose: ask the
provider for JSON mode or structured output. Reasoning is not parsed (only ``content``); run
`operators.delimiters.reasoning_tags.ReasoningTagSplitter` first for ``<think>`` models.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Final

from aiostream import pipable_operator

from operators.arguments._jsonstream import DEFAULT_MAX_SIZE, MAX_DEPTH, JSONStreamParser
from pipeline._options import check_count
from pipeline.models import ArgumentEvent, ChunkResponse
from pipeline.stage import operator_stream

__all__ = ["DEFAULT_MAX_OUTPUT_SIZE", "ContentJSONParser", "parse_content_json"]

DEFAULT_MAX_OUTPUT_SIZE: Final = DEFAULT_MAX_SIZE
"""Characters of JSON content accepted per response (32 Mi) before ``too_large``."""


class ContentJSONParser:
    """Sans-IO core of `parse_content_json`: ``feed(chunk)`` / ``finish()`` return argument events.

    Args:
        max_size: cap, in characters, of one response's JSON text (``too_large`` beyond it).
        field_depth: completed values at most this deep are reported (default: every depth up to the
            nesting cap); 1 reports only the root object's members.

    A chunk with ``is_complete=True`` ends the response (its final events: the root, or ``truncated``);
    the next response starts with a fresh parser. ``finish()`` does the same for a stream that ends
    without a complete chunk. Offsets count characters of the response's content.
    """

    __slots__ = ("_field_depth", "_max_size", "_parser", "_started")

    def __init__(self, *, max_size: int = DEFAULT_MAX_OUTPUT_SIZE, field_depth: int = MAX_DEPTH) -> None:
        self._max_size = check_count("max_size", max_size, minimum=0)
        self._field_depth = check_count("field_depth", field_depth, minimum=1)
        self._parser = self._new_parser()
        self._started = False

    def _new_parser(self) -> JSONStreamParser:
        return JSONStreamParser(self._max_size, report_depth=self._field_depth)

    def feed(self, chunk: ChunkResponse) -> list[ArgumentEvent]:
        """The events ``chunk.content`` streamed or completed (and the final ones if it ends the response)."""
        events = self.feed_text(chunk.content) if chunk.content else []
        if chunk.is_complete:
            events.extend(self.finish())
        return events

    def feed_text(self, text: str) -> list[ArgumentEvent]:
        """The events the next piece of the JSON text streamed or completed."""
        self._started = True
        return self._parser.feed(text)

    def finish(self) -> list[ArgumentEvent]:
        """The response has ended: the root if it completes here, else why it is incomplete. A response with
        no content at all gives nothing."""
        parser, self._parser = self._parser, self._new_parser()
        started, self._started = self._started, False
        return parser.finish() if started else []


@pipable_operator
def parse_content_json(
    source: AsyncIterable[ChunkResponse],
    *,
    max_size: int = DEFAULT_MAX_OUTPUT_SIZE,
    field_depth: int = MAX_DEPTH,
) -> AsyncIterator[ArgumentEvent]:
    """Path-addressed events of the JSON value written as the responses' content."""
    return operator_stream(source, ContentJSONParser(max_size=max_size, field_depth=field_depth))
