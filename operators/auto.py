"""The auto adapter: source items (bytes, provider event dicts or SDK objects) to chunks, choosing the framing
and the wire format from the first items that tell (stages 1 and 2 for ``process()`` and ``to_chunks()``).

It sits beside the stage packages because it picks among them: a byte decoder of `operators.adapter`,
then a converter of `operators.convert`, fused with `pipeline.stage.chain`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from operators.registry import FRAMINGS, PROVIDERS, check_choice, converter_for
from pipeline._jsonenc import JSON_ERRORS, json_problem
from pipeline._options import check_count
from pipeline.errors import ConfigurationError, ConverterError, ProviderError, StreamDecodeError
from pipeline.models import ChunkResponse, Payload
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

    Bytes that are not UTF-8 raise `StreamDecodeError` naming their byte offset in the stream, after a
    chunk with the text before them."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._offset = 0
        """Bytes fed so far."""

    def feed(self, item: bytes | str) -> list[ChunkResponse]:
        if isinstance(item, bytes | bytearray | memoryview):
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
    """The converter for the wire format of the first event (``provider="auto"``), or the one named.

    The first event may be a `Payload`: it is decoded once, generically, to tell
    the wire format, and the payload itself goes on to the converter."""

    def __init__(self, provider: str, id_factory: Callable[[int], str] | None, choice: int) -> None:
        self._provider = provider
        self._id_factory = id_factory
        self._choice = choice
        self.core: Core[Any, ChunkResponse] | None = None
        """The converter, once chosen."""

    def feed(self, event: Any) -> list[ChunkResponse]:
        if self.core is None:
            first = _first_event(event) if type(event) is Payload else event
            provider = self._provider
            if provider == "auto":
                from operators.adapter.detect import detect_wire_format

                try:
                    provider = detect_wire_format(first)
                except ConfigurationError as error:
                    body = _error_body(first)
                    if body is None:
                        raise
                    raise body from error
            else:
                _check_named(provider, first)
            self.core = _converter(provider, self._id_factory, self._choice)
        return self.core.feed(event)

    def finish(self) -> list[ChunkResponse]:
        return self.core.finish() if self.core is not None else []


def _first_event(payload: Payload) -> Any:
    """The first payload of a stream decoded as JSON, to tell its wire format."""
    try:
        return msgspec.json.decode(payload.data)
    except JSON_ERRORS as error:
        problem = json_problem(error, payload.data, payload.offset)
        raise StreamDecodeError(
            f"event 0 (at byte {payload.offset}) is {problem}", offset=payload.offset
        ) from None


_EXCERPT_KEYS = 8
"""Keys of a first event that a wrong ``provider=`` error quotes, at most."""


def _check_named(provider: str, event: Any) -> None:
    """The first event of a stream read as the wire format ``provider`` (named, not ``auto``): raise
    `ConverterError` when it is plainly another wire format's, rather than convert nothing.

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
    """A first event of no known wire format that is an error: an OpenAI-compatible or Gemini
    ``{"error": ...}`` object, or an HTTP error body that carries a message (``{"message": ...}``,
    FastAPI's ``{"detail": ...}``), as a `ProviderError`."""
    if not isinstance(event, Mapping):
        return None
    error = event.get("error")
    if error is not None:
        details = error if isinstance(error, Mapping) else {"message": str(error)}
        return ProviderError.from_payload(details, event, "event 0")
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

    Auto framing decides within a bounded head (see `operators.adapter.detect.sniff_framing`): it
    holds at most `_MAX_HEAD` bytes, joined once, when it decides.
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
        self._front: list[Core[Any, Any]] = []
        """The cores before the converter: a framer (and the payload decode), or the dict or SDK reader."""
        self._lazy: _LazyConverter | None = None
        """The converter still to be chosen from the first event (``provider="auto"``)."""
        self._feed: Callable[[Any], list[ChunkResponse]] = self._first_feed
        """The feed of the moment: the first, the lazy converter's, then the chain's own."""
        self._head = _Head()
        self._replace: Callable[[Sequence[Core[Any, Any]]], None] | None = None
        """Tells the chain this adapter leads the framer and converter, once known (see `flatten`)."""

    def feed(self, item: Any) -> list[ChunkResponse]:
        return self._feed(item)

    def flatten(self, replace: Callable[[Sequence[Core[Any, Any]]], None]) -> None:
        """Called by the `chain` this adapter leads: once the framer and converter
        are chosen, ``replace`` gets them, and the chain runs them in its own loop (no chain in a chain)."""
        self._replace = replace

    def _settled(self, cores: Sequence[Core[Any, Any]]) -> None:
        """The framer and converter are known (``cores``): the chain this adapter leads may run them."""
        if self._replace is not None:
            self._replace(cores)
            self._replace = None

    def _use(self, feed: Callable[[Any], list[ChunkResponse]]) -> None:
        """Make ``feed`` the feed of the moment; also as this instance's ``feed``, so that a caller that
        looks ``feed`` up at each item (`pipeline.stage.chain`) calls it without this wrapper's call."""
        self._feed = self.feed = feed  # type: ignore[method-assign,assignment]

    def _first_feed(self, item: Any) -> list[ChunkResponse]:
        """Until the front is chosen: choose it from ``item`` (or from the head, once it tells)."""
        front = self._front_for(item)
        if front is None:
            return []  # the framing is not known yet: the bytes wait in the head
        self._chain = self._chain_with(front)
        known = self._lazy is None  # no converter to choose (plain text): the front is all there is
        self._use(self._chain.feed if known else self._lazy_feed)
        if self._head.parts:
            item = self._head.take()
        chunks = self._feed(item)
        if known:
            self._settled(front)
        return chunks

    def _lazy_feed(self, item: Any) -> list[ChunkResponse]:
        """Until the converter is chosen from the first event; then it replaces the lazy one."""
        chunks = self._chain.feed(item) if self._chain is not None else []
        lazy = self._lazy
        if lazy is not None and lazy.core is not None:
            self._chain, self._lazy = chain(*self._front, lazy.core), None
            self._use(self._chain.feed)
            self._settled([*self._front, lazy.core])
        return chunks

    def finish(self) -> list[ChunkResponse]:
        outputs: list[ChunkResponse] = []
        if self._chain is None:
            if self._provider == "text":
                return []
            if not self._head.seen_item:
                raise StreamDecodeError("the stream ended before its first item (an empty body)", offset=0)
            framing = self._head.framing(complete=True)  # complete: it decides or raises
            if framing is None:
                raise self._head.unknown()  # not reached: complete framing decides or raises
            self._chain = self._chain_with(_byte_front(framing))
            outputs += self._chain.feed(self._head.take())
        outputs += self._chain.finish()
        return outputs

    def _chain_with(self, front: list[Core[Any, Any]]) -> Core[Any, ChunkResponse]:
        self._front = front
        if self._provider == "text":
            return chain(*front)
        # The converter is made at the first event: chosen from it (auto), or checked against it (named).
        self._lazy = _LazyConverter(self._provider, self._id_factory, self._choice)
        return chain(*front, self._lazy)

    def _front_for(self, item: Any) -> list[Core[Any, Any]] | None:
        self._head.seen_item = True
        if self._provider == "text":
            return [TextDeltas()]
        if isinstance(item, bytes | bytearray | memoryview):
            if self._framing != "auto":
                return _byte_front(self._framing)
            framing = self._head.add(bytes(item))
            return None if framing is None else _byte_front(framing)
        if isinstance(item, Mapping):
            return [_Identity()]
        return [_SDKObjects()]


