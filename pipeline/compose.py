"""One call from a provider's stream to events: the whole pipeline for agent code.

::

    async with process(response.aiter_bytes(), provider="anthropic").stream() as events:
        async for event in events:
            match event:
                case ToolInvocation():  ...   # folded the moment the call is complete
                case SegmentEvent():    ...   # text, reasoning, tool and file segments as they stream

The stages are those of the operators of :mod:`operators`: :func:`process` chooses them and runs their
sans-IO cores in one loop (one async hop in all, not one per stage). A source may carry
SSE or JSON-lines bytes, provider event dicts, or provider SDK objects; ``provider="auto"`` and
``framing="auto"`` look at the first item to decide. A source may also be a plain (synchronous) iterable,
e.g. a list of provider dicts, or one ``bytes`` object holding a whole body.

Every option is checked when the pipeline is built: a bad value raises :class:`ConfigurationError` naming
the option and its choices. ``tool_format="none"`` (or ``None``, the default) means no delimiter rewriting;
``"api_tool_call"`` is accepted as an alias of ``"none"``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from aiostream import Stream, operator

from operators.registry import (
    FRAMINGS,
    PROVIDERS,
    FramingOption,
    ProviderOption,
    RegisteredFormat,
    ToolFormat,
    check_choice,
    converter_for,
    resolve_tool_format,
)
from pipeline._options import check_count
from pipeline.errors import ConfigurationError, ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse, PipelineEvent
from pipeline.stage import Chain, Core, drive, partial_outputs

if TYPE_CHECKING:
    from operators.invocations import InvocationFolder
    from operators.segments import SegmentEmitter

__all__ = [
    "FRAMINGS",
    "PROVIDERS",
    "ChunkSource",
    "Framing",
    "Provider",
    "chunk_core",
    "process",
    "to_chunks",
]

Provider: TypeAlias = ProviderOption
"""The ``provider=`` option (:data:`operators.registry.ProviderOption`)."""
Framing: TypeAlias = FramingOption
"""The ``framing=`` option (:data:`operators.registry.FramingOption`)."""
ChunkSource: TypeAlias = (
    AsyncIterable[bytes] | AsyncIterable[Mapping[str, Any]] | AsyncIterable[Any] | Iterable[Any] | bytes
)


def _check_adapter_options(provider: object, framing: object, id_factory: object, choice: object) -> None:
    """The options of stages 1 and 2, checked before anything runs (see :mod:`pipeline._options`)."""
    check_choice("provider", provider, ("auto", *PROVIDERS))
    check_choice("framing", framing, FRAMINGS)
    check_count("choice", choice, minimum=0)
    if id_factory is not None and not callable(id_factory):
        raise ConfigurationError(f"id_factory must be a callable (index -> id), got {id_factory!r}")


def _async_source(source: object) -> AsyncIterable[Any]:
    """``source`` as an async iterable: async iterables as they are, a ``bytes`` body as one item, a plain
    iterable (a list of provider dicts, a generator of SDK objects) item by item."""
    if isinstance(source, AsyncIterable):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        return _items([bytes(source)])
    if isinstance(source, str | Mapping) or not isinstance(source, Iterable):
        raise ConfigurationError(
            "a source is an async or plain iterable of bytes, provider event dicts or SDK objects"
            f" (or one bytes object), not {type(source).__name__}"
        )
    return _items(source)


async def _items(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def _converter(
    provider: str, id_factory: Callable[[int], str] | None, choice: int = 0
) -> Core[Any, ChunkResponse]:
    return converter_for(provider, id_factory=id_factory, choice=choice)


class TextDeltas:
    """Plain model text (``provider="text"``): each piece of text, or of UTF-8 bytes, is one content delta.

    Bytes that are not UTF-8 raise :class:`StreamDecodeError` naming their byte offset in the stream, after a
    chunk with the text before them."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._offset = 0
        """Bytes fed so far."""

    def feed(self, item: bytes | str) -> list[ChunkResponse]:
        if isinstance(item, bytes | bytearray):
            self._offset += len(item)
            try:
                text = self._decoder.decode(item)
            except UnicodeDecodeError as error:
                raise self._invalid(error) from None
        else:
            text = item
        return [ChunkResponse(content=text)] if text else []

    def finish(self) -> list[ChunkResponse]:
        """The text ended normally: a last chunk says so (``stop``; the rewriter makes it ``tool_calls``)."""
        try:
            text = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise self._invalid(error) from None
        return [ChunkResponse(content=text, finish_reason="stop", is_complete=True)]

    def _invalid(self, error: UnicodeDecodeError) -> StreamDecodeError:
        """The error for ``error`` (whose ``object`` is the decoder's held bytes and the last item), carrying
        the text before the bad bytes."""
        position = self._offset - len(error.object) + error.start
        failure = StreamDecodeError(
            f"invalid UTF-8 at byte {position} of the text stream: {error.reason}", offset=position
        )
        before = bytes(error.object[: error.start]).decode("utf-8")
        failure.streamfold_partial_outputs = [ChunkResponse(content=before)] if before else []  # type: ignore[attr-defined]
        return failure


