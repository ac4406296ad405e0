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
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import Any

from aiostream import pipable_operator

from operators.segments._open import (
    _CONTENT,
    _NO_RULE,
    _NO_SPLITTER,
    _REASONING,
    _TEXT,
    DEFAULT_FILE_TOOLS,
    RAW_KEPT,
    FileTool,
    SegmentIdFactory,
    Splitter,
    _alone,
    _Call,
    _Events,
    _Facts,
    _Fold,
    _random_segment_id,
    _Rule,
    _Run,
)
from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError
from pipeline.models import (
    ArgumentEvent,
    ChunkResponse,
    ResponseEnd,
    SegmentEvent,
    SegmentType,
    SplitChunk,
    ToolCallDelta,
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
            call = _Call(delta.index, self._keep_values, self._fold, self._splitter)
            self._calls[delta.index] = call
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
