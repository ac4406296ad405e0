"""The segment emitter: chunks (after `operators.split_arguments`) to `SegmentEvent`s.

A segment is one run of text, reasoning, a tool call, or a file written or patched by a tool call::

    ChunkResponse(reasoning="Let me")      SEGMENT_START reasoning r0, SEGMENT_CONTENT r0 "Let me"
    ChunkResponse(content="Sure.")         SEGMENT_END r0, SEGMENT_START text t1, SEGMENT_CONTENT t1 "Sure."
    ToolCallDelta(0, "call_1", "get_weather", '{"city": "Pa')
                                           SEGMENT_END t1, SEGMENT_START tool_call call_1,
                                           SEGMENT_CONTENT call_1 '{"city": "Pa',
                                           SEGMENT_ARGUMENT ["city"] +"Pa"
    ToolCallDelta(0, arguments_delta='ris"}')
                                           SEGMENT_CONTENT '...', SEGMENT_ARGUMENT ["city"] +"ris",
                                           SEGMENT_ARGUMENT ["city"] = "Paris", SEGMENT_END call_1 {arguments}

A tool segment ends as soon as its arguments are complete (the root JSON value closed) or the provider
says the call is finished, whichever comes first: that is the earliest moment the call can be folded.
File tools (``write_file`` streams ``content``, ``patch_file`` streams ``patch``; see
`FileTool`) become file segments whose CONTENT is the decoded file text; their ``path`` is
reported with an ARGUMENT event as soon as it is complete, before or after the content.

The arguments' events come from the splitter, on `SplitChunk`s: a chunk with tool calls that
did not pass through it is refused with a `ConfigurationError` (there is no second parser here).

Most chunks continue what the last one started: the next text of the open text run, the next piece of
the open call's arguments. The state that starts each (the open run, the open call) is also the rule that
takes such a chunk at once (``take``); ``feed`` asks the rule, else takes the general path.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec
from aiostream import pipable_operator

from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentEvent,
    ArgumentValue,
    ChunkResponse,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    SplitChunk,
    TextHead,
    TokenUsage,
    ToolCallDelta,
    ToolCallError,
    ToolCallErrorKind,
    ToolInvocation,
    ToolResult,
)
from pipeline.stage import Core, operator_stream

__all__ = [
    "DEFAULT_FILE_TOOLS",
    "RAW_KEPT",
    "FileTool",
    "SegmentEmitter",
    "SegmentIdFactory",
    "Splitter",
    "emit_segments",
]

SegmentIdFactory = Callable[[SegmentType], str]
"""Makes the id of a text or reasoning segment (tool segments take the call id)."""


class FileTool(msgspec.Struct, frozen=True):
    """A tool whose calls stream a file: ``content_key`` is streamed as the segment's CONTENT."""

    segment_type: SegmentType
    content_key: str
    path_key: str = "path"


DEFAULT_FILE_TOOLS: Mapping[str, FileTool] = {
    "write_file": FileTool(SegmentType.WRITE_FILE, "content"),
    "patch_file": FileTool(SegmentType.PATCH_FILE, "patch"),
}


# Enum members read through their class are slow: the hot paths use these.
_CONTENT = SegmentEventType.CONTENT
_ARGUMENT = SegmentEventType.ARGUMENT
_TEXT = SegmentType.TEXT
_REASONING = SegmentType.REASONING

_Events = list[SegmentEvent | ToolInvocation | ResponseEnd]
"""What the emitter gives: segment events, the invocations of its ``folder``, the response's end."""
_Item = ChunkResponse | SplitChunk
_Rule = Callable[[_Item], _Events | None]
"""What takes the next chunk at once (see `SegmentEmitter.feed`): the ``take`` of the open run or call."""
_Fold = Callable[[SegmentEvent], list[Any]]  # a folder's feed: a tool segment's START or END in
_Split = Callable[[ToolCallDelta], Sequence[ArgumentEvent]]  # a fused splitter's delta_events

RAW_KEPT: Final = 1 << 20
"""Characters of a call's arguments text kept for its error (``ToolCallError.raw``): the first ones."""

_NO_SPLITTER = (
    "emit_segments got a chunk with tool calls that did not pass through split_arguments:"
    " pipe split_arguments before emit_segments (process() does), or ArgumentSplitter before SegmentEmitter"
)