class _LazyConverter:
    """The converter for the wire format of the first event (``provider="auto"``), or the one named."""

    def __init__(self, provider: str, id_factory: Callable[[int], str] | None, choice: int) -> None:
        self._provider = provider
        self._id_factory = id_factory
        self._choice = choice
        self._core: Core[Any, ChunkResponse] | None = None

    def feed(self, event: Any) -> list[ChunkResponse]:
        if self._core is None:
            provider = self._provider
            if provider == "auto":
                from operators.adapter.detect import detect_wire_format

                try:
                    provider = detect_wire_format(event)
                except ConfigurationError as error:
                    body = _error_body(event)
                    if body is None:
                        raise
                    raise body from error

            self._core = _converter(provider, self._id_factory, self._choice)
        chunks = self._core.feed(event)
        return chunks if isinstance(chunks, list) else list(chunks)

    def finish(self) -> list[ChunkResponse]:
        return list(self._core.finish()) if self._core is not None else []


def _error_body(event: Any) -> ProviderError | None:
    """A first event of no known wire format that carries a message (``{"message": ...}``, FastAPI's
    ``{"detail": ...}``): an HTTP error body, as a :class:`ProviderError`."""
    if not isinstance(event, Mapping):
        return None
    message = event.get("message") or event.get("detail")
    if not message:
        return None
    return ProviderError.from_payload({"message": message}, event, "event 0")


_MAX_HEAD = 64 * 1024
"""Cap, in bytes, of what ``framing="auto"`` holds before it can tell the framing (leading blank lines)."""
_PROBE = 64
"""Bytes of content that auto framing looks at, at most (also the length of the excerpt it quotes)."""
_SMALL_HEAD = 256
_SPACE = re.compile(rb"[ \t\r\n]*")


