"""The seeds' synchronous API, kept as a facade over the same cores as the async operators.

::

    handler = create_streaming_handler("api_tool_call", on_segment_event=ui.send)
    for chunk in chunks:                 # ChunkResponse objects from a converter
        handler.feed(chunk)              # -> the SegmentEvents this chunk completed
    handler.finalize()
    for invocation in handler.get_all_invocations():
        run(invocation)

``STREAMFOLD_STREAM_PARSER`` picks the handler when no parser is named: ``api_tool_call`` (structured tool
calls from the provider), ``xml``, ``json``, ``sentinel`` (the seeds' text formats) or a delimiter format
(``kimi_k2``, ``hermes``, ...). ``none`` (the spelling of "no rewriting" everywhere else) is an alias of
``api_tool_call``. ``native``, the legacy name of ``api_tool_call``, is refused.
"""

from __future__ import annotations

import logging
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from operators.registry import check_choice, resolve_tool_format, tool_format_choices
from pipeline._options import check_count
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse, ResponseEnd, SegmentEvent, SegmentType, ToolInvocation
from pipeline.stage import Core, chain

__all__ = [
    "PARSER_ENVIRONMENT_VARIABLE",
    "ApiToolCallStreamingResponseHandler",
    "ParsingStreamingResponseHandler",
    "PassThroughStreamingResponseHandler",
    "StreamingResponseHandler",
    "create_streaming_handler",
    "resolve_parser_name",
]

PARSER_ENVIRONMENT_VARIABLE = "STREAMFOLD_STREAM_PARSER"
_logger = logging.getLogger("streamfold")

SegmentCallback = Callable[[SegmentEvent], None]


class StreamingResponseHandler(ABC):
    """Feed it a response's chunks; it returns segment events and folds tool invocations.

    Args:
        on_segment_event: called with every event as it is emitted. An exception it raises is logged
            and does not stop the handler (a broken UI must not break the agent).
        segment_id_prefix: prefix of generated segment ids.
    """

    def __init__(
        self, *, on_segment_event: SegmentCallback | None = None, segment_id_prefix: str = ""
    ) -> None:
        self._on_segment_event = on_segment_event
        self._segment_id_prefix = segment_id_prefix
        self.reset()

    @abstractmethod
    def _cores(self) -> list[Core[Any, Any]]:
        """The cores from chunks to segment events; the base class chains the folder after them."""

    def reset(self) -> None:
        """Forget everything: the handler can take a new response."""
        from operators.invocations import InvocationFolder

        self._folder = InvocationFolder()
        self._chain = chain(*self._cores(), self._folder)
        self._events: list[SegmentEvent] = []
        self._response_end: ResponseEnd | None = None
        self._finalized = False

    def feed(self, chunk: ChunkResponse) -> list[SegmentEvent]:
        """Process one chunk; returns the segment events it completed.

        Raises:
            RuntimeError: the handler was finalized (`reset` makes it reusable).
        """
        if self._finalized:
            raise RuntimeError("the handler has been finalized; call reset() to reuse it")
        return self._emit(self._chain.feed(chunk))

    def finalize(self) -> list[SegmentEvent]:
        """The response ended: close open segments (unfinished calls become ``truncated`` invocations)."""
        if self._finalized:
            return []
        self._finalized = True
        return self._emit(self._chain.finish())

    def get_all_invocations(self) -> list[ToolInvocation]:
        """The tool invocations folded so far, in order."""
        return list(self._folder.invocations)

    def get_all_events(self) -> list[SegmentEvent]:
        """The segment events emitted so far, in order."""
        return list(self._events)

    @property
    def response_end(self) -> ResponseEnd | None:
        """How the response ended (finish reason, usage), once `finalize` was called."""
        return self._response_end

    def _emit(self, outputs: list[Any]) -> list[SegmentEvent]:
        """Record and announce the segment events among ``outputs`` (the invocations are in the folder)."""
        emitted: list[SegmentEvent] = []
        for output in outputs:
            if isinstance(output, SegmentEvent):
                emitted.append(output)
            elif isinstance(output, ResponseEnd):
                self._response_end = output
        self._events.extend(emitted)
        if self._on_segment_event is not None:
            for event in emitted:
                try:
                    self._on_segment_event(event)
                except Exception:
                    _logger.exception("on_segment_event raised; the handler goes on")
        return emitted

    def _segment_id(self, kind: SegmentType) -> str:
        return f"{self._segment_id_prefix}{uuid.uuid4().hex}"


class ApiToolCallStreamingResponseHandler(StreamingResponseHandler):
    """Structured tool calls (``chunk.tool_calls``): text, reasoning, tool and file segments.

    Args:
        on_segment_event: as `StreamingResponseHandler` takes it.
        segment_id_prefix: as `StreamingResponseHandler` takes it.
        file_tools: tool name -> `operators.segments.FileTool`, whose calls stream their file content as
            decoded text; None: ``write_file`` and ``patch_file``.
        max_argument_size: characters of one call's arguments accepted; None: the splitter's default.

    Raises:
        ConfigurationError: a negative ``max_argument_size``.
    """

    def __init__(
        self,
        *,
        on_segment_event: SegmentCallback | None = None,
        segment_id_prefix: str = "",
        file_tools: Mapping[str, Any] | None = None,
        max_argument_size: int | None = None,
    ) -> None:
        self._file_tools = file_tools
        self._max_argument_size = (
            None
            if max_argument_size is None
            else check_count("max_argument_size", max_argument_size, minimum=0)
        )
        super().__init__(on_segment_event=on_segment_event, segment_id_prefix=segment_id_prefix)

    def _cores(self) -> list[Core[Any, Any]]:
        from operators.arguments.splitter import ArgumentSplitter
        from operators.segments import SegmentEmitter

        splitter = (
            ArgumentSplitter()
            if self._max_argument_size is None
            else ArgumentSplitter(max_argument_size=self._max_argument_size)
        )
        return [splitter, SegmentEmitter(file_tools=self._file_tools, segment_ids=self._segment_id)]


