"""The segment emitter: chunks (after :func:`operators.split_arguments`) to :class:`SegmentEvent`\\ s.

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
:class:`FileTool`) become file segments whose CONTENT is the decoded file text; their ``path`` is
reported with an ARGUMENT event as soon as it is complete, before or after the content.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiostream import pipable_operator

from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError
from pipeline.models import (
    ArgumentDelta,
    ArgumentError,
    ArgumentErrorKind,
    ArgumentValue,
    ChunkResponse,
    ResponseEnd,
    SegmentEvent,
    SegmentEventType,
    SegmentType,
    TokenUsage,
    ToolCallDelta,
    ToolCallError,
    ToolResult,
)
from pipeline.stage import operator_stream

__all__ = [
    "DEFAULT_FILE_TOOLS",
    "FileTool",
    "SegmentEmitter",
    "SegmentIdFactory",
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
_TEXT = SegmentType.TEXT
_REASONING = SegmentType.REASONING
_COMPACT_EVERY = 1024
"""A call's raw pieces are joined into one block every this many pieces, so that huge arguments in tiny
deltas cost about their own size in memory, not a small object per delta."""


def _compact_raw(call: _Call) -> None:
    """Join the raw pieces received since the last compaction into one block."""
    raw = call.raw
    block = "".join(raw[call.raw_blocks :])
    del raw[call.raw_blocks :]
    raw.append(block)
    call.raw_blocks += 1


def _random_segment_id(segment_type: SegmentType) -> str:
    return f"{segment_type.value}_{uuid.uuid4().hex[:16]}"


@dataclass(slots=True)
class _Call:
    """What the emitter knows of one tool call while its segment is open."""

    index: int
    segment_id: str | None = None
    provider_call_id: str | None = None
    """The id the provider gave, when another call of the response had it first (the segment id differs)."""
    name: str | None = None
    kind: str = "function"
    signature: str | None = None
    server_name: str | None = None
    file_tool: FileTool | None = None
    content_path: tuple[str] | None = None
    """``(file_tool.content_key,)``: the path whose string is the segment's CONTENT."""
    raw: list[str] = field(default_factory=list)
    """The arguments text as received: joined blocks of ``_COMPACT_EVERY`` pieces, then single pieces."""
    raw_blocks: int = 0
    arguments: Any = None
    partial: dict[str, Any] = field(default_factory=dict)
    """Top-level members already complete: what a failed call's invocation still carries."""
    complete: bool = False
    error: ArgumentError | None = None
    parsed_by_splitter: bool = False
    path: str | None = None
    started: bool = False
    ended: bool = False
    waiting: list[ToolCallDelta] = field(default_factory=list)


