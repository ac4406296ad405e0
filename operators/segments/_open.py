"""What the segment emitter keeps open: the text or reasoning run and the tool calls, each the rule that
takes a chunk continuing it at once (see `operators.segments.SegmentEmitter.feed`), and the file tools."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec

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
)

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

    def __init__(self, index: int, keep_values: bool, fold: _Fold, splitter: Splitter | None) -> None:
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
        self.split: _Split = _unsplit if splitter is None else splitter.delta_events
        """The emitter's splitter's `operators.arguments.ArgumentSplitter.delta_events`."""
        self.feed_arguments = None if splitter is None else splitter.arguments_feed(index)
        """Its parser's ``feed`` (`operators.arguments.ArgumentSplitter.arguments_feed`), for a delta that
        only brings more of its text; its parser is made with its first delta, which the splitter has
        already seen."""

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
