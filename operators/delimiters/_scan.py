"""Incremental scanning primitives shared by the delimiter formats.

- `Markers`: find the first of a set of literal markers in a buffer, and the suffix that could
  still grow into one (to hold back until the next chunk).
- `JsonArgs`: follow streamed JSON text (strings, escapes, nesting) so that a marker inside a JSON
  string is content, and trim the whitespace around the root value.
- `XmlArguments`: turn XML-style parameters (``<parameter=K>V</parameter>`` and kin) into JSON text
  as they stream: the key as soon as it is known, string values character by character.

All of them keep their state between chunks and look at each input character a bounded number of times.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import msgspec

__all__ = [
    "HEADER_LIMIT",
    "SHORT_PIECE",
    "JsonArgs",
    "Markers",
    "ValueType",
    "XmlArguments",
    "escape_json_text",
    "json_escape",
    "space_end",
    "value_type_from_schema",
]

HEADER_LIMIT: Final = 4096
"""Longest header (call id, tool name, parameter key, tag attributes) a lexer holds before deciding that
what it is reading is not a tool call."""

_WHITESPACE_LIMIT: Final = 4096
"""Longest run of trailing whitespace held back to see whether a closing marker follows it."""

_json_encode = msgspec.json.encode
_json_decode = msgspec.json.decode


_SPACE: Final = re.compile(r"\s*")


def space_end(text: str, pos: int) -> int:
    """Where the run of whitespace that starts at ``pos`` in ``text`` ends."""
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]


def json_escape(text: str) -> str:
    """The body of the JSON string literal of ``text`` (no surrounding quotes; non-ASCII kept as is):
    ``text`` itself when nothing in it needs an escape (a hot path makes this test inline, then calls
    `escape_json_text`)."""
    if not text.isprintable() or '"' in text or "\\" in text:
        return escape_json_text(text)
    return text


def escape_json_text(text: str) -> str:
    """`json_escape` of ``text`` that holds a character to escape.

    A lone surrogate (only a Python-object source can carry one) is written as its ``\\uXXXX`` escape,
    which the argument parser then reports as ``invalid_json`` (I-JSON has no lone surrogates)."""
    try:
        return _json_encode(text)[1:-1].decode()
    except UnicodeEncodeError:  # a lone surrogate, which UTF-8 cannot encode
        return json.dumps(text)[1:-1]


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def without_surrogates(decoded: str, raw: str) -> str:
    """``decoded``, the text of JSON string content ``raw``, unless it holds a lone surrogate (which no
    encoder downstream could write): then ``raw`` itself, escapes and all."""
    return raw if _SURROGATE.search(decoded) is not None else decoded


def common_char(stops: tuple[str, ...]) -> str:
    """A character that each of ``stops`` holds (text without it holds none of them), else ``""``, which
    every text holds (so ``common_char(stops) in text`` alone says whether to look for them)."""
    for char in stops[0] if stops else "":
        for stop in stops:
            if char not in stop:
                break
        else:
            return char
    return ""


class Markers:
    """A set of literal markers searched for together.

    Markers must not start with ``"`` (JSON scanning treats a quote specially) and no marker may contain
    another one except as a prefix or a suffix (the first match is then the longer one: it starts first,
    and a start of it at the end of the buffer is held back).
    """

    __slots__ = (
        "_char",
        "_pair",
        "_pairs",
        "_scan",
        "common",
        "first_chars",
        "json_stops",
        "longest",
        "markers",
        "pattern",
        "prefixes",
        "starts",
        "tail",
    )

    def __init__(self, *markers: str) -> None:
        ordered = sorted(set(markers), key=len, reverse=True)
        if not ordered or any(not marker or marker[0] == '"' for marker in ordered):
            raise ValueError(f"markers must be non-empty and not start with a quote: {markers!r}")
        self.markers: tuple[str, ...] = tuple(ordered)
        alternation = "|".join(map(re.escape, ordered))
        self.pattern = re.compile(alternation)
        """Any of the markers (``pattern.match(text)``: ``text`` starts with one)."""
        self.json_stops = re.compile(alternation + r'|["{}\[\]]')
        """A marker, a quote or a bracket: where scanning JSON outside strings stops (a marker that starts
        with a bracket, Mistral's ``[TOOL_CALLS]``, is a marker)."""
        self.prefixes = frozenset(marker[:size] for marker in ordered for size in range(1, len(marker)))
        """Every proper prefix of a marker: text in it can still grow into one."""
        partials = "|".join(_partial(marker) for marker in ordered if len(marker) > 1)
        self._scan = re.compile(f"{alternation}|(?P<partial>{partials})\\Z" if partials else alternation)
        """A marker, or a proper prefix of one that ends the text: `find` in one search (the first
        match is the same, as no marker contains another one except as a prefix)."""
        self.first_chars: tuple[str, ...] = tuple(sorted({marker[0] for marker in ordered}))
        """The characters a marker starts with: text without any of them holds no marker."""
        self.longest = len(ordered[0])
        pairs = {marker[:2] for marker in ordered}
        if all(len(pair) == 2 for pair in pairs):
            self.starts: tuple[str, ...] = tuple(sorted(pairs))
            self.tail: str | None = "".join(self.first_chars)
            self._pairs: re.Pattern[str] | None = re.compile("|".join(map(re.escape, self.starts)))
        else:
            self.starts, self.tail = self.first_chars, None
            self._pairs = None
        """Text that holds none of ``starts`` and, when ``tail`` is set, does not end with one of its
        characters holds no marker and no start of one at its end (`absent_from` is True): the
        first two characters of every marker when none is shorter (the start of a marker at the end is
        one of them or its first character), else the first characters."""
        self.common = common_char(self.starts)
        """A character that each of ``starts`` holds (text without it holds none of them), else ``""``."""
        self._pair = self.starts[0] if self._pairs is not None and len(self.starts) == 1 else None
        """The one pair every marker starts with, if they share it (found with ``str.find``)."""
        self._char = ordered[0] if len(ordered) == 1 and len(ordered[0]) == 1 else None
        """The marker when it is one character (``>`` ending a tag): nothing else starts it."""

    def __contains__(self, marker: object) -> bool:
        return marker in self.markers

    def find(self, buf: str, pos: int, final: bool) -> tuple[int, int, str | None]:
        """Find the first marker in ``buf[pos:]``.

        Returns ``(stop, resume, marker)``: ``buf[pos:stop]`` is the text before the marker and scanning
        resumes at ``resume`` (just after it). Without a marker, ``marker`` is ``None`` and
        ``stop == resume`` is where a suffix that could still become a marker starts (``len(buf)`` when
        ``final`` or when there is none): the caller holds that suffix back.
        """
        pairs = self._pairs
        if pairs is None:
            char = self._char
            if char is None:
                return self._search(buf, pos, final)
            start = buf.find(char, pos)
            if start < 0:
                return len(buf), len(buf), None
            return start, start + 1, char
        # Every marker starts with one of the pairs in ``starts``: look at those places only, each with
        # an anchored match (a short chunk holds at most one or two of them).
        pair = self._pair
        if pair is not None:
            start = buf.find(pair, pos)
        else:
            hit = pairs.search(buf, pos)
            start = -1 if hit is None else hit.start()
        tries = 0
        while start >= 0:
            if not final and len(buf) - start < self.longest and buf[start:] in self.prefixes:
                return start, start, None  # the start of a marker (perhaps a shorter one) that may still grow
            match = self.pattern.match(buf, start)
            if match is not None:
                return start, match.end(), match.group()
            tries += 1
            if tries == _PAIR_TRIES:  # text with many pairs that start no marker: one search for the rest
                return self._search(buf, start + 1, final)
            if pair is not None:
                start = buf.find(pair, start + 1)
            else:
                hit = pairs.search(buf, start + 1)
                start = -1 if hit is None else hit.start()
        size = len(buf)
        if not final and pos < size and buf[-1] in self.tail:  # type: ignore[operator]
            return size - 1, size - 1, None  # the first character of a marker ends the text
        return size, size, None

    def _search(self, buf: str, pos: int, final: bool) -> tuple[int, int, str | None]:
        """`find` by one regular expression search over ``buf[pos:]``."""
        for char in self.first_chars:
            if buf.find(char, pos) >= 0:
                break
        else:  # no marker can start here: the common case, one str.find per marker-start character
            return len(buf), len(buf), None
        if final:
            match = self.pattern.search(buf, pos)
            if match is None:
                return len(buf), len(buf), None
            return match.start(), match.end(), match.group()
        match = self._scan.search(buf, pos)
        if match is None:
            return len(buf), len(buf), None
        start = match.start()
        if match.lastgroup is not None or self.may_grow(buf, start):
            return start, start, None  # the start of a marker (perhaps a shorter one) that may still grow
        return start, match.end(), match.group()

    def cannot_start_in(self, text: str) -> bool:
        """Whether no character of ``text`` starts a marker (one ``in`` per marker-start character)."""
        for char in self.first_chars:  # noqa: SIM110 (a loop of `in` beats any() here)
            if char in text:
                return False
        return True

    def absent_from(self, text: str) -> bool:
        """Whether ``text`` holds no marker and does not end with the start of one (so, not at the end of
        the input, `find` would pass all of it); one ``in`` per marker-start character when none of
        them is in ``text``."""
        for char in self.first_chars:
            if char in text:
                stop, _resume, marker = self.find(text, 0, False)
                return marker is None and stop == len(text)
        return True

    def may_grow(self, buf: str, start: int) -> bool:
        """Whether ``buf[start:]``, the end of the buffer, is a proper prefix of a marker."""
        return len(buf) - start < self.longest and buf[start:] in self.prefixes

    def partial_start(self, buf: str, pos: int) -> int:
        """Where the longest suffix of ``buf[pos:]`` that is a proper prefix of a marker starts, else
        ``len(buf)``. Looks only at the last ``longest - 1`` characters."""
        size = len(buf)
        low = max(pos, size - self.longest + 1)
        earliest = size
        prefixes = self.prefixes
        for char in self.first_chars:
            start = buf.find(char, low, earliest)
            while start >= 0:
                if buf[start:] in prefixes:
                    earliest = start
                    break
                start = buf.find(char, start + 1, earliest)
        return earliest


_PAIR_TRIES: Final = 4
"""Places that start like a marker but hold none that `Markers.find` looks at one by one before it
searches the rest of the text in one go."""


def _partial(marker: str) -> str:
    """A pattern of the proper prefixes of ``marker``: ``a(?:b(?:c)?)?`` for ``abcd``."""
    pattern = ""
    for char in reversed(marker[1:-1]):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return re.escape(marker[0]) + pattern


_STRING_STOP: Final = re.compile(r'[\\"]')
_STRUCTURE: Final = re.compile(r"[\\{}\[\]]")
"""What `JsonArgs.take` leaves to `JsonArgs.scan`: an escape or a bracket."""
SHORT_PIECE: Final = 16
"""Longest piece `JsonArgs.take` reads character by character (a regex search costs more)."""
_BRACKETS: Final = "{}[]"


_CLOSERS: Final = frozenset('}]"')
"""The characters a root value that `JsonArgs` opens can end with."""


class JsonArgs:
    """Streams JSON arguments text and finds the markers that end it, outside JSON strings only.

    Tracks whether the scan is inside a string (and after a backslash), the bracket depth, and whether a
    root object or array has opened and closed. Whitespace before the root value and after the last
    non-whitespace character outside a string is dropped (held back until something follows it), so
    ``<|begin|> {"a": 1} <|end|>`` gives ``{"a": 1}`` at any chunking.
    """

    __slots__ = ("_last", "_pending_space", "depth", "emitted", "escape", "in_string", "opened")

    def __init__(self) -> None:
        self.in_string = False
        self.escape = False
        self.depth = 0
        self.opened = False
        self.emitted = False
        self._pending_space = ""
        self._last = ""
        """The last character emitted outside a string, whitespace aside."""

    @property
    def complete(self) -> bool:
        """A root value has opened and closed, and nothing but whitespace followed it (as far as `trim`
        has emitted)."""
        return self.opened and self.depth <= 0 and not self.in_string and self._last in _CLOSERS

    def take_in_string(self, text: str) -> bool:
        """If all of ``text``, coming next, stays inside the current JSON string (the scan is in a string
        and ``text`` has no quote), follow it (a trailing backslash escapes what comes next): True.
        Otherwise change nothing: False. (Inside a string no whitespace is pending: `trim` holds it
        back only outside strings and releases it with the next text, which every scan is followed by.)"""
        if not self.in_string or '"' in text:
            return False
        self.follow_string(text)
        return True

    def follow_string(self, text: str) -> None:
        """Follow ``text``, the next piece of the current string, with no quote in it: a trailing run of
        backslashes escapes what comes next when it is odd."""
        if text[-1:] != "\\":
            self.escape = False
        else:
            run = len(text) - len(text.rstrip("\\"))
            self.escape = (run + self.escape if run == len(text) else run) % 2 == 1

    def take(self, text: str, markers: Markers) -> str:
        """Follow ``text``, the next JSON text, in which none of ``markers`` can start (as `scan`
        does to the end), and return what of it to emit now (`trim`). A short piece is read
        character by character, a longer one by `scan` (one without a backslash or bracket only
        opens and closes strings)."""
        if len(text) > SHORT_PIECE:
            if self.escape or _STRUCTURE.search(text) is not None:
                self.scan(text, 0, markers, True)
            else:
                self._follow_quotes(text)
            return self.trim(text)
        self._follow_chars(text)
        if self.in_string and self.emitted and not self._pending_space:
            return text  # (what trim gives inside a string, with nothing held)
        return self.trim(text)

    def _follow_quotes(self, text: str) -> None:
        """Follow ``text``, which holds no backslash or bracket (nothing to escape before it): its
        quotes open and close strings."""
        quotes = text.count('"')
        if quotes:
            if self.depth == 0 and (quotes > 1 or not self.in_string):
                self.opened = True  # a string at the root
            if quotes % 2:
                self.in_string = not self.in_string

    def _follow_chars(self, text: str) -> None:
        """Follow ``text``, a short piece of JSON text, character by character."""
        in_string = self.in_string
        escape = self.escape
        depth = self.depth
        opened = self.opened
        for char in text:
            if in_string:
                if escape:
                    escape = False
                elif char == "\\":
                    escape = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
                opened = opened or depth == 0
            elif char == "{" or char == "[":
                depth += 1
                opened = True
            elif char == "}" or char == "]":
                depth -= 1
        self.in_string = in_string
        self.escape = escape
        self.depth = depth
        self.opened = opened

    def scan(
        self, buf: str, pos: int, markers: Markers, final: bool, *, stop_at_close: bool = False
    ) -> tuple[int, int, str | None]:
        """Scan ``buf[pos:]`` as JSON text up to the first of ``markers`` found outside a string.

        Same result as `Markers.find`. With ``stop_at_close``, scanning also stops right after the
        bracket that closes the root value (``marker`` is then ``""``), so that a wrapper around the
        arguments can take over.
        """
        size = len(buf)
        index = pos
        stops = markers.json_stops
        while index < size:
            if self.in_string:
                if self.escape:
                    self.escape = False
                    index += 1
                    continue
                hit = _STRING_STOP.search(buf, index)
                if hit is None:
                    return size, size, None
                stop = hit.start()
                if buf[stop] == '"':
                    self.in_string = False
                    index = stop + 1
                elif stop + 1 < size:
                    index = stop + 2
                else:
                    self.escape = True
                    return size, size, None
                continue
            hit = stops.search(buf, index)
            if hit is None:
                end = size if final else markers.partial_start(buf, index)
                return end, end, None
            stop = hit.start()
            found = hit.group()
            if found == '"':
                self.in_string = True
                self.opened = self.opened or self.depth == 0
                index = stop + 1
                continue
            if not final and markers.may_grow(buf, stop):
                return stop, stop, None  # a bracket or a shorter marker that may begin a longer marker
            if len(found) > 1 or found not in _BRACKETS:
                return stop, hit.end(), found
            if found in "{[":
                self.depth += 1
                self.opened = True
            else:
                self.depth -= 1
            index = stop + 1
            if stop_at_close and self.depth == 0:
                return index, index, ""
        return size, size, None

    def trim(self, text: str) -> str:
        """The part of ``text`` (just scanned) to emit now: leading whitespace of the value dropped,
        trailing whitespace outside a string held back until non-whitespace follows."""
        if not self.emitted:
            text = text.lstrip()
            if not text:
                return ""
            self.emitted = True
        if self.in_string:
            if self._pending_space:
                text, self._pending_space = self._pending_space + text, ""
            return text
        body = text.rstrip()
        if not body:
            self._pending_space += text
            if len(self._pending_space) > _WHITESPACE_LIMIT:
                body, self._pending_space = self._pending_space, ""
            return body
        pending = self._pending_space
        self._pending_space = text[len(body) :]
        self._last = body[-1]
        return pending + body if pending else body


# --- XML-style parameters ----------------------------------------------------------------------------------

ValueType = str
"""How a parameter value is written in JSON: ``string`` (streamed as a JSON string), ``auto`` (JSON if it
parses as a number, ``true``/``false``/``null``, an object or an array, else a string), or one of the JSON
schema types ``integer``, ``number``, ``boolean``, ``null``, ``object``, ``array``, ``json`` (held until
complete, then converted; a string when it does not convert)."""

_SCALAR_TYPES: Final = frozenset({"integer", "number", "boolean", "null", "object", "array"})
_NUMBER_PREFIX: Final = re.compile(r"-?(?:0|[1-9]\d*)?(?:\.\d*)?(?:[eE][+-]?\d*)?")
_LITERAL_STARTS: Final = frozenset(
    literal[:size] for literal in ("true", "false", "null") for size in range(1, len(literal) + 1)
)
"""``true``, ``false``, ``null`` and every start of them: a value that may still become one of them."""
_SMALL_LIMIT: Final = 256
"""Longest number or literal candidate held before it is taken for a string."""
_OTHER_STARTS: Final = frozenset("-0123456789{[tfn")
"""What JSON other than a string starts with: a number, an object, an array, ``true``, ``false``, ``null``."""


def value_type_from_schema(schema: Mapping[str, Any] | None, key: str) -> ValueType:
    """The `ValueType` of parameter ``key`` of a tool whose JSON schema is ``schema``.

    Without a schema: ``auto``. With a schema: ``string`` for a key the schema does not declare (as vLLM
    does) or declares as a string only, else the declared non-string type (``json`` for several).
    """
    if schema is None:
        return "auto"
    properties = schema.get("properties")
    prop = properties.get(key) if isinstance(properties, Mapping) else None
    if not isinstance(prop, Mapping):
        return "string"
    types = _schema_types(prop)
    types.discard("null") if len(types) > 1 else None
    if not types or types == {"string"}:
        return "string" if types else "auto"
    if len(types) == 1:
        (only,) = types
        return only if only in _SCALAR_TYPES else "string"
    return "json"


def _schema_types(prop: Mapping[str, Any]) -> set[str]:
    declared = prop.get("type")
    types: set[str] = set()
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(item for item in declared if isinstance(item, str))
    for combinator in ("anyOf", "oneOf"):
        options = prop.get(combinator)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, Mapping):
                    types |= _schema_types(option)
    if "enum" in prop and not types:
        types.add("string")
    return types