class ParsingStreamingResponseHandler(ApiToolCallStreamingResponseHandler):
    """Tool calls written in the text: ``xml``, ``json``, ``sentinel`` or a delimiter format (``kimi_k2``...).

    The calls are rewritten into tool-call deltas first, so everything downstream is the same as for
    `ApiToolCallStreamingResponseHandler`; text around the calls passes through unchanged.

    Args:
        parser_name: the format the model writes its calls in.
        on_segment_event: as `StreamingResponseHandler` takes it.
        segment_id_prefix: as `StreamingResponseHandler` takes it.
        file_tools: as `ApiToolCallStreamingResponseHandler` takes it.
        max_argument_size: as `ApiToolCallStreamingResponseHandler` takes it.

    Raises:
        ConfigurationError: an unknown ``parser_name`` (the message lists the formats).
    """

    def __init__(
        self,
        *,
        parser_name: str = "xml",
        on_segment_event: SegmentCallback | None = None,
        segment_id_prefix: str = "",
        file_tools: Mapping[str, Any] | None = None,
        max_argument_size: int | None = None,
    ) -> None:
        from operators.delimiters import get_format

        get_format(parser_name)  # fail now, naming the known formats, rather than at the first chunk
        self.parser_name = parser_name
        super().__init__(
            on_segment_event=on_segment_event,
            segment_id_prefix=segment_id_prefix,
            file_tools=file_tools,
            max_argument_size=max_argument_size,
        )

    def _cores(self) -> list[Core[Any, Any]]:
        from operators.delimiters.auto import delimiter_rewriter

        return [delimiter_rewriter(self.parser_name), *super()._cores()]


class PassThroughStreamingResponseHandler(StreamingResponseHandler):
    """Text and reasoning only: tool calls, if any, are ignored (for agents without tools)."""

    def _cores(self) -> list[Core[Any, Any]]:
        from operators.segments import SegmentEmitter

        return [_WithoutToolCalls(), SegmentEmitter(segment_ids=self._segment_id)]


class _WithoutToolCalls:
    def feed(self, chunk: ChunkResponse) -> list[ChunkResponse]:
        if chunk.tool_calls:
            from msgspec.structs import replace

            return [replace(chunk, tool_calls=None)]
        return [chunk]

    def finish(self) -> list[ChunkResponse]:
        return []


def resolve_parser_name(parser_name: str | None = None) -> str:
    """The parser to use: ``parser_name``, else ``$STREAMFOLD_STREAM_PARSER``, else ``api_tool_call``.

    ``none`` gives ``api_tool_call`` (no delimiter rewriting).

    Raises:
        ConfigurationError: a name that is not a string or not known (the message lists the choices).
    """
    if parser_name is not None and not isinstance(parser_name, str):
        raise ConfigurationError(f"parser_name must be a string, got {parser_name!r}")
    name = (parser_name or os.environ.get(PARSER_ENVIRONMENT_VARIABLE) or "api_tool_call").strip().lower()
    if name == "native":
        raise ConfigurationError(
            f"the stream parser 'native' was renamed: set {PARSER_ENVIRONMENT_VARIABLE}=api_tool_call"
        )
    if name == "pass_through":
        return name
    try:
        return resolve_tool_format(name) or "api_tool_call"
    except ConfigurationError:
        check_choice("stream parser", name, ["api_tool_call", "pass_through", *tool_format_choices()])
        raise


def create_streaming_handler(
    parser_name: str | None = None,
    *,
    parse_tool_calls: bool = True,
    on_segment_event: SegmentCallback | None = None,
    segment_id_prefix: str = "",
    file_tools: Mapping[str, Any] | None = None,
    max_argument_size: int | None = None,
) -> StreamingResponseHandler:
    """The handler for a configuration.

    Args:
        parser_name: as `resolve_parser_name` takes it.
        parse_tool_calls: False gives a `PassThroughStreamingResponseHandler`.
        on_segment_event: as `StreamingResponseHandler` takes it.
        segment_id_prefix: as `StreamingResponseHandler` takes it.
        file_tools: as `ApiToolCallStreamingResponseHandler` takes it.
        max_argument_size: as `ApiToolCallStreamingResponseHandler` takes it.

    Raises:
        ConfigurationError: an unknown parser name (the message lists the choices).
    """
    name = resolve_parser_name(parser_name)
    if not parse_tool_calls or name == "pass_through":
        return PassThroughStreamingResponseHandler(
            on_segment_event=on_segment_event, segment_id_prefix=segment_id_prefix
        )
    if name == "api_tool_call":
        return ApiToolCallStreamingResponseHandler(
            on_segment_event=on_segment_event,
            segment_id_prefix=segment_id_prefix,
            file_tools=file_tools,
            max_argument_size=max_argument_size,
        )
    return ParsingStreamingResponseHandler(
        parser_name=name,
        on_segment_event=on_segment_event,
        segment_id_prefix=segment_id_prefix,
        file_tools=file_tools,
        max_argument_size=max_argument_size,
    )