class SegmentEmitter:
    """Sans-IO core of :func:`emit_segments`: ``feed(chunk)`` and ``finish()`` return events.

    Args:
        file_tools: tool name -> :class:`FileTool`; defaults to ``write_file`` and ``patch_file``.
        segment_ids: makes text and reasoning segment ids; defaults to ``"text_" + 16 random hex``.
        call_ids: makes the id of a tool call that arrives without one (converters normally give one).
    """

    def __init__(
        self,
        *,
        file_tools: Mapping[str, FileTool] | None = None,
        segment_ids: SegmentIdFactory | None = None,
        call_ids: Callable[[int], str] | None = None,
    ) -> None:
        if file_tools is not None and not (
            isinstance(file_tools, Mapping)
            and all(isinstance(tool, FileTool) for tool in file_tools.values())
        ):
            raise ConfigurationError(
                f"file_tools must map tool names to FileTool objects, got {file_tools!r}"
            )
        for option, factory in (("segment_ids", segment_ids), ("call_ids", call_ids)):
            if factory is not None and not callable(factory):
                raise ConfigurationError(f"{option} must be a callable, got {factory!r}")
        self._file_tools = DEFAULT_FILE_TOOLS if file_tools is None else file_tools
        self._segment_ids = segment_ids or _random_segment_id
        self._call_ids = call_ids or (lambda index: f"call_{uuid.uuid4().hex[:24]}")
        self._open_run: SegmentType | None = None
        self._open_run_id = ""
        self._open_run_refusal = False
        self._run_length = 0
        """Characters of the open run's text so far (the offset of a citation)."""
        self._run_sealed = False
        """The open reasoning run has its signature or encrypted content: its provider block is complete."""
        self._run_metadata: dict[str, Any] = {}
        self._used_ids: set[str] = set()
        self._next_suffix: dict[str, int] = {}
        """Base id -> the first ``_n`` suffix not yet tried for it: a repeated id is renamed in constant
        time (amortised), not by probing ``_2``, ``_3``, ... from the start each time."""
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._usage: TokenUsage | None = None
        self._metadata: dict[str, Any] = {}
        self._finished = False

    def feed(self, chunk: ChunkResponse) -> list[SegmentEvent | ResponseEnd]:
        content = chunk.content
        tool_calls = chunk.tool_calls
        if (
            content
            and self._open_run is _TEXT
            and not self._open_run_refusal
            and not self._run_sealed
            and tool_calls is None
            and chunk.metadata is None
            and chunk.reasoning is None
            and chunk.reasoning_id is None
            and chunk.reasoning_signature is None
            and chunk.encrypted_reasoning is None
            and chunk.citations is None
            and chunk.content_signature is None
            and chunk.refusal is None
            and chunk.tool_results is None
            and chunk.usage is None
            and chunk.finish_reason is None
        ):
            # The next text of the open text run, nothing else (most chunks): what the checks below do.
            self._run_length += len(content)
            return [SegmentEvent(_CONTENT, self._open_run_id, None, {"delta": content})]
        if (
            tool_calls is not None
            and not content
            and len(tool_calls) == 1
            and chunk.metadata is None
            and chunk.reasoning is None
            and chunk.reasoning_id is None
            and chunk.reasoning_signature is None
            and chunk.encrypted_reasoning is None
            and not chunk.reasoning_done
            and chunk.citations is None
            and chunk.content_signature is None
            and chunk.refusal is None
            and chunk.tool_results is None
            and chunk.usage is None
            and chunk.finish_reason is None
        ):
            # The next piece of an open call's arguments, nothing else (a streaming call's chunks): what
            # _feed and _tool_delta do.
            delta = tool_calls[0]
            call = self._calls.get(delta.index)
            if (
                call is not None
                and call.started
                and not call.ended
                and delta.call_id is None
                and delta.name is None
                and delta.signature is None
                and delta.kind == call.kind
            ):
                text = delta.arguments_delta
                argument_events = delta.argument_events
                if text and len(argument_events) == 1 and call.file_tool is not None and not delta.finished:
                    item = argument_events[0]
                    if type(item) is ArgumentDelta and item.path == call.content_path:
                        # The next piece of a streaming file's content: what _apply does with it.
                        raw = call.raw
                        raw.append(text)
                        if len(raw) - call.raw_blocks >= _COMPACT_EVERY:
                            _compact_raw(call)
                        call.parsed_by_splitter = True
                        return [SegmentEvent(_CONTENT, call.segment_id or "", None, {"delta": item.delta})]
                events: list[SegmentEvent | ResponseEnd] = []
                self._apply(events, call, delta)
                return events
        return self._feed(chunk)

    def _feed(self, chunk: ChunkResponse) -> list[SegmentEvent | ResponseEnd]:
        """:meth:`feed`, the general way (a property test keeps the fast path equal to it)."""
        events: list[SegmentEvent | ResponseEnd] = []
        if chunk.reasoning_id is not None:
            self._reasoning_block(events, chunk.reasoning_id)
        if chunk.reasoning:
            self._run(events, _REASONING, chunk.reasoning)
        if chunk.reasoning_signature is not None:
            self._reasoning_metadata(events, "signature", chunk.reasoning_signature)
        if chunk.encrypted_reasoning is not None:
            self._reasoning_metadata(events, "encrypted_content", chunk.encrypted_reasoning)
        if chunk.reasoning_done and self._open_run is _REASONING:
            self._close_run(events)
        if chunk.citations:
            self._citations(events, chunk.citations)
        if chunk.content_signature is not None and "signature" in self._run_metadata:
            self._close_run(events)  # a text run has one signature: a second one is another signed part
        if chunk.content:
            self._run(events, _TEXT, chunk.content)
        if chunk.refusal:
            self._run(events, _TEXT, chunk.refusal, refusal=True)
        if chunk.content_signature is not None:
            if self._open_run is not _TEXT or self._open_run_refusal:
                self._open_new_run(events, _TEXT)
            self._run_metadata["signature"] = chunk.content_signature
        if chunk.tool_calls:
            for delta in chunk.tool_calls:
                self._tool_delta(events, delta)
        if chunk.tool_results:
            for result in chunk.tool_results:
                self._tool_result(events, result)
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason is not None:
            self._finish_reason = chunk.finish_reason
        if chunk.metadata:
            self._metadata.update(chunk.metadata)
        return events

    def finish(self) -> list[SegmentEvent | ResponseEnd]:
        """Close every open segment (an unfinished tool call is ``truncated``), then :class:`ResponseEnd`."""
        if self._finished:
            return []
        events = self._close_all(interrupted="")
        events.append(
            ResponseEnd(finish_reason=self._finish_reason, usage=self._usage, metadata=self._metadata)
        )
        return events

    def abort(self, exc: BaseException) -> list[SegmentEvent]:
        """The source failed: close open segments, tool calls with an ``interrupted`` error naming ``exc``."""
        if self._finished:
            return []
        message = f"the stream failed before the call was complete: {type(exc).__name__}: {exc}"
        return [event for event in self._close_all(interrupted=message) if isinstance(event, SegmentEvent)]

    def _close_all(self, *, interrupted: str) -> list[SegmentEvent | ResponseEnd]:
        self._finished = True
        events: list[SegmentEvent | ResponseEnd] = []
        self._close_run(events)
        for call in self._calls.values():
            if not call.started:
                self._start_with_waiting(events, call)
            if not call.ended:
                self._end_call(events, call, interrupted=interrupted)
        return events

    # text and reasoning runs

    def _run(
        self, events: list[SegmentEvent | ResponseEnd], kind: SegmentType, text: str, *, refusal: bool = False
    ) -> None:
        if self._open_run is not kind or self._open_run_refusal != refusal or self._run_sealed:
            self._open_new_run(events, kind, {"refusal": True} if refusal else None, refusal=refusal)
        self._run_length += len(text)
        events.append(SegmentEvent(_CONTENT, self._open_run_id, None, {"delta": text}))

    def _open_new_run(
        self,
        events: list[SegmentEvent | ResponseEnd],
        kind: SegmentType,
        metadata: dict[str, Any] | None = None,
        *,
        refusal: bool = False,
    ) -> None:
        self._close_run(events)
        self._open_run, self._open_run_refusal = kind, refusal
        self._open_run_id = self._segment_ids(kind)
        self._run_length = 0
        self._run_sealed = False
        events.append(SegmentEvent.start(self._open_run_id, kind, metadata))

    def _close_run(self, events: list[SegmentEvent | ResponseEnd]) -> None:
        if self._open_run is None:
            return
        events.append(
            SegmentEvent.end(self._open_run_id, self._run_metadata or None, segment_type=self._open_run)
        )
        self._open_run = None
        self._run_metadata = {}

    def _reasoning_block(self, events: list[SegmentEvent | ResponseEnd], reasoning_id: str) -> None:
        """A provider reasoning block with an id: its own segment, the id in its START and END metadata."""
        if (
            self._open_run is _REASONING
            and self._run_metadata.get("reasoning_id", reasoning_id) == reasoning_id
        ):
            self._run_metadata["reasoning_id"] = reasoning_id
            return
        self._open_new_run(events, _REASONING, {"reasoning_id": reasoning_id})
        self._run_metadata["reasoning_id"] = reasoning_id

    def _reasoning_metadata(self, events: list[SegmentEvent | ResponseEnd], key: str, value: str) -> None:
        """Signatures and encrypted reasoning belong to the reasoning run they close (or one of their own).

        They close a provider block: a second one, or more reasoning text, starts a new segment, so that
        every block keeps its own signature or encrypted content.
        """
        if self._open_run is not _REASONING or key in self._run_metadata:
            self._open_new_run(events, _REASONING)
        self._run_metadata[key] = value
        self._run_sealed = True

    def _citations(
        self, events: list[SegmentEvent | ResponseEnd], citations: list[Mapping[str, Any]]
    ) -> None:
        """Citations go into the text segment's END metadata, each with its offset in the segment's text."""
        if self._open_run is not _TEXT or self._open_run_refusal:
            self._open_new_run(events, _TEXT)
        kept = self._run_metadata.setdefault("citations", [])
        kept.extend({"offset": self._run_length, "citation": dict(citation)} for citation in citations)

    def _tool_result(self, events: list[SegmentEvent | ResponseEnd], result: ToolResult) -> None:
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

    def _tool_delta(self, events: list[SegmentEvent | ResponseEnd], delta: ToolCallDelta) -> None:
        call = self._calls.get(delta.index)
        if call is None:
            call = self._calls[delta.index] = _Call(delta.index)
        if call.ended:
            return  # arguments already complete: only trailing whitespace or a late "finished" can follow
        if call.segment_id is None and delta.call_id:
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
                call.waiting.append(delta)  # the name decides the segment type: wait for it
                return
            self._start_with_waiting(events, call)
            if call.ended:
                return
        self._apply(events, call, delta)

    def _start_with_waiting(self, events: list[SegmentEvent | ResponseEnd], call: _Call) -> None:
        self._start_call(events, call)
        waiting, call.waiting = call.waiting, []
        for early in waiting:
            if not call.ended:
                self._apply(events, call, early)

    def _start_call(self, events: list[SegmentEvent | ResponseEnd], call: _Call) -> None:
        self._close_run(events)
        call.started = True
        provider_id = call.segment_id
        if provider_id is None:
            provider_id = self._call_ids(call.index)
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
        events.append(SegmentEvent.start(call.segment_id, segment_type, metadata))

    def _apply(self, events: list[SegmentEvent | ResponseEnd], call: _Call, delta: ToolCallDelta) -> None:
        segment_id = call.segment_id
        assert segment_id is not None
        file_tool = call.file_tool
        text = delta.arguments_delta
        if text:
            raw = call.raw
            raw.append(text)
            if len(raw) - call.raw_blocks >= _COMPACT_EVERY:
                _compact_raw(call)
            if file_tool is None:
                events.append(SegmentEvent(_CONTENT, segment_id, None, {"delta": text}))
        argument_events = delta.argument_events
        if argument_events:
            call.parsed_by_splitter = True
            if len(argument_events) == 1 and file_tool is not None and not delta.finished:
                item = argument_events[0]
                if type(item) is ArgumentDelta and item.path == call.content_path:
                    # The hot path of a streaming file, built directly: what the loop below does with it.
                    events.append(SegmentEvent(_CONTENT, segment_id, None, {"delta": item.delta}))
                    return
        for item in argument_events:
            if isinstance(item, ArgumentDelta):
                if item.path == call.content_path:
                    # The hot path of a streaming file: built directly rather than by SegmentEvent.content.
                    events.append(SegmentEvent(_CONTENT, segment_id, None, {"delta": item.delta}))
                else:
                    events.append(SegmentEvent.argument_delta(segment_id, item.path, item.delta))
            elif isinstance(item, ArgumentValue):
                if not item.path:
                    call.arguments, call.complete = item.value, True
                    continue
                if len(item.path) == 1 and isinstance(item.path[0], str):
                    call.partial[item.path[0]] = item.value
                if file_tool is None or item.path[0] != file_tool.content_key:
                    if file_tool is not None and item.path == (file_tool.path_key,):
                        call.path = item.value if isinstance(item.value, str) else None
                    events.append(SegmentEvent.argument_value(segment_id, item.path, item.value))
            elif isinstance(item, ArgumentError):
                call.error = item
        if call.complete or call.error is not None or delta.finished:
            self._end_call(events, call)

    def _end_call(self, events: list[SegmentEvent | ResponseEnd], call: _Call, interrupted: str = "") -> None:
        call.ended = True
        segment_id = call.segment_id
        assert segment_id is not None
        if not call.complete and call.error is None and not interrupted and not call.parsed_by_splitter:
            self._parse_without_splitter(call)
        metadata: dict[str, Any] = {"tool_name": call.name or "", "call_id": segment_id}
        if call.provider_call_id is not None:
            metadata["provider_call_id"] = call.provider_call_id
        error = self._call_error(call, interrupted)
        if error is None:
            metadata["arguments"] = call.arguments
        else:
            metadata["arguments"] = call.arguments if isinstance(call.arguments, dict) else call.partial
            metadata["error"] = error.to_dict()
        if call.kind == "server":
            metadata["provider_executed"] = True
        if call.signature is not None:
            metadata["signature"] = call.signature
        if call.file_tool is not None:
            arguments = call.arguments if isinstance(call.arguments, dict) else call.partial
            path = arguments.get(call.file_tool.path_key, call.path)
            if isinstance(path, str):
                metadata["path"] = path
        segment_type = call.file_tool.segment_type if call.file_tool else SegmentType.TOOL_CALL
        events.append(SegmentEvent.end(segment_id, metadata, segment_type=segment_type))

    @staticmethod
    def _parse_without_splitter(call: _Call) -> None:
        """Without :func:`split_arguments` upstream, parse the arguments once, at the end of the call."""
        raw = "".join(call.raw)
        if call.kind == "custom":
            call.arguments, call.complete = {"input": raw}, True
            return
        if not raw.strip():
            call.arguments, call.complete = {}, True
            return
        try:
            call.arguments, call.complete = msgspec.json.decode(raw), True
        except msgspec.DecodeError as exc:
            truncated = "truncated" in str(exc)
            kind: ArgumentErrorKind = "truncated" if truncated else "invalid_json"
            call.error = ArgumentError(kind, f"the arguments are not valid JSON: {exc}", len(raw))

    @staticmethod
    def _call_error(call: _Call, interrupted: str) -> ToolCallError | None:
        raw = "".join(call.raw)
        if call.name is None:  # a converter gave out a call that never got its name: it cannot be run
            return ToolCallError("missing_name", "the call never got a function name", raw)
        if call.error is not None:
            return ToolCallError(call.error.kind, call.error.message, raw, call.error.offset)
        if interrupted:
            return ToolCallError("interrupted", interrupted, raw)
        if not call.complete:
            return ToolCallError(
                "truncated", "the stream ended before the arguments were complete", raw, len(raw)
            )
        if not isinstance(call.arguments, dict):
            kind = type(call.arguments).__name__
            return ToolCallError("not_an_object", f"the arguments are a JSON {kind}, not an object", raw)
        return None


@pipable_operator
def emit_segments(
    source: AsyncIterable[ChunkResponse],
    *,
    file_tools: Mapping[str, FileTool] | None = None,
    segment_ids: SegmentIdFactory | None = None,
    call_ids: Callable[[int], str] | None = None,
) -> AsyncIterator[SegmentEvent | ResponseEnd]:
    """Chunks to segment events, then one :class:`ResponseEnd`.

    If the source fails, open segments are closed first (tool calls with an ``interrupted`` error, so the
    folder still gives exactly one invocation per call) and then the exception propagates.
    """
    emitter = SegmentEmitter(file_tools=file_tools, segment_ids=segment_ids, call_ids=call_ids)
    return operator_stream(source, emitter)