class Splitter(Protocol):
    """What an emitter runs as its splitter: `operators.arguments.ArgumentSplitter`'s core, and the
    argument events of one delta, which the emitter asks for itself when it takes a chunk at once (of an
    open call's next text, from that call's parser)."""

    def feed(self, chunk: ChunkResponse, /) -> list[_Item]:
        """``chunk`` as it goes on: a `SplitChunk` when it has tool calls or ends the response."""
        ...

    def finish(self) -> list[_Item]:
        """One chunk finishing the calls still open at the end of the stream, if any."""
        ...

    def delta_events(self, delta: ToolCallDelta, /) -> Sequence[ArgumentEvent]:
        """The argument events of one tool-call delta of a chunk that does not end the response."""
        ...

    def arguments_feed(self, index: int, /) -> Callable[[str], Sequence[ArgumentEvent]] | None:
        """What `delta_events` calls for a delta that only brings more text of the open call at ``index``."""
        ...


def _only_arguments(chunk: ChunkResponse) -> ToolCallDelta | None:
    """The one tool-call delta of a chunk that carries nothing else: every other field at its default, as
    in `_Run._take_text`."""
    deltas = chunk.tool_calls
    if (
        deltas is None
        or len(deltas) != 1
        or chunk.content
        or chunk.reasoning is not None
        or chunk.reasoning_id is not None
        or chunk.reasoning_signature is not None
        or chunk.encrypted_reasoning is not None
        or chunk.reasoning_done
        or chunk.citations is not None
        or chunk.content_signature is not None
        or chunk.refusal is not None
        or chunk.tool_results is not None
        or chunk.usage is not None
        or chunk.finish_reason is not None
        or chunk.metadata is not None
    ):
        return None
    return deltas[0]


def _unsplit(delta: ToolCallDelta) -> Sequence[ArgumentEvent]:
    """The `_Split` of an emitter without a splitter: its chunks come split."""
    raise ConfigurationError(_NO_SPLITTER)


def _alone(event: SegmentEvent) -> list[Any]:
    """The `_Fold` of an emitter without a folder: the event goes out alone."""
    return [event]


def _random_segment_id(segment_type: SegmentType) -> str:
    return f"{segment_type.value}_{uuid.uuid4().hex[:16]}"


class _NoRule:
    """No rule: the next chunk takes the general path."""

    __slots__ = ()

    def take(self, item: _Item) -> _Events | None:
        del item
        return None


_NO_RULE: Final[_Rule] = _NoRule().take


class _Facts:
    """What the response's end carries, gathered from every chunk: the latest usage, the metadata."""

    __slots__ = ("metadata", "usage")

    def __init__(self) -> None:
        self.usage: TokenUsage | None = None
        self.metadata: dict[str, Any] = {}

    def keep(self, chunk: ChunkResponse) -> None:
        """Keep ``chunk``'s usage (the latest wins) and metadata (a later key overrides)."""
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.metadata:
            self.metadata.update(chunk.metadata)