class XmlArguments:
    """Writes one call's XML-style parameters as a JSON object, incrementally.

    ``begin(key, value_type)`` emits ``{"KEY": `` (or ``, "KEY": ``); ``value(text)`` takes the value's
    characters as they arrive; ``end_value()`` closes it; ``close()`` emits ``}`` (``{}`` with no
    parameters). String values stream JSON-escaped; other values are held until their end (at most
    ``limit`` characters: past it the held text is released raw and the rest streams raw, so a value that
    is not valid JSON makes the arguments invalid JSON that the splitter reports, and nothing is lost).

    ``strip`` says what whitespace around a value is not part of it: ``newline`` (exactly one leading and
    one trailing newline, Qwen3-Coder), ``space`` (all surrounding whitespace, GLM) or ``none``.
    """

    __slots__ = (
        "_emit",
        "_held",
        "_held_size",
        "_limit",
        "_mode",
        "_pending",
        "_started",
        "_strip",
        "_type",
        "count",
        "streaming",
        "strips_space",
    )

    def __init__(self, emit: Callable[[str], None], *, strip: str = "newline", limit: int = 1 << 20) -> None:
        self._emit = emit
        self._strip = strip
        self.strips_space = strip == "space"
        self.streaming = False
        """A string value has started and nothing is held: `value` writes its next characters as
        their JSON escape unless they end with whitespace it may strip (a newline; any whitespace when
        ``strips_space``), so the caller may write them so itself."""
        self._limit = limit
        self.count = 0
        """Parameters begun so far."""
        self._mode = ""
        self._type: ValueType = "auto"
        self._held: list[str] = []
        self._held_size = 0
        self._pending = ""
        self._started = False

    def begin(self, key: str, value_type: ValueType) -> None:
        """Start the value of ``key``; the key is emitted at once."""
        prefix = "{" if self.count == 0 else ", "
        self.count += 1
        self.streaming = False
        self._type = value_type
        self._started = False
        self._pending = ""
        self._held.clear()
        self._held_size = 0
        key = json_escape(key)
        if value_type == "string":
            self._mode = "stream"
            self._emit(prefix + '"' + key + '": "')
        else:
            self._mode = "decide" if value_type == "auto" else "hold"
            self._emit(prefix + '"' + key + '": ')

    def value(self, text: str) -> None:
        """The next characters of the current value (free of markers)."""
        if not text:
            return
        if not self._started:
            text = self._first(text)
        strip = self._strip
        if text and strip != "none":
            if self._pending:
                text = self._pending + text
                self._pending = ""
            if strip == "newline":
                if text[-1] == "\n":  # (perhaps the newline before the end tag: held until more comes)
                    self._pending = "\n"
                    text = text[:-1]
            else:
                body = text.rstrip()
                if len(text) - len(body) <= _WHITESPACE_LIMIT:
                    self._pending = text[len(body) :]
                    text = body
        if text:
            self._take(text)
        self.streaming = self._mode == "stream" and self._started and not self._pending

    def _first(self, text: str) -> str:
        """The value's first characters, without the leading whitespace (or newline) it strips."""
        if self._strip == "space":
            text = text.lstrip()
            self._started = bool(text)
        else:
            self._started = True
            if self._strip == "newline" and text[0] == "\n":
                text = text[1:]
        return text

    def _take(self, text: str) -> None:
        mode = self._mode
        if mode == "stream":
            self._emit(json_escape(text))
        elif mode == "raw":
            self._emit(text)
        elif mode == "decide" and not self._held and text[0] not in _OTHER_STARTS and not text[0].isspace():
            self._mode = "stream"  # (what _decide finds: a string, from its first character on)
            self._emit('"' + json_escape(text))
        else:
            self._held.append(text)
            self._held_size += len(text)
            if mode == "decide":
                self._decide()
            elif self._held_size > self._limit:
                self._release_raw()

    def _decide(self) -> None:
        """While a value without a known type could still be JSON other than a string, hold it."""
        held = "".join(self._held)
        self._held[:] = [held]
        candidate = held.lstrip()
        if not candidate:
            if self._held_size > _SMALL_LIMIT:
                self._stream_held()
            return
        first = candidate[0]
        if first in "{[":
            self._mode = "hold"
            if self._held_size > self._limit:
                self._release_raw()
            return
        if len(candidate) <= _SMALL_LIMIT:
            candidate = candidate.rstrip()
            if first in "-0123456789":
                if _NUMBER_PREFIX.fullmatch(candidate) is not None:
                    return
            elif candidate in _LITERAL_STARTS:
                return
        self._stream_held()

    def _stream_held(self) -> None:
        held = "".join(self._held)
        self._held.clear()
        self._held_size = 0
        self._mode = "stream"
        self._emit('"' + json_escape(held))

    def _release_raw(self) -> None:
        held = "".join(self._held)
        self._held.clear()
        self._held_size = 0
        self._mode = "raw"
        self._emit(held)

    def end_value(self) -> None:
        """The value is complete: emit what was held, converted to its type."""
        self._pending = ""
        self.streaming = False
        mode = self._mode
        if mode == "stream":
            self._emit('"')
        elif mode in ("decide", "hold"):
            held = "".join(self._held)
            self._held.clear()
            self._held_size = 0
            self._emit(_convert(held, self._type))
        self._mode = ""

    def cut(self) -> None:
        """The input ended inside a value: emit what is held as it is (the arguments stay incomplete)."""
        self.streaming = False
        if self._mode in ("decide", "hold"):
            held = "".join(self._held)
            self._held.clear()
            self._held_size = 0
            self._emit(held)
        self._mode = ""

    def close(self) -> None:
        """All parameters are done: close the object."""
        self._emit("}" if self.count else "{}")

    @property
    def in_value(self) -> bool:
        return bool(self._mode)