class _AutoChunks:
    """Source items to chunks, choosing framing and wire format from the first items that tell.

    Auto framing decides within a bounded head (see :func:`operators.adapter.detect.sniff_framing`): it
    holds at most :data:`_MAX_HEAD` bytes, joined once, when it decides.
    """

    def __init__(
        self, provider: str, framing: str, id_factory: Callable[[int], str] | None, choice: int
    ) -> None:
        if provider not in ("auto", "text"):
            _converter(provider, id_factory, choice)  # raises ConfigurationError naming the choices
        self._provider = provider
        self._framing = framing
        self._id_factory = id_factory
        self._choice = choice
        self._chain: Chain | None = None
        self._head: list[bytes] = []
        self._head_size = 0
        self._seen_item = False
        self._start = b""
        """The first bytes of the stream (up to 12)."""
        self._probe = b""
        """Up to :data:`_PROBE` bytes from the first that is neither a BOM nor whitespace."""

    def feed(self, item: Any) -> list[ChunkResponse]:
        if self._chain is None:
            self._seen_item = True
            decoder = self._decoder_for(item)
            if decoder is None:
                return []  # the framing is not known yet: the bytes wait in the head
            self._chain = self._chain_with(decoder)
            if self._head:
                head, self._head = b"".join(self._head), []
                return cast(list[ChunkResponse], self._chain.feed(head))
        return cast(list[ChunkResponse], self._chain.feed(item))

    def finish(self) -> list[ChunkResponse]:
        outputs: list[object] = []
        if self._chain is None:
            if self._provider == "text":
                return []
            if not self._seen_item:
                raise StreamDecodeError("the stream ended before its first item (an empty body)", offset=0)
            decoder = self._choose_framing(b"", complete=True)  # complete: it decides or raises
            self._chain = self._chain_with(cast(Core[Any, Any], decoder))
            head, self._head = b"".join(self._head), []
            outputs.extend(self._chain.feed(head))
        outputs.extend(self._chain.finish())
        return cast(list[ChunkResponse], outputs)

    def _chain_with(self, decoder: Core[Any, Any]) -> Chain:
        if self._provider == "text":
            return Chain(decoder)
        if self._provider == "auto":
            return Chain(decoder, _LazyConverter(self._provider, self._id_factory, self._choice))
        return Chain(decoder, _converter(self._provider, self._id_factory, self._choice))

    def _decoder_for(self, item: Any) -> Core[Any, Any] | None:
        if self._provider == "text":
            return TextDeltas()
        if isinstance(item, bytes | bytearray):
            if self._framing == "auto":
                return self._choose_framing(bytes(item))
            return self._byte_decoder(self._framing)
        if isinstance(item, Mapping):
            return _Identity()
        return _SDKObjects()

    def _choose_framing(self, data: bytes, *, complete: bool = False) -> Core[Any, Any] | None:
        """The decoder for the framing the first bytes show, once they show it; until then they wait in
        the head. Bytes of no known framing, or none but whitespace, raise :class:`StreamDecodeError`."""
        from operators.adapter.detect import sniff_framing

        if data:
            self._head.append(data)
            self._head_size += len(data)
            if len(self._head) == 1 or self._head_size <= _SMALL_HEAD:
                # The first read, or a few hundred bytes at most: bounded work per read.
                head = data if len(self._head) == 1 else b"".join(self._head)
                self._start = head[:12]
                if len(head) < 3 and b"\xef\xbb\xbf".startswith(head) and not complete:
                    return None  # maybe a BOM, split
                content = _SPACE.match(head, 3 if head.startswith(b"\xef\xbb\xbf") else 0).end()  # type: ignore[union-attr]
                self._probe = head[content : content + _PROBE]
            elif not self._probe:
                content = _SPACE.match(data).end()  # type: ignore[union-attr]
                self._probe = data[content : content + _PROBE]
            elif len(self._probe) < _PROBE:
                self._probe += data[: _PROBE - len(self._probe)]
        framing = sniff_framing(self._start, self._probe, complete=complete)
        too_long = self._head_size > _MAX_HEAD
        if framing == "unknown":
            probe = self._probe
            if complete or too_long or len(probe) >= _PROBE or b"\n" in probe or b"\r" in probe:
                raise self._unknown()
            return None
        if framing is None:
            if too_long:
                raise StreamDecodeError(
                    f"no content in the first {self._head_size} bytes of the stream (more than "
                    f"{_MAX_HEAD}, the cap of auto framing): its framing cannot be told",
                    offset=0,
                )
            return None
        return self._byte_decoder(framing)

    def _unknown(self) -> StreamDecodeError:
        if not self._probe:
            what = "is empty" if not self._head_size else f"holds only whitespace ({self._head_size} bytes)"
            return StreamDecodeError(f"the body {what}: no event came", offset=0)
        start = self._probe if self._head_size > _SMALL_HEAD else b"".join(self._head)[:_PROBE]
        return StreamDecodeError(
            "the body is neither SSE, JSON Lines, a JSON array nor an AWS event-stream (an error page?); "
            f"it starts with {start!r}",
            offset=0,
        )

    @staticmethod
    def _byte_decoder(framing: str) -> Core[Any, Any]:
        from operators.adapter.sse import JSONLinesDecoder, JSONSequenceDecoder, SSEPayloadDecoder

        if framing == "jsonl":
            return JSONLinesDecoder()
        if framing == "json":
            return JSONSequenceDecoder()
        if framing == "eventstream":
            from operators.adapter.eventstream import EventStreamDecoder

            return EventStreamDecoder()
        if framing == "sse":
            return SSEPayloadDecoder()
        raise ConfigurationError(
            f"unknown framing {framing!r}; expected auto, sse, jsonl, json or eventstream"
        )


class _Identity:
    def feed(self, item: Any) -> list[Any]:
        return [item]

    def finish(self) -> list[Any]:
        return []