class _Run:
    """The open text or reasoning run; its rule (``take``) is the one of its kind."""

    __slots__ = ("block_id", "facts", "kind", "length", "metadata", "refusal", "sealed", "segment_id", "take")

    def __init__(self, kind: SegmentType, segment_id: str, refusal: bool, facts: _Facts) -> None:
        self.kind = kind
        self.segment_id = segment_id
        self.refusal = refusal
        self.facts = facts
        self.length = 0
        """Characters of a text run's text so far (the offset of a citation); a reasoning rule skips it."""
        self.sealed = False
        """A reasoning run has its signature or encrypted content: its provider block is complete."""
        self.block_id: str | None = None
        """The provider's id of a reasoning run's block (also in `metadata`, for its END)."""
        self.metadata: dict[str, Any] = {}
        """What its END carries."""
        self.take: _Rule = self._take_text if kind is _TEXT else self._take_reasoning
        """The rule of the run: a chunk that only continues it gives its one CONTENT event, any other
        ``None``."""

    def takes_deltas(self) -> bool:
        """Whether more of its kind of text may continue this run: not a refusal, not sealed."""
        return not self.refusal and not self.sealed

    def _take_text(self, item: _Item) -> _Events | None:
        """The rule of an open text run: a chunk of only text (with usage or metadata, kept for the
        response's end) continues it with one CONTENT event.

        Every other field must be at its default (``reasoning_done`` aside: it ends reasoning runs only).
        ``is not None`` is stricter than the general path's truth tests: an empty list or string beside
        the text goes the general way, which gives the same events.
        """
        if type(item) is not ChunkResponse:
            return None
        text = item.content
        if (
            not text
            or item.reasoning is not None
            or item.reasoning_id is not None
            or item.reasoning_signature is not None
            or item.encrypted_reasoning is not None
            or item.citations is not None
            or item.content_signature is not None
            or item.refusal is not None
            or item.tool_calls is not None
            or item.tool_results is not None
            or item.finish_reason is not None
            or item.is_complete
        ):
            return None
        if item.usage is not None or item.metadata is not None:
            self.facts.keep(item)
        self.length += len(text)
        return [SegmentEvent(_CONTENT, self.segment_id, None, {"delta": text})]

    def _take_reasoning(self, item: _Item) -> _Events | None:
        """The rule of an open reasoning run: a chunk of only reasoning of the same provider block (with
        usage or metadata, kept for the response's end) continues it with one CONTENT event."""
        if type(item) is not ChunkResponse:
            return None
        text = item.reasoning
        block = item.reasoning_id
        if (
            not text
            or (block is not None and block != self.block_id)
            or item.content
            or item.reasoning_done
            or item.reasoning_signature is not None
            or item.encrypted_reasoning is not None
            or item.citations is not None
            or item.content_signature is not None
            or item.refusal is not None
            or item.tool_calls is not None
            or item.tool_results is not None
            or item.finish_reason is not None
            or item.is_complete
        ):
            return None
        if item.usage is not None or item.metadata is not None:
            self.facts.keep(item)
        return [SegmentEvent(_CONTENT, self.segment_id, None, {"delta": text})]


