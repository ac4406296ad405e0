"""The argument-chunk splitter: each tool call's arguments text, parsed incrementally as it streams.

`split_arguments` turns each chunk with tool calls into a `SplitChunk`: the chunk, and per
tool-call delta the `ArgumentEvent`s its ``arguments_delta`` streamed or completed, from one
`JSONStreamParser` per call (O(1) amortised work per character: no re-parsing of the accumulated
text)::

    ToolCallDelta(0, "call_1", "write_file", '{"path": "a.py", "content": "print(')
        events: ArgumentDelta(("path",), "a.py"), ArgumentValue(("path",), "a.py"),
                ArgumentDelta(("content",), "print(")
    ToolCallDelta(0, arguments_delta='1)\\n"}', finished=True)
        events: ArgumentDelta(("content",), "1)\\n"), ArgumentValue(("content",), "print(1)\\n"),
                ArgumentValue((), {"path": "a.py", "content": "print(1)\\n"})

Arguments must be I-JSON (RFC 7493), so that every value encodes back to JSON and UTF-8 downstream: a lone
surrogate (``"\\ud800"`` not followed by a low surrogate escape, a lone ``"\\udc00"``) and a number that
overflows a double (``1e999``) are ``invalid_json`` at their offset, like any other syntax error.

Calls of kind ``custom`` carry free text, not JSON: it streams as the string at path ``("input",)`` and
completes as ``{"input": text}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Final

import msgspec
from aiostream import pipable_operator

from operators.arguments._jsonstream import DEFAULT_MAX_SIZE, MAX_DEPTH, JSONStreamParser
from pipeline._options import check_count
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentEvent,
    ArgumentValue,
    ChunkResponse,
    SplitChunk,
    TextJoiner,
    ToolCallDelta,
    ToolCallKind,
)
from pipeline.stage import operator_stream

__all__ = [
    "DEFAULT_MAX_ARGUMENT_SIZE",
    "MAX_DEPTH",
    "ArgumentSplitter",
    "JSONStreamParser",
    "SplitChunk",
    "split_arguments",
]

DEFAULT_MAX_ARGUMENT_SIZE: Final = DEFAULT_MAX_SIZE
"""Characters of arguments text accepted per call (32 Mi) before the call reports ``too_large``."""

_INPUT_PATH: Final = ("input",)


class _CustomInputParser:
    """The free-text input of a ``custom`` call, as the string value at ``("input",)``."""

    __slots__ = ("_consumed", "_dead", "_keep", "_max_size", "_text")

    def __init__(self, max_size: int, keep: bool) -> None:
        self._max_size = max_size
        self._keep = keep
        self._consumed = 0
        self._text = TextJoiner()
        self._dead = False

    def feed(self, text: str) -> list[ArgumentEvent]:
        if self._dead or not text:
            return []
        start = self._consumed
        self._consumed = start + len(text)
        events: list[ArgumentEvent] = []
        too_large = self._consumed > self._max_size
        if too_large:
            text = text[: max(self._max_size - start, 0)]
        if text:
            if self._keep:
                self._text.append(text)
            events.append(ArgumentDelta(_INPUT_PATH, text))
        if too_large:
            limit = self._max_size
            message = f"the custom tool input is longer than the limit of {limit} characters"
            events.append(ArgumentError("too_large", message, limit))
            self._dead = True
            self._text = TextJoiner()
        return events

    def finish(self) -> list[ArgumentEvent]:
        if self._dead:
            return []
        self._dead = True
        if not self._keep:
            return [ArgumentValue((), None)]
        text = self._text.take()
        return [ArgumentValue(_INPUT_PATH, text), ArgumentValue((), {"input": text})]


_Parser = JSONStreamParser | _CustomInputParser


class ArgumentSplitter:
    """Sans-IO core of `split_arguments`: ``feed(chunk)`` and ``finish()`` return chunks.

    One parser per call index, chosen by the ``kind`` of the call's first delta (``custom``: free text;
    ``function`` and ``server``: JSON). A chunk with tool calls comes back as a `SplitChunk` with
    the events of each delta; a ``finished`` delta also gets the parser's final events (the complete root
    value, or ``truncated``). A chunk with ``is_complete=True`` ends the response: calls still unfinished
    are finished in that chunk, and the next response starts with fresh parsers. ``finish()`` finishes the
    calls still open at the end of the stream in one extra chunk, so every call's outcome is reported.
    Chunks without tool calls pass through as they are.

    Args:
        max_argument_size: characters of one call's arguments accepted before ``too_large``.
        keep_values: False streams the arguments without building their values (flat memory for
            consumers of segments only): the one ``ArgumentValue`` of a call is ``((), None)`` when its
            root is complete (see `JSONStreamParser`).
    """

    def __init__(
        self, *, max_argument_size: int = DEFAULT_MAX_ARGUMENT_SIZE, keep_values: bool = True
    ) -> None:
        self._max_size = check_count("max_argument_size", max_argument_size, minimum=0)
        self._keep_values = keep_values
        self._parsers: dict[int, _Parser] = {}
        """The parsers of the calls still open, by call index."""
        self._kinds: dict[int, ToolCallKind] = {}
        self._finished: set[int] = set()

    def passes(self, chunk: ChunkResponse) -> bool:
        """Whether ``feed`` would pass ``chunk`` on alone and keep nothing of it: a chunk without tool calls
        that does not end the response (the `pipeline.stage.Core` pass-through contract)."""
        return not chunk.tool_calls and not chunk.is_complete

    def feed(self, chunk: ChunkResponse) -> list[ChunkResponse | SplitChunk]:
        """``chunk``, with the argument events of each of its tool-call deltas if it has any."""
        deltas = chunk.tool_calls
        if chunk.is_complete:
            return [self._complete(chunk)]
        if not deltas:
            return [chunk]
        if len(deltas) == 1:
            return [SplitChunk(chunk, (tuple(self.delta_events(deltas[0])),))]
        return [SplitChunk(chunk, tuple(tuple(self.delta_events(delta)) for delta in deltas))]

    def finish(self) -> list[ChunkResponse | SplitChunk]:
        """End of stream: one chunk finishing every call that never got ``finished=True``, if any."""
        closing, events = self._finish_open_calls()
        return [SplitChunk(ChunkResponse(tool_calls=closing), events)] if closing else []

    def _complete(self, chunk: ChunkResponse) -> ChunkResponse | SplitChunk:
        """The last chunk of a response: its own deltas, then every call still open, finished."""
        deltas = chunk.tool_calls or []
        events = tuple(tuple(self._events(delta)) for delta in deltas)
        closing, closing_events = self._finish_open_calls()
        self._finished.clear()
        if closing:
            chunk = msgspec.structs.replace(chunk, tool_calls=[*deltas, *closing])
        return SplitChunk(chunk, events + closing_events) if chunk.tool_calls else chunk

    def delta_events(self, delta: ToolCallDelta) -> list[ArgumentEvent]:
        """The argument events of one tool-call delta of a chunk that does not end the response: what
        `feed` gives it in the chunk's `SplitChunk` (an emitter given this splitter asks for them
        itself)."""
        parser = self._parsers.get(delta.index)
        text = delta.arguments_delta
        if parser is not None and text and not delta.finished:  # the usual delta of a streaming call
            return parser.feed(text)
        return self._events(delta)

    def arguments_feed(self, index: int) -> Callable[[str], list[ArgumentEvent]] | None:
        """What `delta_events` calls for a delta of the open call at ``index`` that only brings more of
        its arguments text (not its end): that call's parser's ``feed``, the same until the call is
        finished; ``None`` when no call is open at ``index``."""
        parser = self._parsers.get(index)
        return None if parser is None else parser.feed

    def _events(self, delta: ToolCallDelta) -> list[ArgumentEvent]:
        index = delta.index
        parser = self._parsers.get(index)
        if parser is None:
            if index in self._finished:
                return []
            parser = self._parsers[index] = self._new_parser(delta.kind)
            self._kinds[index] = delta.kind
        events = parser.feed(delta.arguments_delta) if delta.arguments_delta else []
        if delta.finished:
            self._finished.add(index)
            del self._parsers[index], self._kinds[index]
            events.extend(parser.finish())
        return events

    def _new_parser(self, kind: ToolCallKind) -> _Parser:
        if kind == "custom":
            return _CustomInputParser(self._max_size, self._keep_values)
        return JSONStreamParser(self._max_size, keep_values=self._keep_values)

    def _finish_open_calls(self) -> tuple[list[ToolCallDelta], tuple[tuple[ArgumentEvent, ...], ...]]:
        """Finish every call still open, in index order: ``finished`` deltas and their final events."""
        closing: list[ToolCallDelta] = []
        events: list[tuple[ArgumentEvent, ...]] = []
        for index in sorted(self._parsers):
            events.append(tuple(self._parsers[index].finish()))
            self._finished.add(index)
            closing.append(ToolCallDelta(index, finished=True, kind=self._kinds[index]))
        self._parsers.clear()
        self._kinds.clear()
        return closing, tuple(events)


@pipable_operator
def split_arguments(
    source: AsyncIterable[ChunkResponse],
    *,
    max_argument_size: int = DEFAULT_MAX_ARGUMENT_SIZE,
    keep_values: bool = True,
) -> AsyncIterator[ChunkResponse | SplitChunk]:
    """Give each chunk with tool calls the argument events its deltas streamed, as a `SplitChunk`.

    The events are string deltas, complete values and errors; calls left open at the end are finished in
    one extra chunk.

    Args:
        source: the chunks of a converter.
        max_argument_size: as `ArgumentSplitter` takes it.
        keep_values: as `ArgumentSplitter` takes it.
    """
    splitter = ArgumentSplitter(max_argument_size=max_argument_size, keep_values=keep_values)
    return operator_stream(source, splitter)
