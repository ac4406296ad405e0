"""The auto adapter: source items (bytes, provider event dicts or SDK objects) to chunks, choosing the framing
and the wire format from the first items that tell (stages 1 and 2 for ``process()`` and ``to_chunks()``).

It sits beside the stage packages because it picks among them: a byte decoder of :mod:`operators.adapter`,
then a converter of :mod:`operators.convert`, fused with :func:`pipeline.stage.chain`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from operators.registry import FRAMINGS, PROVIDERS, check_choice, converter_for
from pipeline._options import check_count
from pipeline.errors import ConfigurationError, ConverterError, ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse
from pipeline.stage import Core, chain

__all__ = ["TextDeltas", "auto_adapter"]


def auto_adapter(
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
    check_choice("provider", provider, ("auto", *PROVIDERS))
    check_choice("framing", framing, FRAMINGS)
    check_count("choice", choice, minimum=0)
    if id_factory is not None and not callable(id_factory):
        raise ConfigurationError(f"id_factory must be a callable (index -> id), got {id_factory!r}")
    return _AutoChunks(provider, framing, id_factory, choice)


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
        failure.partial_outputs = [ChunkResponse(content=before)] if before else []
        return failure


class _LazyConverter:
    """The converter for the wire format of the first event (``provider="auto"``), or the one named."""

    def __init__(self, provider: str, id_factory: Callable[[int], str] | None, choice: int) -> None:
        self._provider = provider
        self._id_factory = id_factory
        self._choice = choice
        self.core: Core[Any, ChunkResponse] | None = None
        """The converter, once chosen."""

    def feed(self, event: Any) -> list[ChunkResponse]:
        if self.core is None:
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
            else:
                _check_named(provider, event)
            self.core = _converter(provider, self._id_factory, self._choice)
        return self.core.feed(event)

    def finish(self) -> list[ChunkResponse]:
        return self.core.finish() if self.core is not None else []


_EXCERPT_KEYS = 8
"""Keys of a first event that a wrong ``provider=`` error quotes, at most."""


def _check_named(provider: str, event: Any) -> None:
    """The first event of a stream read as the wire format ``provider`` (named, not ``auto``): raise
    :class:`ConverterError` when it is plainly another wire format's, rather than convert nothing.

    Checked once, on the first event only. An event no format claims, or an error event, is left to the
    converter, which reads errors and reports what it cannot."""
    if not isinstance(event, Mapping) or "error" in event or event.get("type") == "error":
        return
    from operators.adapter.detect import detect_wire_format

    try:
        detected = detect_wire_format(event)
    except ConfigurationError:
        return
    if detected != provider:
        keys = sorted(map(str, event))
        shown = ", ".join(keys[:_EXCERPT_KEYS]) + (", ..." if len(keys) > _EXCERPT_KEYS else "")
        kind = event.get("type", event.get("event_type"))
        looks = f"type {str(kind)[:40]!r}, keys: {shown}" if isinstance(kind, str) else f"keys: {shown}"
        raise ConverterError(
            f"event 0: the stream was read as provider {provider!r}, but its first event looks like"
            f" {detected!r} ({looks}); pass provider={detected!r} or 'auto'",
            event_number=0,
        )


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
_BOM = codecs.BOM_UTF8


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
        self._chain: Core[Any, ChunkResponse] | None = None
        self._decoder: Core[Any, Any] | None = None
        self._lazy: _LazyConverter | None = None
        """The converter still to be chosen from the first event (``provider="auto"``)."""
        self._feed: Callable[[Any], list[ChunkResponse]] = self._first_feed
        """The feed of the moment: the first, the lazy converter's, then the chain's own."""
        self._head: list[bytes] = []
        self._head_size = 0
        self._seen_item = False
        self._start = b""
        """The first bytes of the stream (up to 12)."""
        self._probe = b""
        """Up to :data:`_PROBE` bytes from the first that is neither a BOM nor whitespace."""

    def feed(self, item: Any) -> list[ChunkResponse]:
        return self._feed(item)

    def _use(self, feed: Callable[[Any], list[ChunkResponse]]) -> None:
        """Make ``feed`` the feed of the moment; also as this instance's ``feed``, so that a caller that
        looks ``feed`` up at each item (:func:`pipeline.stage.chain`) calls it without this wrapper's call."""
        self._feed = self.feed = feed  # type: ignore[method-assign,assignment]

    def _first_feed(self, item: Any) -> list[ChunkResponse]:
        """Until the decoder is chosen: choose it from ``item`` (or from the head, once it tells)."""
        self._seen_item = True
        decoder = self._decoder_for(item)
        if decoder is None:
            return []  # the framing is not known yet: the bytes wait in the head
        self._chain = self._chain_with(decoder)
        self._use(self._chain.feed if self._lazy is None else self._lazy_feed)
        if self._head:
            item, self._head = b"".join(self._head), []
        return self._feed(item)

    def _lazy_feed(self, item: Any) -> list[ChunkResponse]:
        """Until the converter is chosen from the first event; then it replaces the lazy one."""
        chunks = self._chain.feed(item) if self._chain is not None else []
        lazy = self._lazy
        if lazy is not None and lazy.core is not None and self._decoder is not None:
            self._chain, self._lazy = _fused(self._decoder, lazy.core), None
            self._use(self._chain.feed)
        return chunks

    def finish(self) -> list[ChunkResponse]:
        outputs: list[ChunkResponse] = []
        if self._chain is None:
            if self._provider == "text":
                return []
            if not self._seen_item:
                raise StreamDecodeError("the stream ended before its first item (an empty body)", offset=0)
            decoder = self._choose_framing(b"", complete=True)  # complete: it decides or raises
            if decoder is None:
                raise self._unknown()  # not reached: complete framing decides or raises
            self._chain = self._chain_with(decoder)
            head, self._head = b"".join(self._head), []
            outputs += self._chain.feed(head)
        outputs += self._chain.finish()
        return outputs

    def _chain_with(self, decoder: Core[Any, Any]) -> Core[Any, ChunkResponse]:
        self._decoder = decoder
        if self._provider == "text":
            return decoder
        # The converter is made at the first event: chosen from it (auto), or checked against it (named).
        self._lazy = _LazyConverter(self._provider, self._id_factory, self._choice)
        return chain(decoder, self._lazy)

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
                if len(head) < len(_BOM) and _BOM.startswith(head) and not complete:
                    return None  # maybe a BOM, split
                content = _SPACE.match(head, len(_BOM) if head.startswith(_BOM) else 0).end()  # type: ignore[union-attr]
                self._probe = head[content : content + _PROBE]
            else:
                if len(self._start) < 12:  # a first read of fewer than 12 bytes, then a large one
                    self._start = (self._start + data)[:12]
                if not self._probe:
                    # The earlier reads held whitespace, or the start of a BOM whose rest opens this one.
                    before = self._head_size - len(data)
                    rest = len(_BOM) - before if before < len(_BOM) and self._start.startswith(_BOM) else 0
                    content = _SPACE.match(data, rest).end()  # type: ignore[union-attr]
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


def _fused(decoder: Core[Any, Any], converter: Core[Any, ChunkResponse]) -> Core[Any, ChunkResponse]:
    """``chain(decoder, converter)``; :class:`operators.adapter.sse.FusedSSE` when the decoder is SSE's
    (:class:`~operators.adapter.sse.SSEPayloadDecoder`) and the converter decodes live events itself
    (``feed_json``: OpenAI Chat)."""
    from operators.adapter.sse import FusedSSE, SSEPayloadDecoder

    if isinstance(decoder, SSEPayloadDecoder) and hasattr(converter, "feed_json"):
        return cast(Core[Any, ChunkResponse], FusedSSE(decoder, converter))
    return chain(decoder, converter)