class _Call:
    """What the emitter knows of one tool call while its segment is open."""

    __slots__ = (
        "arguments",
        "complete",
        "content_path",
        "ended",
        "error",
        "feed_arguments",
        "file_tool",
        "fold",
        "index",
        "keep_values",
        "kind",
        "name",
        "partial",
        "path",
        "provider_call_id",
        "raw",
        "segment_id",
        "server_name",
        "signature",
        "split",
        "started",
        "waiting",
    )

    def __init__(self, index: int, keep_values: bool, fold: _Fold, split: _Split | None) -> None:
        self.index = index
        self.keep_values = keep_values
        """False: the splitter streams the arguments without their values, so END carries none."""
        self.fold = fold
        """The emitter's folder's ``feed`` (its invocation follows the END), or `_alone`."""
        self.segment_id = ""
        """The call id the provider gave; once started, the segment id (unique in the response)."""
        self.provider_call_id: str | None = None
        """The id the provider gave, when another call of the response had it first (so the ids differ)."""
        self.name: str | None = None
        self.kind = "function"
        self.signature: str | None = None
        self.server_name: str | None = None
        self.file_tool: FileTool | None = None
        self.content_path: tuple[str] | None = None
        """``(file_tool.content_key,)``: the path whose string is the segment's CONTENT."""
        self.raw = TextHead(RAW_KEPT)
        """The arguments text as received (its head), for the error of a call that cannot be folded."""
        self.arguments: Any = None
        self.partial: dict[str, Any] = {}
        """Top-level members already complete: what a failed call's invocation still carries."""
        self.complete = False
        self.error: ArgumentError | None = None
        self.path: str | None = None
        self.started = False
        self.ended = False
        self.waiting: list[tuple[ToolCallDelta, tuple[ArgumentEvent, ...]]] = []
        """Deltas that came before the call's name (the name decides the segment type)."""
        self.split: _Split = split or _unsplit
        self.feed_arguments: Callable[[str], Sequence[ArgumentEvent]] | None = None
        """Once started, the emitter's splitter's `operators.arguments.ArgumentSplitter.arguments_feed` for
        the call, if it has one."""
        """The emitter's splitter's `operators.arguments.ArgumentSplitter.delta_events`."""

    def take(self, item: _Item) -> _Events | None:
        """The rule of an open call: a chunk of only the next piece of its arguments (or their end) is
        applied at once, its argument events as the splitter gave them, or asked of the emitter's own
        splitter (a chunk that ends the response is the splitter's)."""
        if type(item) is ChunkResponse and not item.is_complete:
            chunk, split = item, None
        elif type(item) is SplitChunk:
            chunk, split = item.chunk, item.argument_events
        else:
            return None
        delta = _only_arguments(chunk)
        if (
            delta is None
            or self.ended
            or delta.index != self.index
            or delta.call_id is not None
            or delta.name is not None
            or delta.signature is not None
            or delta.kind != self.kind
        ):
            return None
        argument_events: Sequence[ArgumentEvent]
        if split is not None:
            argument_events = split[0]
        elif self.feed_arguments is not None and delta.arguments_delta and not delta.finished:
            argument_events = self.feed_arguments(delta.arguments_delta)  # the usual delta, to its parser
        else:
            argument_events = self.split(delta)
        events: _Events = []
        self.apply(events, delta, argument_events)
        return events

    def apply(self, events: _Events, delta: ToolCallDelta, argument_events: Sequence[ArgumentEvent]) -> None:
        """Stream ``delta``'s arguments text and events; end the segment once the call is complete."""
        segment_id = self.segment_id
        text = delta.arguments_delta
        if text:
            self.raw.append(text)
            if self.file_tool is None:
                events.append(SegmentEvent(_CONTENT, segment_id, None, {"delta": text}))
        for item in argument_events:
            if isinstance(item, ArgumentDelta):
                if item.path == self.content_path:  # a file's content is its segment's CONTENT
                    events.append(SegmentEvent(_CONTENT, segment_id, None, {"delta": item.delta}))
                else:
                    payload = {"path": list(item.path), "delta": item.delta}  # SegmentEvent.argument_delta
                    events.append(SegmentEvent(_ARGUMENT, segment_id, None, payload))
            elif isinstance(item, ArgumentValue):
                self._value(events, item)
            else:
                self.error = item
        if self.complete or self.error is not None or delta.finished:
            self.end(events)

    def _value(self, events: _Events, item: ArgumentValue) -> None:
        path = item.path
        if not path:
            self.arguments, self.complete = item.value, True
            return
        if len(path) == 1 and isinstance(path[0], str):
            self.partial[path[0]] = item.value
        file_tool = self.file_tool
        if file_tool is not None:
            if path[0] == file_tool.content_key:
                return  # streamed as CONTENT already
            if path == (file_tool.path_key,):
                self.path = item.value if isinstance(item.value, str) else None
        events.append(SegmentEvent.argument_value(self.segment_id, path, item.value))

    def end(self, events: _Events, interrupted: str = "") -> None:
        """The segment's END, with the arguments (or the error) that the folder makes an invocation of."""
        self.ended = True
        segment_id = self.segment_id
        metadata: dict[str, Any] = {"tool_name": self.name or "", "call_id": segment_id}
        if self.provider_call_id is not None:
            metadata["provider_call_id"] = self.provider_call_id
        error = self._error(interrupted)
        self.raw = TextHead(RAW_KEPT)  # the call is over: its text is not needed any more
        if self.keep_values:
            valid = error is None or isinstance(self.arguments, dict)
            metadata["arguments"] = self.arguments if valid else self.partial
        if error is not None:
            metadata["error"] = error.to_dict()
        if self.kind == "server":
            metadata["provider_executed"] = True
        if self.signature is not None:
            metadata["signature"] = self.signature
        if self.file_tool is not None:
            arguments = self.arguments if isinstance(self.arguments, dict) else self.partial
            path = arguments.get(self.file_tool.path_key, self.path)
            if isinstance(path, str):
                metadata["path"] = path
        segment_type = self.file_tool.segment_type if self.file_tool else SegmentType.TOOL_CALL
        events += self.fold(SegmentEvent.end(segment_id, metadata, segment_type=segment_type))

    def _error(self, interrupted: str) -> ToolCallError | None:
        """Why the call cannot be folded, with its raw text; None when it can."""
        problem = self._problem(interrupted)
        if problem is None:
            return None
        kind, message, offset = problem
        return ToolCallError(kind, message, self.raw.text(), offset)

    def _problem(self, interrupted: str) -> tuple[ToolCallErrorKind, str, int | None] | None:
        if self.name is None:  # a converter gave out a call that never got its name: it cannot be run
            return "missing_name", "the call never got a function name", None
        if self.error is not None:
            return self.error.kind, self.error.message, self.error.offset
        if interrupted:
            return "interrupted", interrupted, None
        if not self.complete:
            return "truncated", "the stream ended before the arguments were complete", self.raw.length
        if self.keep_values and not isinstance(self.arguments, dict):
            kind = type(self.arguments).__name__
            return "not_an_object", f"the arguments are a JSON {kind}, not an object", None
        return None