class _SDKObjects:
    """Provider SDK objects (openai, anthropic, google-genai pydantic models) to their wire dicts."""

    def feed(self, item: Any) -> list[Mapping[str, Any]]:
        from operators.adapter.sources import sdk_object_to_dict

        return [sdk_object_to_dict(item)]

    def finish(self) -> list[Mapping[str, Any]]:
        return []


def _adapted(source: AsyncIterable[Any]) -> AsyncIterable[Any]:
    """An SDK stream is read through :func:`operators.adapter.sources.from_sdk`, so that the in-band errors
    the SDK
    raises as its own exceptions come out as :class:`ProviderError`, as from raw bytes."""
    from operators.adapter.sources import from_sdk, is_sdk_stream

    return cast(AsyncIterable[Any], from_sdk.raw(source)) if is_sdk_stream(source) else source


def chunk_core(
    *,
    provider: str = "auto",
    framing: str = "auto",
    id_factory: Callable[[int], str] | None = None,
    choice: int = 0,
) -> Core[Any, ChunkResponse]:
    """The sans-IO adapter and converter: source items (bytes, dicts or SDK objects) to chunks.

    Raises:
        ConfigurationError: an unknown ``provider`` or ``framing``, a ``choice`` below 0.
    """
    _check_adapter_options(provider, framing, id_factory, choice)
    return _AutoChunks(provider, framing, id_factory, choice)


@operator
def to_chunks(
    source: ChunkSource,
    *,
    provider: Provider = "auto",
    framing: Framing = "auto",
    id_factory: Callable[[int], str] | None = None,
    choice: int = 0,
) -> Any:
    """Stages 1 and 2: bytes, provider dicts or SDK objects to :class:`ChunkResponse`\\ s.

    ``choice`` picks which of an OpenAI response's ``n`` choices becomes the stream (the others are
    ignored); run one pipeline per choice to follow several. The source may be a plain iterable too."""
    core = chunk_core(provider=provider, framing=framing, id_factory=id_factory, choice=choice)
    return drive(_adapted(_async_source(source)), core)


def process(
    source: ChunkSource,
    *,
    provider: Provider = "auto",
    framing: Framing = "auto",
    tool_format: ToolFormat | RegisteredFormat | None = None,
    file_tools: Mapping[str, Any] | None = None,
    tools: Mapping[str, Any] | None = None,
    max_argument_size: int | None = None,
    id_factory: Callable[[int], str] | None = None,
    segment_ids: Callable[[Any], str] | None = None,
    choice: int = 0,
) -> Stream[PipelineEvent]:
    """The whole pipeline: adapter, converter, [delimiter rewriter], splitter, emitter, folder.

    The stages are the cores of the operators (:func:`to_chunks`, ``rewrite_delimiters``,
    ``split_arguments``, ``emit_segments``, ``fold_invocations``), run by one loop: the events are the
    same as those of the operators piped one after another, failures included, without an async hop per
    stage.

    Args:
        source: an async iterable (or a plain iterable, such as a list) of SSE or JSON-lines bytes (an HTTP
            body, a file), of provider event dicts, or of SDK objects; or one ``bytes`` object.
        provider: the wire format (one of :data:`PROVIDERS`), or ``auto`` to detect it from the first event.
        framing: ``sse`` or ``jsonl`` for byte sources, or ``auto``.
        tool_format: a delimiter format (``kimi_k2``, ``hermes``, ...) whose tool calls are embedded in
            the text; ``"none"`` (or ``None``, the default) when the provider sends structured tool calls.
            ``"api_tool_call"`` is an alias of ``"none"``.
        file_tools: tool name -> :class:`operators.segments.FileTool` (default: write_file, patch_file).
        tools: tool name -> pydantic model that each invocation's arguments are validated against.
        max_argument_size: cap, in characters, of one call's arguments (``too_large`` beyond it), >= 0.
        id_factory: makes ids for tool calls that arrive without one (tests pass a deterministic one).
        segment_ids: makes ids of text and reasoning segments.
        choice: which of an OpenAI Chat Completions response's ``n`` choices to follow (default 0; the
            others are ignored: run one pipeline per choice to follow several).

    Returns:
        An aiostream ``Stream`` of :data:`PipelineEvent`: iterate it with ``async with ....stream()``, or
        pipe more operators onto it. Closing it closes the source.

    Raises:
        ConfigurationError: at once, for a bad option (naming it and its choices) or a source that is
            not iterable.
    """
    return _pipeline(
        source,
        provider=provider,
        framing=framing,
        tool_format=tool_format,
        file_tools=file_tools,
        tools=tools,
        max_argument_size=max_argument_size,
        id_factory=id_factory,
        segment_ids=segment_ids,
        choice=choice,
    )