class _Head:
    """The first bytes of a stream under ``framing="auto"``, held until they tell the framing.

    Bytes of no known framing, or none but whitespace, raise `StreamDecodeError`."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.seen_item = False
        self._start = b""
        """The first bytes of the stream (up to 12)."""
        self._probe = b""
        """Up to `_PROBE` bytes from the first that is neither a BOM nor whitespace."""

    def take(self) -> bytes:
        """The bytes held, joined once; the head is empty after."""
        data, self.parts = b"".join(self.parts), []
        return data

    def add(self, data: bytes) -> str | None:
        """Hold ``data``: the framing once the bytes held tell it, else None."""
        if data:
            self.parts.append(data)
            self.size += len(data)
            if len(self.parts) == 1 or self.size <= _SMALL_HEAD:
                if not self._look_again():
                    return None  # maybe a BOM, split
            else:
                self._extend(data)
        return self.framing()

    def _look_again(self) -> bool:
        """Find the start and probe in the whole head, a few hundred bytes at most: bounded work per read.
        False while the head may be a BOM still cut short."""
        head = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
        self._start = head[:12]
        if len(head) < len(_BOM) and _BOM.startswith(head):
            return False
        content = _SPACE.match(head, len(_BOM) if head.startswith(_BOM) else 0).end()  # type: ignore[union-attr]
        self._probe = head[content : content + _PROBE]
        return True

    def _extend(self, data: bytes) -> None:
        """Extend the start and probe with a later read."""
        if len(self._start) < 12:  # a first read of fewer than 12 bytes, then a large one
            self._start = (self._start + data)[:12]
        if not self._probe:
            # The earlier reads held whitespace, or the start of a BOM whose rest opens this one.
            before = self.size - len(data)
            rest = len(_BOM) - before if before < len(_BOM) and self._start.startswith(_BOM) else 0
            content = _SPACE.match(data, rest).end()  # type: ignore[union-attr]
            self._probe = data[content : content + _PROBE]
        elif len(self._probe) < _PROBE:
            self._probe += data[: _PROBE - len(self._probe)]

    def framing(self, *, complete: bool = False) -> str | None:
        """The framing the bytes held show, None while they do not tell; raise when they cannot."""
        from operators.adapter.detect import sniff_framing

        framing = sniff_framing(self._start, self._probe, complete=complete)
        too_long = self.size > _MAX_HEAD
        if framing == "unknown":
            probe = self._probe
            if complete or too_long or len(probe) >= _PROBE or b"\n" in probe or b"\r" in probe:
                raise self.unknown()
            return None
        if framing is None and too_long:
            raise StreamDecodeError(
                f"no content in the first {self.size} bytes of the stream (more than "
                f"{_MAX_HEAD}, the cap of auto framing): its framing cannot be told",
                offset=0,
            )
        return framing

    def unknown(self) -> StreamDecodeError:
        if not self._probe:
            what = "is empty" if not self.size else f"holds only whitespace ({self.size} bytes)"
            return StreamDecodeError(f"the body {what}: no event came", offset=0)
        start = self._probe if self.size > _SMALL_HEAD else b"".join(self.parts)[:_PROBE]
        return StreamDecodeError(
            "the body is neither SSE, JSON Lines, a JSON array nor an AWS event-stream (an error page?); "
            f"it starts with {start!r}",
            offset=0,
        )


def _byte_front(framing: str) -> list[Core[Any, Any]]:
    """The framer of ``framing``: the converter decodes each payload itself."""
    return [_framer(framing)]


def _framer(framing: str) -> Core[bytes, Payload]:
    if framing == "sse":
        from operators.adapter.sse import SSEFramer

        return SSEFramer()
    if framing == "jsonl":
        from operators.adapter.jsonl import JSONLinesFramer

        return JSONLinesFramer()
    if framing == "json":
        from operators.adapter.json_array import JSONArrayFramer

        return JSONArrayFramer()
    if framing == "eventstream":
        from operators.adapter.eventstream import EventStreamFramer

        return EventStreamFramer()
    raise ConfigurationError(f"unknown framing {framing!r}; expected auto, sse, jsonl, json or eventstream")


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