class SegmentEmitter:
    """Sans-IO core of `emit_segments`: ``feed(chunk)`` and ``finish()`` return events.

    ``feed`` takes what `operators.arguments.ArgumentSplitter` gives: chunks, and
    `SplitChunk`s for chunks with tool calls; or, given the ``splitter`` itself, the converter's chunks.

    A tool segment's END carries the call's arguments (or its error, with the first `RAW_KEPT`
    characters of its arguments text), which `operators.invocations.InvocationFolder` folds; given the
    ``folder`` itself, each invocation follows its END in the emitter's own output.

    ``splitter`` and ``folder`` make the three stages one core, as `pipeline.process` runs them: the
    splitter gets only chunks with tool calls or ``is_complete``, the folder only tool segments' STARTs and
    ENDs (what they do not pass on as they are), so the events are a chain's, and a text event costs
    neither a call.

    A chunk's ``image_urls``, ``audio_urls`` and ``video_urls`` are not segments: they are read from the
    chunks themselves (`pipeline.to_chunks`). Its ``is_complete`` is not read either: the splitter has
    ended the calls of a complete chunk, and `finish` ends the response.

    Args:
        file_tools: tool name -> `FileTool`; defaults to ``write_file`` and ``patch_file``.
        segment_ids: makes text and reasoning segment ids; defaults to ``"text_" + 16 random hex``.
        call_ids: makes the id of a tool call that arrives without one (converters normally give one).
        keep_values: False for a splitter that does not keep values (``keep_values=False``): tool
            segments stream as usual, and their END carries no ``arguments`` (nothing to fold).
        splitter: an `operators.arguments.ArgumentSplitter` run first (one chunk out per chunk in).
        folder: an `operators.invocations.InvocationFolder` fed the tool segments' STARTs and ENDs.

    Raises:
        ConfigurationError: ``file_tools`` does not map names to `FileTool`s, or an id factory is not
            callable.
    """

    def __init__(
        self,
        *,
        file_tools: Mapping[str, FileTool] | None = None,
        segment_ids: SegmentIdFactory | None = None,
        call_ids: Callable[[int], str] | None = None,
        keep_values: bool = True,
        splitter: Splitter | None = None,
        folder: Core[SegmentEvent, Any] | None = None,
    ) -> None:
        _check_options(file_tools, segment_ids, call_ids)
        self._file_tools = DEFAULT_FILE_TOOLS if file_tools is None else file_tools
        self._segment_ids = segment_ids or _random_segment_id
        self._call_ids = call_ids or (lambda index: f"call_{uuid.uuid4().hex[:24]}")
        self._keep_values = keep_values
        self._splitter = splitter
        self._folder = folder
        self._fold: _Fold = folder.feed if folder is not None else _alone
        self._split: _Split | None = splitter.delta_events if splitter is not None else None
        self._run: _Run | None = None
        self._rule: _Rule = _NO_RULE
        """What takes the next chunk at once, if it only continues what the last one started."""
        self._used_ids: set[str] = set()
        self._next_suffix: dict[str, int] = {}
        """Base id -> the first ``_n`` suffix not yet tried for it: a repeated id is renamed in constant
        time (amortised), not by probing ``_2``, ``_3``, ... from the start each time."""
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._facts = _Facts()
        self._finished = False

    def feed(self, item: ChunkResponse | SplitChunk) -> _Events:
        """The segment events of one chunk (a `SplitChunk` when it has tool calls).

        Raises:
            ConfigurationError: a chunk with tool calls that did not pass through the argument splitter.
        """
        events = self._rule(item)  # (no rule takes a ChunkResponse with ``is_complete``)
        if events is not None:
            return events
        splitter = self._splitter
        if splitter is not None and type(item) is ChunkResponse and (item.tool_calls or item.is_complete):
            (item,) = splitter.feed(item)  # (what the splitter does not pass on as it is)
        return self._feed(item)

    def _feed(self, item: ChunkResponse | SplitChunk) -> _Events:
        """`feed`, the general way (a property test keeps the rules equal to it)."""
        if isinstance(item, SplitChunk):
            chunk, argument_events = item.chunk, item.argument_events
        elif item.tool_calls:
            raise ConfigurationError(_NO_SPLITTER)
        else:
            chunk, argument_events = item, ()
        events: _Events = []
        self._reasoning(events, chunk)
        self._text(events, chunk)
        if chunk.tool_calls:
            for delta, delta_events in zip(chunk.tool_calls, argument_events, strict=True):
                self._tool_delta(events, delta, delta_events)
        if chunk.tool_results:
            for result in chunk.tool_results:
                self._tool_result(events, result)
        if chunk.finish_reason is not None:
            self._finish_reason = chunk.finish_reason
        self._facts.keep(chunk)
        self._rule = self._next_rule(chunk)
        return events

    def _next_rule(self, chunk: ChunkResponse) -> _Rule:
        """The rule for the chunk after ``chunk``: the call it streamed into, or the text run it left open."""
        if chunk.tool_calls:
            call = self._calls.get(chunk.tool_calls[-1].index)
            return call.take if call is not None and call.started and not call.ended else _NO_RULE
        run = self._run
        return run.take if run is not None and run.takes_deltas() else _NO_RULE

    def finish(self) -> _Events:
        """Close every open segment (an unfinished tool call is ``truncated``), then `ResponseEnd`."""
        if self._finished:
            return []
        events: _Events = []
        if self._splitter is not None:  # the calls still open, finished
            for item in self._splitter.finish():
                events += self.feed(item)
        events += self._close_all(interrupted="")
        if self._folder is not None:
            events += self._folder.finish()
        events.append(
            ResponseEnd(
                finish_reason=self._finish_reason, usage=self._facts.usage, metadata=self._facts.metadata
            )
        )
        return events

    def abort(self, exc: BaseException) -> _Events:
        """The source failed: close open segments, tool calls with an ``interrupted`` error naming ``exc``
        (and, with a ``folder``, the invocations of their ENDs)."""
        if self._finished:
            return []
        message = f"the stream failed before the call was complete: {type(exc).__name__}: {exc}"
        return self._close_all(interrupted=message)

    def _close_all(self, *, interrupted: str) -> _Events:
        self._finished = True
        self._rule = _NO_RULE
        events: _Events = []
        self._close_run(events)
        for call in self._calls.values():
            if not call.started:
                self._start_with_waiting(events, call)
            if not call.ended:
                call.end(events, interrupted=interrupted)
        return events

    # text and reasoning runs

    def _reasoning(self, events: _Events, chunk: ChunkResponse) -> None:
        if chunk.reasoning_id is not None:
            self._reasoning_block(events, chunk.reasoning_id)
        if chunk.reasoning:
            self._append(events, _REASONING, chunk.reasoning)
        if chunk.reasoning_signature is not None:
            self._reasoning_metadata(events, "signature", chunk.reasoning_signature)
        if chunk.encrypted_reasoning is not None:
            self._reasoning_metadata(events, "encrypted_content", chunk.encrypted_reasoning)
        if chunk.reasoning_done and self._run is not None and self._run.kind is _REASONING:
            self._close_run(events)

    def _text(self, events: _Events, chunk: ChunkResponse) -> None:
        if chunk.citations:
            self._citations(events, chunk.citations)
        run = self._run
        if chunk.content_signature is not None and run is not None and "signature" in run.metadata:
            self._close_run(events)  # a text run has one signature: a second one is another signed part
        if chunk.content:
            self._append(events, _TEXT, chunk.content)
        if chunk.refusal:
            self._append(events, _TEXT, chunk.refusal, refusal=True)
        if chunk.content_signature is not None:
            self._text_run(events).metadata["signature"] = chunk.content_signature

    def _append(self, events: _Events, kind: SegmentType, text: str, *, refusal: bool = False) -> None:
        run = self._run
        if run is None or run.kind is not kind or run.refusal != refusal or run.sealed:
            run = self._open_new_run(events, kind, {"refusal": True} if refusal else None, refusal=refusal)
        if kind is _TEXT:
            run.length += len(text)
        events.append(SegmentEvent(_CONTENT, run.segment_id, None, {"delta": text}))

    def _text_run(self, events: _Events) -> _Run:
        """The open text run (not a refusal), opened if need be."""
        run = self._run
        if run is None or run.kind is not _TEXT or run.refusal:
            run = self._open_new_run(events, _TEXT)
        return run

    def _open_new_run(
        self,
        events: _Events,
        kind: SegmentType,
        metadata: dict[str, Any] | None = None,
        *,
        refusal: bool = False,
    ) -> _Run:
        self._close_run(events)
        run = self._run = _Run(kind, self._segment_ids(kind), refusal, self._facts)
        events.append(SegmentEvent.start(run.segment_id, kind, metadata))
        return run

    def _close_run(self, events: _Events) -> None:
        run = self._run
        if run is None:
            return
        events.append(SegmentEvent.end(run.segment_id, run.metadata or None, segment_type=run.kind))
        self._run = None

    def _reasoning_block(self, events: _Events, reasoning_id: str) -> None:
        """A provider reasoning block with an id: its own segment, the id in its START and END metadata."""
        run = self._run
        if run is None or run.kind is not _REASONING or run.block_id not in (None, reasoning_id):
            run = self._open_new_run(events, _REASONING, {"reasoning_id": reasoning_id})
        run.metadata["reasoning_id"] = run.block_id = reasoning_id

    def _reasoning_metadata(self, events: _Events, key: str, value: str) -> None:
        """Signatures and encrypted reasoning belong to the reasoning run they close (or one of their own).

        They close a provider block: a second one, or more reasoning text, starts a new segment, so that
        every block keeps its own signature or encrypted content.
        """
        run = self._run
        if run is None or run.kind is not _REASONING or key in run.metadata:
            run = self._open_new_run(events, _REASONING)
        run.metadata[key] = value
        run.sealed = True

    def _citations(self, events: _Events, citations: list[Mapping[str, Any]]) -> None:
        """Citations go into the text segment's END metadata, each with its offset in the segment's text."""
        run = self._text_run(events)
        kept = run.metadata.setdefault("citations", [])
        kept.extend({"offset": run.length, "citation": dict(citation)} for citation in citations)

    def _tool_result(self, events: _Events, result: ToolResult) -> None:
        """A provider-executed call's result: a ``tool_result`` segment, START, CONTENT (JSON), END."""
        self._close_run(events)
        segment_id = self._unique_id(f"{result.call_id}:result")
        metadata: dict[str, Any] = {"call_id": result.call_id, "provider_executed": True}
        if result.name is not None:
            metadata["tool_name"] = result.name
        if result.result_type is not None:
            metadata["result_type"] = result.result_type
        events.append(SegmentEvent.start(segment_id, SegmentType.TOOL_RESULT, metadata))
        if result.content is not None:
            # Sorted keys: the same result gives the same text from the wire as from an SDK's objects.
            events.append(
                SegmentEvent.content(segment_id, encode_json(result.content, sort_keys=True).decode())
            )
        end_metadata = {**metadata, "result": result.content}
        if result.is_error:
            end_metadata["is_error"] = True
        events.append(SegmentEvent.end(segment_id, end_metadata, segment_type=SegmentType.TOOL_RESULT))

    def _unique_id(self, segment_id: str) -> str:
        """``segment_id``, or it + ``_2``, ``_3``... when a segment of this response has it already.

        The next suffix to try is kept per base id, so every suffix is tried at most once: n repeats of
        one id cost O(n), not O(n^2). A suffix is skipped only when that id is taken already (a provider
        may send ``a_2`` itself)."""
        used = self._used_ids
        if segment_id in used:
            base = segment_id
            number = self._next_suffix.get(base, 2)
            segment_id = f"{base}_{number}"
            while segment_id in used:
                number += 1
                segment_id = f"{base}_{number}"
            self._next_suffix[base] = number + 1
        used.add(segment_id)
        return segment_id

    # tool calls

    def _tool_delta(
        self, events: _Events, delta: ToolCallDelta, argument_events: tuple[ArgumentEvent, ...]
    ) -> None:
        call = self._calls.get(delta.index)
        if call is None:
            call = self._calls[delta.index] = _Call(delta.index, self._keep_values, self._fold, self._split)
        if call.ended:
            return  # arguments already complete: only trailing whitespace or a late "finished" can follow
        if not call.segment_id and delta.call_id:
            call.segment_id = delta.call_id
        if call.name is None and delta.name:
            call.name = delta.name
        if delta.signature is not None:
            call.signature = delta.signature
        if delta.server_name is not None:
            call.server_name = delta.server_name
        call.kind = delta.kind
        if not call.started:
            if call.name is None and not delta.finished:
                call.waiting.append((delta, argument_events))  # the name decides the segment type: wait
                return
            self._start_with_waiting(events, call)
            if call.ended:
                return
        call.apply(events, delta, argument_events)

    def _start_with_waiting(self, events: _Events, call: _Call) -> None:
        self._start_call(events, call)
        waiting, call.waiting = call.waiting, []
        for early, early_events in waiting:
            if not call.ended:
                call.apply(events, early, early_events)

    def _start_call(self, events: _Events, call: _Call) -> None:
        self._close_run(events)
        call.started = True
        if self._splitter is not None:
            call.feed_arguments = self._splitter.arguments_feed(call.index)
        provider_id = call.segment_id or self._call_ids(call.index)
        call.segment_id = self._unique_id(provider_id)
        if call.segment_id != provider_id:
            call.provider_call_id = provider_id
        name = call.name or ""
        call.file_tool = self._file_tools.get(name) if call.kind == "function" else None
        if call.file_tool is not None:
            call.content_path = (call.file_tool.content_key,)
        segment_type = call.file_tool.segment_type if call.file_tool else SegmentType.TOOL_CALL
        metadata: dict[str, Any] = {"tool_name": name, "call_id": call.segment_id}
        if call.provider_call_id is not None:
            metadata["provider_call_id"] = call.provider_call_id
        if call.kind == "server":
            metadata["provider_executed"] = True
            if call.server_name is not None:
                metadata["server_name"] = call.server_name
        elif call.kind == "custom":
            metadata["custom"] = True
        events += self._fold(SegmentEvent.start(call.segment_id, segment_type, metadata))


