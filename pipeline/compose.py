"""One call from a provider's stream to events: the whole pipeline for agent code.

::

    async with process(response.aiter_bytes(), provider="anthropic").stream() as events:
        async for event in events:
            match event:
                case ToolInvocation():  ...   # folded the moment the call is complete
                case SegmentEvent():    ...   # text, reasoning, tool and file segments as they stream

The stages are those of the operators of `operators`: `process` chooses them and runs their
sans-IO cores in one loop (one async hop in all, not one per stage). A source may carry
SSE or JSON-lines bytes, provider event dicts, or provider SDK objects; ``provider="auto"`` and
``framing="auto"`` look at the first item to decide. A source may also be a plain (synchronous) iterable,
e.g. a list of provider dicts, or one ``bytes`` object holding a whole body.

Every option is checked when the pipeline is built: a bad value raises `ConfigurationError` naming
the option and its choices. ``tool_format="none"`` (or ``None``, the default) means no delimiter rewriting;
``"api_tool_call"`` is accepted as an alias of ``"none"``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncIterable, AsyncIterator, Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from aiostream import Stream, operator
from aiostream.core import Streamer

from operators.auto import auto_adapter
from operators.registry import (
    FRAMINGS,
    PROVIDERS,
    FramingOption,
    ProviderOption,
    RegisteredFormat,
    ToolFormat,
    resolve_tool_format,
)
from pipeline._options import check_count
from pipeline.errors import ConfigurationError
from pipeline.models import ChunkResponse, PipelineEvent
from pipeline.stage import Core, GeneratorStreamer, chain, drive, operator_stream

if TYPE_CHECKING:
    import httpx

    from pipeline.telemetry import Telemetry

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

T = TypeVar("T")

Provider: TypeAlias = ProviderOption
"""The ``provider=`` option (`operators.registry.ProviderOption`)."""
Framing: TypeAlias = FramingOption
"""The ``framing=`` option (`operators.registry.FramingOption`)."""
ChunkSource: TypeAlias = (
    "AsyncIterable[bytes] | AsyncIterable[Mapping[str, Any]] | AsyncIterable[Any] | Iterable[Any] | bytes"
    " | httpx.Response"
)


def _async_source(source: object) -> AsyncIterable[Any]:
    """``source`` as an async iterable: async iterables as they are, an ``httpx.Response`` as
    `operators.adapter.sources.from_httpx` reads it (an error status raises the provider's error), a
    ``bytes`` body as one item, a plain iterable (a list of provider dicts, a generator of SDK objects) item
    by item."""
    httpx = sys.modules.get("httpx")  # not imported: the source cannot be one of its responses
    if httpx is not None and isinstance(source, httpx.Response):
        from operators.adapter.sources import from_httpx

        return cast(AsyncIterable[Any], from_httpx.raw(source))
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


def _adapted(source: AsyncIterable[Any]) -> AsyncIterable[Any]:
    """An SDK stream is read through `operators.adapter.sources.from_sdk`, so that the in-band errors
    the SDK raises as its own exceptions come out as `ProviderError`, as from raw bytes."""
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

    Args:
        provider: as `to_chunks` takes it.
        framing: as `to_chunks` takes it.
        id_factory: as `to_chunks` takes it.
        choice: as `to_chunks` takes it.

    Raises:
        ConfigurationError: an unknown ``provider`` or ``framing``, a ``choice`` below 0.
    """
    return auto_adapter(provider=provider, framing=framing, id_factory=id_factory, choice=choice)


@operator
def to_chunks(
    source: ChunkSource,
    *,
    provider: Provider = "auto",
    framing: Framing = "auto",
    id_factory: Callable[[int], str] | None = None,
    choice: int = 0,
) -> Any:
    """Stages 1 and 2: bytes, provider dicts or SDK objects to `ChunkResponse`s.

    Args:
        source: as `process` takes it; a plain iterable too.
        provider: the wire format (one of `PROVIDERS`), or ``auto``.
        framing: ``sse`` or ``jsonl`` for byte sources, or ``auto``.
        id_factory: makes ids for tool calls that arrive without one.
        choice: which of an OpenAI response's ``n`` choices becomes the stream (the others are ignored);
            run one pipeline per choice to follow several.

    Returns:
        An aiostream stream of `ChunkResponse`.
    """
    core = chunk_core(provider=provider, framing=framing, id_factory=id_factory, choice=choice)
    return operator_stream(_adapted(_async_source(source)), core)


def process(
    source: ChunkSource,
    *,
    provider: Provider = "auto",
    framing: Framing = "auto",
    tool_format: ToolFormat | RegisteredFormat | None = None,
    reasoning_tags: str | tuple[str, str] | None = None,
    start_in_reasoning: bool | None = None,
    file_tools: Mapping[str, Any] | None = None,
    tools: Mapping[str, Any] | None = None,
    max_argument_size: int | None = None,
    id_factory: Callable[[int], str] | None = None,
    segment_ids: Callable[[Any], str] | None = None,
    choice: int = 0,
    telemetry: Telemetry | None = None,
    offered_tools: Collection[str] | None = None,
    fold: bool = True,
) -> Stream[PipelineEvent]:
    """The whole pipeline: adapter, converter, [delimiter rewriter], splitter, emitter, folder.

    The stages are the cores of the operators (`to_chunks`, ``rewrite_delimiters``,
    ``split_arguments``, ``emit_segments``, ``fold_invocations``), run by one loop: the events are the
    same as those of the operators piped one after another, failures included, without an async hop per
    stage.

    Args:
        source: an ``httpx.Response`` (streaming, from ``client.stream(...)``: read as
            `from_httpx` reads it, so an error status raises
            `ProviderError` with the provider's message and the status); an async iterable (or a
            plain iterable, such as a list) of SSE or JSON-lines bytes (an HTTP body, a file), of provider
            event dicts, or of SDK objects; or one ``bytes`` object.
        provider: the wire format (one of `PROVIDERS`), or ``auto`` to detect it from the first event.
            A first event plainly of another wire format raises `ConverterError` naming it.
        framing: ``sse`` or ``jsonl`` for byte sources, or ``auto``.
        tool_format: a delimiter format (``kimi_k2``, ``hermes``, ...) whose tool calls are embedded in
            the text; ``"none"`` (or ``None``, the default) when the provider sends structured tool calls.
            ``"api_tool_call"`` is an alias of ``"none"``.
        reasoning_tags: ``"think"`` (``<think>...</think>``: DeepSeek-R1, Qwen3, QwQ, GLM, MiniMax),
            ``"kimi"`` (``◁think▷...◁/think▷``), ``"granite"``, ``"hunyuan"``, ``"ernie"``, ``"step3"``,
            ``"step3p5"``, ``"seed_oss"``, ``"harmony"`` (the analysis channel as text), or an (opening,
            closing) pair: the reasoning the model writes in the text becomes reasoning (before the
            delimiter rewriter). ``None`` (the default): text stays text.
        start_in_reasoning: with ``reasoning_tags``, each response begins inside reasoning (the chat
            template opened the tag); ``None``: the format's default (``True`` for ERNIE, Step-3 and
            Seed-OSS); see `operators.delimiters.reasoning_tags.ReasoningTagSplitter`.
        file_tools: tool name -> `operators.segments.FileTool` (default: write_file, patch_file).
        tools: tool name -> pydantic model that each invocation's arguments are validated against.
        max_argument_size: cap, in characters, of one call's arguments (``too_large`` beyond it), >= 0.
        id_factory: makes ids for tool calls that arrive without one (tests pass a deterministic one).
        segment_ids: makes ids of text and reasoning segments.
        choice: which of an OpenAI Chat Completions response's ``n`` choices to follow (default 0; the
            others are ignored: run one pipeline per choice to follow several).
        telemetry: a `pipeline.telemetry.Telemetry` (the ``telemetry`` extra): the response gets an
            OpenTelemetry GenAI span and metrics. ``None`` (the default): nothing is measured.
        offered_tools: with ``tool_format``, the names of the tools the request offered: a delimiter call
            to any other tool stays the text the model wrote (see
            `operators.delimiters.DelimiterRewriter`). ``None`` (the default): any name is a call.
        fold: True (the default): each tool call is folded into a `ToolInvocation` with its
            arguments. False, for consumers of the segments only (a UI, a proxy): the arguments stream as
            segment events but are never built, so memory stays flat however long they are; no
            invocations, and a tool segment's END has no ``arguments``.

    Returns:
        An aiostream ``Stream`` of `PipelineEvent`: iterate it with ``async with ....stream()``, or
        pipe more operators onto it. Closing it closes the source.

    Raises:
        ConfigurationError: at once, for a bad option (naming it and its choices) or a source that is
            not iterable.
    """
    return _EventStream(
        functools.partial(
            _pipeline,
            source,
            provider=provider,
            framing=framing,
            tool_format=tool_format,
            reasoning_tags=reasoning_tags,
            start_in_reasoning=start_in_reasoning,
            file_tools=file_tools,
            tools=tools,
            max_argument_size=max_argument_size,
            id_factory=id_factory,
            segment_ids=segment_ids,
            choice=choice,
            telemetry=telemetry,
            offered_tools=offered_tools,
            fold=fold,
        )
    )


class _EventStream(Stream[T]):
    """An aiostream ``Stream`` (pipe it with ``|``, ``await`` it, slice it) whose ``.stream()`` context
    iterates the pipeline's own async generator: one generator step per event, not aiostream's
    Python-level ``__anext__`` wrapper around it, which costs more per event than the stages it wraps.

    Each iteration runs ``factory`` anew, as an operator's stream does; the first run is made at once,
    so that a bad option raises when the stream is built."""

    def __init__(self, factory: Callable[[], AsyncIterator[T]]) -> None:
        # Not Stream.__init__: it would keep its own first iterator; iterating goes through __aiter__.
        self._factory = factory
        self._first: AsyncIterator[T] | None = factory()

    def stream(self) -> Streamer[T]:
        """A streamer context that closes the pipeline (and so the source) on leaving ``async with``."""
        return GeneratorStreamer(self._iterator())

    def __aiter__(self) -> AsyncIterator[T]:  # type: ignore[override]  # the generator itself
        """``async for event in process(...)`` iterates the pipeline's generator directly (no context, so no
        aiostream warning; the generator closes the source when it is closed or collected)."""
        return self._iterator()

    def _iterator(self) -> AsyncIterator[T]:
        iterator, self._first = self._first or self._factory(), None
        return iterator


def _pipeline(
    source: ChunkSource,
    *,
    provider: str,
    framing: str,
    tool_format: str | None,
    reasoning_tags: str | tuple[str, str] | None,
    start_in_reasoning: bool | None,
    file_tools: Mapping[str, Any] | None,
    tools: Mapping[str, Any] | None,
    max_argument_size: int | None,
    id_factory: Callable[[int], str] | None,
    segment_ids: Callable[[Any], str] | None,
    choice: int,
    telemetry: Telemetry | None = None,
    offered_tools: Collection[str] | None = None,
    fold: bool = True,
) -> AsyncIterator[PipelineEvent]:
    """`process`'s stream. Its cores are made with it (so bad options raise at once) and anew for
    each later iteration, as the operators' are."""
    from operators.arguments.splitter import ArgumentSplitter
    from operators.invocations import InvocationFolder
    from operators.segments import SegmentEmitter

    stages: list[Core[Any, Any]] = [
        auto_adapter(provider=provider, framing=framing, id_factory=id_factory, choice=choice)
    ]
    if reasoning_tags is not None:
        from operators.delimiters.reasoning_tags import ReasoningTagSplitter

        stages.append(ReasoningTagSplitter(reasoning_tags, start_in_reasoning=start_in_reasoning))
    delimiter_format = resolve_tool_format(tool_format)
    if offered_tools is not None and delimiter_format is None:
        raise ConfigurationError("offered_tools names the tools of delimiter calls: give a tool_format too")
    if delimiter_format is not None:
        from operators.delimiters.auto import delimiter_rewriter

        stages.append(
            delimiter_rewriter(delimiter_format, id_factory=id_factory, offered_tools=offered_tools)
        )
    if not isinstance(fold, bool):
        raise ConfigurationError(f"fold must be True or False, got {fold!r}")
    if tools is not None and not fold:
        raise ConfigurationError("tools validates folded invocations: it needs fold=True")
    split_options: dict[str, Any] = {"keep_values": fold}
    if max_argument_size is not None:
        split_options["max_argument_size"] = check_count("max_argument_size", max_argument_size, minimum=0)
    # The splitter, emitter and folder as one core: the same events as chained, without a call per text
    # chunk and event to the other two (see `SegmentEmitter`).
    stages.append(
        SegmentEmitter(
            file_tools=file_tools,
            segment_ids=segment_ids,
            call_ids=id_factory,
            keep_values=fold,
            splitter=ArgumentSplitter(**split_options),
            folder=InvocationFolder(tools=tools) if fold else None,
        )
    )
    if telemetry is not None:
        return telemetry.instrument(_adapted(_async_source(source)), stages, provider=provider)
    return drive(_adapted(_async_source(source)), chain(*stages))
