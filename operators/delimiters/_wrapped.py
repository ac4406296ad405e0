"""Calls written as a JSON object that wraps the arguments: ``{"name": "f", "arguments": {...}}``.

`WrappedJsonLexer` reads the wrapper object incrementally: the name (and an id) as soon as their
strings close, the ``arguments`` (or ``parameters``) value streamed verbatim as it arrives, so the outer
``}`` never reaches the arguments. An ``arguments`` value that is itself a JSON string (Granite writes
``"arguments": "{\\"a\\": 1}"``) is decoded as it streams, so the arguments are its content, not a
doubly encoded string. Other keys are skipped. Hermes uses it; Mistral and Llama 3 JSON can.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar, Final

from operators.delimiters._lexer import Channel, FormatLexer, LexerOptions, LexerOutput
from operators.delimiters._scan import HEADER_LIMIT, JsonArgs, Markers, space_end, without_surrogates

__all__ = ["WrappedJsonLexer"]

_SCALAR_END: Final = (",", "}")
_STRING_STOP: Final = re.compile(r'[\\"]')
_ESCAPE: Final = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')
_HIGH_SURROGATE: Final = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_SURROGATE: Final = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


class WrappedJsonLexer(FormatLexer):
    """A lexer whose calls are JSON wrapper objects.

    A subclass calls `enter_wrapper` when a wrapper ``{`` is next, sets ``wrapper_markers``
    (markers that end the call even inside the wrapper, e.g. ``</tool_call>``, never matched inside a JSON
    string) and implements `wrapper_closed` (the wrapper's ``}`` came) and
    `wrapper_interrupted` (one of ``wrapper_markers`` came first, or the wrapper is malformed). Calls
    written as a JSON list of wrappers (``[{...}, {...}]``) enter each with ``in_list=True`` and go on with
    `list_next` after each one, which calls `list_closed` at the ``]``. A stream cut inside a
    wrapper leaves a call with the name and arguments read so far.
    """

    name_keys: ClassVar[frozenset[str]] = frozenset({"name"})
    argument_keys: ClassVar[frozenset[str]] = frozenset({"arguments", "parameters"})
    id_keys: ClassVar[frozenset[str]] = frozenset({"id"})
    wrapper_markers: ClassVar[Markers]

    def __init__(self, output: LexerOutput, channel: Channel, options: LexerOptions) -> None:
        super().__init__(output, channel, options)
        self._wrapped_name: str | None = None
        self._wrapped_id: str | None = None
        self._early: list[str] | None = None
        self._early_size = 0
        self._string: list[str] = []
        self._string_size = 0
        self._current_key = ""
        self._container = False
        self._value_scan = JsonArgs()
        self.in_wrapper = False
        """A call object is being read."""
        self.in_list = False
        """The call object being read (or the last one) is an item of a list."""

    def enter_wrapper(self, *, in_list: bool = False) -> None:
        """A call object ``{"name": ..., "arguments": ...}`` is next: what was held is the call's syntax."""
        self.take_tentative()
        self.in_list = in_list
        self.in_wrapper = True
        self.state = self.wrapper_open

    def at_end(self) -> None:
        if self.in_wrapper:  # cut off inside the call object: the call with what was read of it
            in_name = self.state == self._small_string and self._current_key in self.name_keys
            self._ensure_call("".join(self._string) if in_name else None)
        super().at_end()

    def list_closed(self) -> None:
        """The ``]`` of a list of call objects came."""
        raise NotImplementedError

    def wrapper_closed(self) -> None:
        """The wrapper object closed: the call is complete."""
        raise NotImplementedError

    def wrapper_interrupted(self, marker: str | None) -> None:
        """``marker`` (one of ``wrapper_markers``) came inside the wrapper, or, with None, the wrapper is
        not a JSON object of the expected shape (what follows is dropped up to the next marker)."""
        raise NotImplementedError

    # --- states -------------------------------------------------------------------------------------------

    def list_next(self, buf: str, pos: int, final: bool) -> int:
        """After an object of a list: ``,`` and the next object, or the closing ``]``; else text follows."""
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        char = buf[index]
        if char == ",":
            self.state = self.list_item
            return index + 1
        if char == "]":
            self.list_closed()
            return index + 1
        self.state = self.start
        return index

    def list_item(self, buf: str, pos: int, final: bool) -> int:
        """After the ``,`` of a list: the next call object; else text follows."""
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        if buf[index] == "{":
            self.enter_wrapper(in_list=True)
        else:
            self.state = self.start
        return index

    def wrapper_open(self, buf: str, pos: int, final: bool) -> int:
        """Expect the wrapper's ``{``."""
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        self._wrapped_name = None
        self._wrapped_id = None
        self._early = None
        self._early_size = 0
        if buf[index] != "{":
            self._malformed()
            return index
        self.state = self._key_or_end
        return index + 1

    def _key_or_end(self, buf: str, pos: int, final: bool) -> int:
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        char = buf[index]
        if char == '"':
            self._string = []
            self._string_size = 0
            self.state = self._key
            return index + 1
        if char == "}":
            self._close_wrapper()
            return index + 1
        if char == ",":
            return index + 1
        return self._unexpected(buf, index, final)

    def _key(self, buf: str, pos: int, final: bool) -> int:
        resume, text = self._read_string(buf, pos, final)
        if text is not None:
            self._current_key = text
            self.state = self._colon
        return resume

    def _colon(self, buf: str, pos: int, final: bool) -> int:
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        if buf[index] != ":":
            return self._unexpected(buf, index, final)
        self.state = self._value
        return index + 1

    def _value(self, buf: str, pos: int, final: bool) -> int:
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        key = self._current_key
        char = buf[index]
        self._value_scan = JsonArgs()
        self._container = char in "{["
        if key in self.argument_keys:
            if char == '"':
                self.state = self._string_arguments
                return index + 1
            if self._container:
                self.json_args = self._value_scan  # the call's JSON arguments, as they stream
            self.state = self._arguments
            return index
        if char == '"' and (key in self.name_keys or key in self.id_keys):
            self._string = []
            self._string_size = 0
            self.state = self._small_string
            return index + 1
        self.state = self._skip_value
        return index

    def _small_string(self, buf: str, pos: int, final: bool) -> int:
        resume, text = self._read_string(buf, pos, final)
        if text is not None:
            if self._current_key in self.name_keys:
                self._wrapped_name = text
                self._ensure_call()
            elif self._wrapped_id is None:
                self._wrapped_id = text
            self.state = self._after_value
        return resume

    def _arguments(self, buf: str, pos: int, final: bool) -> int:
        """An object or array (or scalar) ``arguments`` value, streamed verbatim."""
        return self._container_value(buf, pos, final, emit=True)

    def _string_arguments(self, buf: str, pos: int, final: bool) -> int:
        """A JSON-string ``arguments`` value: its decoded content is the arguments text."""
        size = len(buf)
        index = pos
        while index < size:
            hit = _STRING_STOP.search(buf, index)
            stop = size if hit is None else hit.start()
            if stop > index:
                self._emit_wrapped(buf[index:stop])
            if hit is None:
                return size
            if buf[stop] == '"':
                self.state = self._after_value
                return stop + 1
            escape = _ESCAPE.match(buf, stop)
            if escape is None:
                if not final and size - stop < 6:
                    return stop  # an escape split across chunks
                self._emit_wrapped(buf[stop : stop + 2])
                index = stop + 2
                continue
            end = escape.end()
            if _HIGH_SURROGATE.fullmatch(buf, stop, end):
                low = _LOW_SURROGATE.match(buf, end)
                if low is None and not final and size - end < 6:
                    return stop  # the low half of a surrogate pair may follow
                if low is not None:
                    end = low.end()
            escape_text = buf[stop:end]
            self._emit_wrapped(without_surrogates(json.loads('"' + escape_text + '"'), escape_text))
            index = end
        return index

    def _skip_value(self, buf: str, pos: int, final: bool) -> int:
        return self._container_value(buf, pos, final, emit=False)

    def _container_value(self, buf: str, pos: int, final: bool, *, emit: bool) -> int:
        if not self._container:
            return self._scalar(buf, pos, final, emit=emit)
        stop, resume, marker = self._value_scan.scan(
            buf, pos, self.wrapper_markers, final, stop_at_close=True
        )
        if emit and stop > pos:
            self._emit_wrapped(buf[pos:stop])
        if marker == "":
            self.json_args = None
            self.state = self._after_value
        elif marker is not None:
            self._interrupt(marker)
        return resume

    def _scalar(self, buf: str, pos: int, final: bool, *, emit: bool) -> int:
        """A string, number or literal value: up to the ``,`` or ``}`` after it."""
        markers = _scalar_markers(self.wrapper_markers)
        stop, resume, marker = self._value_scan.scan(buf, pos, markers, final)
        if emit and stop > pos:
            self._emit_wrapped(buf[pos:stop])
        if marker is None:
            return resume
        if marker in _SCALAR_END:
            self.state = self._after_value
            return stop
        self._interrupt(marker)
        return resume

    def _after_value(self, buf: str, pos: int, final: bool) -> int:
        index = space_end(buf, pos)
        if index == len(buf):
            return index
        char = buf[index]
        if char == ",":
            self.state = self._key_or_end
            return index + 1
        if char == "}":
            self._close_wrapper()
            return index + 1
        return self._unexpected(buf, index, final)

    # --- helpers --------------------------------------------------------------------------------------------

    def _read_string(self, buf: str, pos: int, final: bool) -> tuple[int, str | None]:
        """Collect a short JSON string's body up to its closing quote; its decoded text when closed."""
        size = len(buf)
        index = pos
        while True:
            hit = _STRING_STOP.search(buf, index)
            if hit is None or (buf[hit.start()] == "\\" and hit.start() + 1 >= size):
                # a backslash at the end is held for the escape's next character, unless nothing follows
                stop = size if hit is None or final else hit.start()
                self._string.append(buf[pos:stop])
                self._string_size += stop - pos
                if self._string_size > HEADER_LIMIT:
                    self._malformed()
                return stop, None
            stop = hit.start()
            if buf[stop] == "\\":
                index = stop + 2
                continue
            self._string.append(buf[pos:stop])
            raw = "".join(self._string)
            try:
                text = without_surrogates(json.loads('"' + raw + '"'), raw)
            except ValueError:
                text = raw
            return stop + 1, text

    def _unexpected(self, buf: str, index: int, final: bool) -> int:
        """A character that does not fit the wrapper: a marker, or a malformed wrapper."""
        stop, resume, marker = self.wrapper_markers.find(buf, index, final)
        if stop == index and marker is not None:
            self._interrupt(marker)
            return resume
        if stop == index and resume == index and not final:
            return index  # maybe the start of a marker
        self._malformed()
        return index

    def _malformed(self) -> None:
        self._interrupt(None)

    def _interrupt(self, marker: str | None) -> None:
        self._ensure_call()
        self.in_wrapper = False
        self.wrapper_interrupted(marker)

    def _ensure_call(self, partial_name: str | None = None) -> None:
        """Open the call once its name is known (or the wrapper ends without one), with early arguments;
        ``partial_name`` is the start of a name string the input ended in."""
        if self.call_index is not None:
            return
        name = self._wrapped_name if self._wrapped_name is not None else partial_name
        self.start_call(name or "", self._wrapped_id)
        early, self._early = self._early, None
        if early:
            self.emit_args("".join(early))

    def _emit_wrapped(self, text: str) -> None:
        if self.call_index is not None:
            self.emit_args(text)
            return
        if self._early is None:
            self._early = []
        self._early.append(text)
        self._early_size += len(text)
        if self._early_size > self.options.max_buffered_chars:
            self._ensure_call()

    def _close_wrapper(self) -> None:
        self._ensure_call()
        self.in_wrapper = False
        self.wrapper_closed()


_SCALAR_MARKERS: dict[Markers, Markers] = {}


def _scalar_markers(markers: Markers) -> Markers:
    found = _SCALAR_MARKERS.get(markers)
    if found is None:
        found = _SCALAR_MARKERS[markers] = Markers(*_SCALAR_END, *markers.markers)
    return found