def _check_options(
    file_tools: Mapping[str, FileTool] | None,
    segment_ids: SegmentIdFactory | None,
    call_ids: Callable[[int], str] | None,
) -> None:
    """Raise `ConfigurationError` for a `SegmentEmitter` option of the wrong kind."""
    if file_tools is not None and not (
        isinstance(file_tools, Mapping) and all(isinstance(tool, FileTool) for tool in file_tools.values())
    ):
        raise ConfigurationError(f"file_tools must map tool names to FileTool objects, got {file_tools!r}")
    for option, factory in (("segment_ids", segment_ids), ("call_ids", call_ids)):
        if factory is not None and not callable(factory):
            raise ConfigurationError(f"{option} must be a callable, got {factory!r}")


@pipable_operator
def emit_segments(
    source: AsyncIterable[ChunkResponse | SplitChunk],
    *,
    file_tools: Mapping[str, FileTool] | None = None,
    segment_ids: SegmentIdFactory | None = None,
    call_ids: Callable[[int], str] | None = None,
    keep_values: bool = True,
) -> AsyncIterator[SegmentEvent | ToolInvocation | ResponseEnd]:
    """Chunks (after `operators.split_arguments`) to segment events, then one `ResponseEnd`.

    If the source fails, open segments are closed first (tool calls with an ``interrupted`` error, so the
    folder still gives exactly one invocation per call) and then the exception propagates.

    Args:
        source: the chunks of `operators.split_arguments`.
        file_tools: as `SegmentEmitter` takes it.
        segment_ids: as `SegmentEmitter` takes it.
        call_ids: as `SegmentEmitter` takes it.
        keep_values: as `SegmentEmitter` takes it.

    Raises:
        ConfigurationError: ``file_tools`` does not map names to `FileTool`s.
    """
    emitter = SegmentEmitter(
        file_tools=file_tools, segment_ids=segment_ids, call_ids=call_ids, keep_values=keep_values
    )
    return operator_stream(source, emitter)
