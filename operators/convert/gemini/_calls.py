"""The calls of one ``generateContent`` response: function calls (whole or streamed) and calls the server
runs itself, with their positions, ids and repeats."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from operators.convert._base import IdFactory
from operators.convert.gemini._chunks import ChunkBuilder
from operators.convert.gemini._common import converter_error, plain
from operators.convert.gemini._partial_args import (
    PartialArgsWriter,
    PartialValue,
    json_text,
    parse_json_path,
    plain_number,
)
from operators.convert.gemini._schema import FunctionCall, PartialArg
from pipeline.errors import ConverterError
from pipeline.models import JSONPath, ToolCallDelta

__all__ = ["ResponseCalls"]


class _StreamedCall:
    """A streamed function call whose closing part has not arrived."""

    __slots__ = ("position", "writer")

    def __init__(self, position: int, writer: PartialArgsWriter) -> None:
        self.position = position
        self.writer = writer


class ResponseCalls:
    """Gives each call of a response its position and id, writes streamed arguments, leaves repeats out.

    Memory: the fingerprint (kind, name, arguments text) of each call with an id, proportional to the
    calls of the response.
    """

    __slots__ = ("_count", "_id_factory", "_seen", "_streamed", "last_server_call", "made_function_call")

    def __init__(self, id_factory: IdFactory) -> None:
        self._id_factory = id_factory
        self._count = 0
        self._streamed: _StreamedCall | None = None
        self._seen: dict[str, str] = {}
        """Provider call id -> kind, name and arguments text of the whole call that had it first."""
        self.made_function_call = False
        self.last_server_call: str | None = None
        """The id of the last code execution or server tool call: a result without an id answers it."""

    def function_call(
        self, builder: ChunkBuilder, call: FunctionCall, signature: str | None, where: _Where
    ) -> None:
        """A ``functionCall`` part: a whole call, the start of a streamed call, or a piece of the open one.

        ``where`` is the event's number and the part's path in it, for errors."""
        if call.name:
            self._start(builder, call, call.name, signature, where)
            return
        streamed = self._streamed
        if streamed is None:
            if call.args or call.partial_args:
                raise _error(where, "", "has arguments but no name, and no streamed call is open")
            return  # a closing part with no call to close
        pieces: list[str] = []
        self._write_values(pieces, streamed.writer, call, where)
        if not call.will_continue:
            builder.tool_call(self._end_streamed(pieces, signature))
        elif pieces or signature:
            builder.tool_call(
                ToolCallDelta(streamed.position, arguments_delta="".join(pieces), signature=signature)
            )

    def server_call(
        self,
        builder: ChunkBuilder,
        call_id: str | None,
        name: str,
        arguments: Mapping[str, Any],
        signature: str | None,
    ) -> None:
        """A call the provider runs itself: one finished ``server`` call (nothing for the client to run)."""
        text = json_text(arguments)
        if call_id and self._repeats(call_id, "server", name, text):
            return
        position = self._count
        self._count += 1
        if not call_id:
            call_id = self._id_factory(position)
        self.last_server_call = call_id
        builder.tool_call(ToolCallDelta(position, call_id, name, text, True, "server", signature))

    def _start(
        self, builder: ChunkBuilder, call: FunctionCall, name: str, signature: str | None, where: _Where
    ) -> None:
        """A call with a name: whole, or the first part of a streamed call (which ends the open one)."""
        if self._streamed is not None:
            builder.tool_call(self._end_streamed([]))
        writer = PartialArgsWriter()
        pieces = [writer.start()]
        self._write_values(pieces, writer, call, where)
        call_id = call.id
        if not call.will_continue:
            pieces.append(writer.close())
            if call_id and self._repeats(call_id, "function", name, "".join(pieces)):
                return
        position = self._count
        self._count += 1
        self.made_function_call = True
        if not call_id:
            call_id = self._id_factory(position)
        if call.will_continue:
            self._streamed = _StreamedCall(position, writer)
        arguments = "".join(pieces)
        builder.tool_call(
            ToolCallDelta(position, call_id, name, arguments, not call.will_continue, signature=signature)
        )

    def _repeats(self, call_id: str, kind: str, name: str, arguments: str) -> bool:
        """Whether a whole call repeats the call that had ``call_id`` first, to the letter.

        Gemini sometimes sends a part twice; a repeat with the same id, name and arguments is that call
        again, not a second call, and is left out (running a tool twice is the harm). A call that reuses
        an id with a different name or arguments is a call of its own: it gets the next position (the
        segment emitter then gives it the id ``<id>_2``).
        """
        fingerprint = f"{kind}\0{name}\0{arguments}"
        first = self._seen.get(call_id)
        if first is None:
            self._seen[call_id] = fingerprint
            return False
        return first == fingerprint

    def _write_values(
        self, pieces: list[str], writer: PartialArgsWriter, call: FunctionCall, where: _Where
    ) -> None:
        """The JSON text of the part's values (whole ``args``, then ``partialArgs``) into ``pieces``."""
        try:
            if call.args:
                for key, value in call.args.items():
                    pieces.append(writer.write((key,), value))
            for number, partial in enumerate(call.partial_args or ()):
                path, value = _partial_arg(partial, where, f".partialArgs[{number}]")
                pieces.append(writer.write(path, value, will_continue=partial.will_continue))
        except ValueError as error:
            raise _error(where, "", f"cannot be written as JSON text: {error}") from error

    def _end_streamed(self, pieces: list[str], signature: str | None = None) -> ToolCallDelta:
        streamed = self._streamed
        assert streamed is not None
        self._streamed = None
        pieces.append(streamed.writer.close())
        arguments = "".join(pieces)
        return ToolCallDelta(streamed.position, arguments_delta=arguments, finished=True, signature=signature)


_Where = tuple[int, str]
"""The number of the event being converted and the path of the part in it."""


def _error(where: _Where, field: str, problem: str) -> ConverterError:
    """The error for ``field`` (a path below ``where``'s part) and what is wrong with it."""
    number, path = where
    return converter_error(number, f"{path}{field}", problem)


def _partial_arg(partial: PartialArg, where: _Where, field: str) -> tuple[JSONPath, PartialValue]:
    """The path and value of the ``partialArgs`` entry at ``field``."""
    if partial.json_path is None:
        raise _error(where, f"{field}.jsonPath", "is missing or not a string")
    try:
        path = parse_json_path(partial.json_path)
    except ValueError as error:
        raise _error(where, f"{field}.jsonPath", str(error)) from error
    return path, _partial_value(partial, where, field)


def _partial_value(partial: PartialArg, where: _Where, field: str) -> PartialValue:
    """The entry's value as the wire JSON holds it (an SDK's float ``2.0`` is ``2``)."""
    if partial.string_value is not msgspec.UNSET:
        text = partial.string_value
        if isinstance(text, str):
            return plain(text)
        raise _wrong_type(where, field, text)
    if partial.number_value is not msgspec.UNSET:
        number = partial.number_value
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise _wrong_type(where, field, number)
        if isinstance(number, float) and not math.isfinite(number):
            raise _wrong_type(where, field, number)
        return plain_number(number)
    if partial.bool_value is not msgspec.UNSET:
        flag = partial.bool_value
        if isinstance(flag, bool):
            return flag
        raise _wrong_type(where, field, flag)
    if partial.null_value is not msgspec.UNSET:
        return None
    raise _error(where, field, "has no stringValue, numberValue, boolValue or nullValue")


def _wrong_type(where: _Where, field: str, value: object) -> ConverterError:
    return _error(where, field, f"has a value of the wrong type: {value!r}")