def _convert(text: str, value_type: ValueType) -> str:
    """JSON text for a held value ``text`` expected to be of ``value_type``; a JSON string if it is not."""
    stripped = text.strip()
    try:
        value: Any = _json_decode(stripped)
        exact = True
    except (msgspec.DecodeError, msgspec.ValidationError):
        value = _literal(stripped, value_type)
        exact = False
    if value is _NOTHING or not _fits(value, value_type):
        return '"' + json_escape(text) + '"'
    if value_type == "integer" and isinstance(value, float):
        return str(int(value))
    return stripped if exact else _json_encode(value).decode()


def _fits(value: Any, value_type: ValueType) -> bool:
    if value_type == "json":  # (a JSON string written as JSON, ``"hello"``, is that string)
        return True
    if value_type == "auto":
        return not isinstance(value, str)
    if value_type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if value_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if value_type == "boolean":
        return isinstance(value, bool)
    if value_type == "null":
        return value is None
    if value_type == "object":
        return isinstance(value, dict)
    if value_type == "array":
        return isinstance(value, list)
    return False


_NOTHING: Final = object()


def _finite(value: Any) -> bool:
    """Whether ``value`` (from ``ast.literal_eval``) holds no infinite or NaN float, which JSON cannot."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(key) and _finite(item) for key, item in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return all(_finite(item) for item in value)
    return True


def _literal(text: str, value_type: ValueType) -> Any:
    """A Python literal (``True``, ``{'a': 1}``) for a typed value, as vLLM's fallback does."""
    if value_type in ("auto", "string") or not text:
        return _NOTHING
    if value_type == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if value_type == "null" and text in ("None", "none", "NULL"):
        return None
    if value_type in ("object", "array", "json"):
        try:
            value = ast.literal_eval(text)
            _json_encode(value)  # a lone surrogate fails here
            if not _finite(value):  # inf would be encoded as null
                return _NOTHING
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, msgspec.EncodeError):
            return _NOTHING
        return value if isinstance(value, dict | list) else _NOTHING
    return _NOTHING
