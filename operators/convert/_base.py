"""Helpers shared by every converter: the one decode of an event, tool-call id generation, call
positions and the wording of a field error."""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, Final, Generic, TypeGuard, TypeVar

import msgspec

from pipeline._jsonenc import JSON_ERRORS, invalid_utf8, json_problem
from pipeline.errors import ConverterError, StreamDecodeError, StreamfoldError
from pipeline.models import IdFactory, Payload, new_call_id

__all__ = [
    "MISSING",
    "PAYLOAD_ERRORS",
    "CallIndexer",
    "EventDecoder",
    "IdFactory",
    "check_utf8",
    "field_error",
    "is_mapping",
    "new_call_id",
    "payload_error",
]

MISSING: Any = object()
"""The value of a field an event does not have (``owner.get(key, MISSING)``), for `field_error`."""


def field_error(
    number: int, field: str, expected: str, value: object = MISSING, *, event_type: object = None
) -> ConverterError:
    """The one wording of a converter's "this field is not what the wire format promises":
    ``event 3 (content_block_start): field 'index' should be an integer, got str: '0'``.

    ``field`` is the field's path in the event (``""``: the event itself), ``expected`` what it should
    be, ``value`` what it is (`MISSING` when absent), ``event_type`` the event's type if known."""
    where = f"event {number}" + (f" ({event_type})" if isinstance(event_type, str) else "")
    subject = f"field {field!r}" if field else "the event"
    got = "nothing" if value is MISSING else f"{type(value).__name__}: {value!r:.60}"
    return ConverterError(f"{where}: {subject} should be {expected}, got {got}", event_number=number)


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, fast for the dicts a JSON decoder makes: checking a dict against the
    ``Mapping`` ABC costs several times a plain type check, on every field of every event."""
    return type(value) is dict or isinstance(value, Mapping)


class CallIndexer:
    """Maps a provider's call identity (any hashable) to the call's position 0, 1, 2, ...

    Positions follow the order of first appearance, whatever the provider numbered its calls (an index
    starting at 1, content-block indexes shared with text blocks, ``output_index``, ids).
    """

    __slots__ = ("_positions",)

    def __init__(self) -> None:
        self._positions: dict[Hashable, int] = {}

    def position(self, key: Hashable) -> int:
        """The position of the call ``key``; a key never seen before gets the next free position."""
        found = self._positions.get(key)
        if found is None:
            found = self._positions[key] = len(self._positions)
        return found

    def get(self, key: Hashable) -> int | None:
        """The position of ``key`` if it was seen, else ``None`` (without assigning one)."""
        return self._positions.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._positions

    def __len__(self) -> int:
        return len(self._positions)


EventT = TypeVar("EventT")

_AT_PATH = re.compile(r"^(?P<problem>.*) - at `\$(?P<path>.*)`$", re.DOTALL)


class EventDecoder(Generic[EventT]):
    """The one decode of a converter: any source's event into the provider's typed event ``EventT``.

    A framed `Payload` is decoded from its bytes by a typed msgspec decoder; a
    dict (a JSON decoder's, or an SDK object's ``model_dump``) is converted into the same type. Every
    converter then reads one type, whatever the source, with no second parser beside the first.

    A converter's feed loop may run the Payload case itself, without a call in between:
    ``bytes_decoder.decode`` on the payload's bytes, `payload_error` for what it raises
    (`PAYLOAD_ERRORS`) and `check_utf8` for bytes that are not ASCII, as `decode` does.
    """

    __slots__ = ("_type", "bytes_decoder")

    def __init__(self, event_type: type[EventT]) -> None:
        self._type = event_type
        self.bytes_decoder: msgspec.json.Decoder[EventT] = msgspec.json.Decoder(event_type)
        """The typed decoder of a payload's bytes (its ``decode`` raises `PAYLOAD_ERRORS`): an object
        holding it calls ``bytes_decoder.decode``, a method lookup Python caches, where a bound method
        kept in an attribute is looked up anew on each call."""

    def decode(self, item: Payload | Mapping[str, Any], number: int) -> EventT:
        """``item`` as ``EventT``; ``number`` is the event's number in the stream (from 0), for errors.

        Raises `StreamDecodeError` for bytes that are not JSON (naming the byte offset) and
        `ConverterError` for JSON that does not fit the provider's schema (naming the field)."""
        if type(item) is Payload:
            data = item.data
            try:
                event = self.bytes_decoder.decode(data)
            except PAYLOAD_ERRORS as error:
                raise payload_error(error, item, number) from None
            if not data.isascii():
                check_utf8(data, item.offset)
            return event
        if not is_mapping(item):
            raise field_error(number, "", "an object", item)
        try:
            return msgspec.convert(item, self._type)
        except msgspec.ValidationError as error:
            raise schema_error(number, error) from None


PAYLOAD_ERRORS: Final = (msgspec.ValidationError, *JSON_ERRORS)
"""What `EventDecoder.bytes_decoder` raises for bytes it refuses: `payload_error` words each."""


def payload_error(error: Exception, payload: Payload, number: int) -> StreamfoldError:
    """The error for event ``number``, whose bytes the typed decode refused with ``error``: a
    `ConverterError` naming the field for a schema mismatch, else a `StreamDecodeError` naming the byte.
    Bytes that are not UTF-8 are named first, whatever else is wrong (as a framer that checks each line
    names them)."""
    data = payload.data
    if isinstance(error, UnicodeDecodeError) or not (data.isascii() or _is_utf8(data)):
        return invalid_utf8(data, payload.offset)
    if isinstance(error, msgspec.ValidationError):
        return schema_error(number, error)
    problem = json_problem(error, data, payload.offset)
    return StreamDecodeError(f"event {number} (at byte {payload.offset}) is {problem}", offset=payload.offset)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_utf8(data: bytes, offset: int) -> None:
    """Raise `StreamDecodeError` if ``data`` (at byte ``offset`` of the stream) is not UTF-8: the fields a
    schema skips were neither read nor checked by the decode."""
    if not _is_utf8(data):
        raise invalid_utf8(data, offset)


def schema_error(number: int, error: msgspec.ValidationError) -> ConverterError:
    """`field_error`'s wording for msgspec's refusal of event ``number``:
    ``event 3: field 'choices[0].index': Expected `int`, got `str```."""
    message = str(error)
    found = _AT_PATH.match(message)
    if found is None:
        return ConverterError(f"event {number}: {message}", event_number=number)
    path = found["path"].removeprefix(".")
    subject = f"field {path!r}" if path else "the event"
    return ConverterError(f"event {number}: {subject}: {found['problem']}", event_number=number)
