"""The feed loop of the converters whose events name their kind in a ``type`` field (Anthropic Messages,
OpenAI Responses): one typed decode of each event, then the handler registered for its type.

Each provider's events decode into one flat msgspec Struct with ``type: str`` and optional fields, not a
tagged union: a tagged union refuses a tag it does not know, and an event type this version does not know
must give nothing (forward compatibility). Unknown fields are skipped by the decoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from operators.convert._base import (
    MISSING,
    PAYLOAD_ERRORS,
    EventDecoder,
    check_utf8,
    field_error,
    is_mapping,
    payload_error,
)
from pipeline.errors import ConverterError, ProviderError
from pipeline.models import ChunkResponse, Payload

__all__ = ["TypedEvent", "TypedFeed", "event_mapping", "in_band_error"]


class TypedEvent(Protocol):
    """What the feed loop reads of every event: its ``type`` and an in-band ``error``."""

    @property
    def type(self) -> str | UnsetType: ...

    @property
    def error(self) -> Any: ...


EventT = TypeVar("EventT", bound=TypedEvent)


class TypedFeed(Generic[EventT]):
    """Counts each event, decodes it into ``EventT`` and hands it to the handler of its ``type``.

    An event type without a handler gives nothing; ``error`` events (and an untyped object holding an
    ``error``, as some proxies send) raise `ProviderError`; an event without a string ``type``
    raises `ConverterError`. A `ConverterError` that names the event's number but not its
    type gets the type added, so handlers and their checks need not carry it.
    """

    __slots__ = ("_bytes_decoder", "_decode", "_event_number", "_handlers", "_last_handler", "_last_type")

    def __init__(
        self, event_type: type[EventT], handlers: Mapping[str, Callable[[EventT], list[ChunkResponse]]]
    ) -> None:
        decoder = EventDecoder(event_type)
        self._decode = decoder.decode
        self._bytes_decoder = decoder.bytes_decoder
        self._handlers = handlers
        self._last_type: str | UnsetType = UNSET
        self._last_handler: Callable[[EventT], list[ChunkResponse]] | None = None
        """The handler of ``_last_type``, the type of the event before."""
        self._event_number = -1
        """The number of the event being converted (0 for the first), for error messages."""

    def feed(self, item: Payload | Mapping[str, Any], /) -> list[ChunkResponse]:
        """Convert one event: a framed `Payload` or a decoded dict."""
        self._event_number += 1
        try:
            if type(item) is Payload:  # the decode of `EventDecoder.decode`, without a call between
                data = item.data
                try:
                    event = self._bytes_decoder.decode(data)
                except PAYLOAD_ERRORS as error:
                    raise payload_error(error, item, self._event_number) from None
                if not data.isascii():
                    check_utf8(data, item.offset)
            else:
                event = self._decode(item, self._event_number)
            event_type = event.type
            if event_type != self._last_type:  # deltas come in runs of one type: compared, not hashed
                self._last_type = event_type
                self._last_handler = self._handlers.get(event_type)  # type: ignore[arg-type]
            handler = self._last_handler
            if handler is None:
                return self._unhandled(item, event)
            return handler(event)
        except ConverterError as error:
            raise _with_event_type(error, item) from None

    def _unhandled(self, item: Payload | Mapping[str, Any], event: EventT) -> list[ChunkResponse]:
        """An event without a handler: an in-band error, an untyped event, or a type not known here."""
        if event.type == "error" or (event.type is UNSET and event.error is not None):
            raise in_band_error(event_mapping(item), f"event {self._event_number}")
        if event.type is UNSET:
            raise field_error(self._event_number, "type", "a string")
        return []


def event_mapping(item: Payload | Mapping[str, Any]) -> Mapping[str, Any]:
    """The event as a dict, for the ``payload`` of an error (a Payload is decoded again: errors only)."""
    if type(item) is not Payload:
        return item  # type: ignore[return-value]
    value = msgspec.json.decode(item.data)
    return value if is_mapping(value) else {"data": value}


def in_band_error(payload: Mapping[str, Any], where: str) -> ProviderError:
    """The `ProviderError` of an in-band error event: its nested ``error`` object, else the event's
    own fields (``{"type": "error", "code": ..., "message": ...}``)."""
    error = payload.get("error")
    if is_mapping(error):
        details: Mapping[str, Any] = error
    elif error is not None:
        details = {"message": str(error)}
    else:
        details = {key: value for key, value in payload.items() if key != "type"}
    return ProviderError.from_payload(details, payload, where)


def _with_event_type(error: ConverterError, item: Payload | Mapping[str, Any]) -> ConverterError:
    """``error`` (``event 3: field ...``) naming the event's type too: ``event 3 (message_start): ...``."""
    number = error.event_number
    prefix = f"event {number}:"
    message = str(error)
    try:
        event_type = event_mapping(item).get("type", MISSING)
    except (msgspec.DecodeError, UnicodeDecodeError, TypeError, AttributeError):  # (as it came, then)
        return error
    if not isinstance(event_type, str) or not message.startswith(prefix):
        return error
    return ConverterError(f"event {number} ({event_type}):{message[len(prefix) :]}", event_number=number)