@operator
def _pipeline(
    source: ChunkSource,
    *,
    provider: str,
    framing: str,
    tool_format: str | None,
    file_tools: Mapping[str, Any] | None,
    tools: Mapping[str, Any] | None,
    max_argument_size: int | None,
    id_factory: Callable[[int], str] | None,
    segment_ids: Callable[[Any], str] | None,
    choice: int,
) -> Any:
    """:func:`process`'s stream. Its cores are made with it (so bad options raise at once) and anew for
    each later iteration, as the operators' are."""
    from operators.arguments.splitter import ArgumentSplitter
    from operators.invocations import InvocationFolder
    from operators.segments import SegmentEmitter

    stages: list[Core[Any, ChunkResponse]] = [
        chunk_core(provider=provider, framing=framing, id_factory=id_factory, choice=choice)
    ]
    delimiter_format = resolve_tool_format(tool_format)
    if delimiter_format is not None:
        from operators.delimiters import DelimiterRewriter

        stages.append(DelimiterRewriter(delimiter_format, id_factory=id_factory))
    split_options: dict[str, Any] = {}
    if max_argument_size is not None:
        split_options["max_argument_size"] = check_count("max_argument_size", max_argument_size, minimum=0)
    stages.append(ArgumentSplitter(**split_options))
    emitter = SegmentEmitter(file_tools=file_tools, segment_ids=segment_ids, call_ids=id_factory)
    core = _PipelineCore(Chain(*stages), emitter, InvocationFolder(tools=tools))
    return drive(_adapted(_async_source(source)), core)


class _PipelineCore:
    """The stages of :func:`process` as one core: the chunk stages, then the emitter and the folder.

    Failures go as through the operators piped one after another: what a stage produced before failing
    flows on through the stages after it; when the source or a chunk stage fails, the emitter closes the
    open segments (a tool call gets an ``interrupted`` error) and the folder folds them, and then the
    exception propagates.
    """

    def __init__(self, chunks: Core[Any, Any], emitter: SegmentEmitter, folder: InvocationFolder):
        self._chunks = chunks
        self._emitter = emitter
        self._folder = folder

    def feed(self, item: Any) -> list[PipelineEvent]:
        try:
            chunks = self._chunks.feed(item)
        except Exception as failure:
            self._interrupt(failure)
            raise
        return self._events(chunks)

    def finish(self) -> list[PipelineEvent]:
        try:
            chunks = self._chunks.finish()
        except Exception as failure:
            self._interrupt(failure)
            raise
        return self._events(chunks, finish=True)

    def abort(self, failure: Exception) -> list[PipelineEvent]:
        """The source failed: close the open segments and fold them."""
        events: list[PipelineEvent] = []
        fold = self._folder.feed
        for event in self._emitter.abort(failure):
            events.extend(fold(event))
        return events

    def _interrupt(self, failure: Exception) -> None:
        """A chunk stage failed: the events of what it produced before, then those of the abort, travel on
        ``failure`` (see :func:`pipeline.stage.partial_outputs`)."""
        events = self._events(partial_outputs(failure))
        events.extend(self.abort(failure))
        failure.streamfold_partial_outputs = events  # type: ignore[attr-defined]

    def _events(self, chunks: Iterable[ChunkResponse], *, finish: bool = False) -> list[PipelineEvent]:
        """Chunks through the emitter and the folder (then their ends, when ``finish``). If one of them
        fails, the events before travel on the exception."""
        events: list[PipelineEvent] = []
        emit, fold = self._emitter.feed, self._folder.feed
        try:
            for chunk in chunks:
                for event in emit(chunk):
                    events.extend(fold(event))
            if finish:
                for event in self._emitter.finish():
                    events.extend(fold(event))
                events.extend(self._folder.finish())
        except Exception as failure:
            failure.streamfold_partial_outputs = events + partial_outputs(failure)  # type: ignore[attr-defined]
            raise
        return events
