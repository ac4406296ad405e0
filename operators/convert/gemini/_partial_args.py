"""Gemini's streamed function-call arguments (Vertex ``partialArgs``): a JSONPath parser and a writer that
turns values given by path into JSON text as they arrive."""

from __future__ import annotations

import json
from typing import Any, Final, TypeAlias

import msgspec

from pipeline.models import JSONPath

__all__ = ["PartialArgsWriter", "PartialValue", "json_text", "parse_json_path", "plain_number"]

PartialValue: TypeAlias = str | int | float | bool | None

_EXACT_INTEGERS: Final = 2**53
"""Integers a double holds exactly."""


def plain_number(value: int | float) -> int | float:
    """A ``numberValue`` as the wire writes it: an integral double is an integer (``2``, not ``2.0``), so a
    value that went through google-genai (which types it ``float``) gives the same JSON text."""
    if type(value) is float and value.is_integer() and abs(value) <= _EXACT_INTEGERS:
        return int(value)
    return value


def json_text(value: Any) -> str:
    """Compact JSON text of ``value``; lone surrogates (from a ``\\ud83d`` escape) stay escaped."""
    try:
        return msgspec.json.encode(value).decode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"))


def parse_json_path(path: str) -> JSONPath:
    """``$.recipe.steps[0]`` -> ``("recipe", "steps", 0)``: the RFC 9535 subset Gemini sends.

    Accepts ``.name``, ``[index]`` and ``['name']`` / ``["name"]`` (with backslash escapes). Raises
    `ValueError` naming the offset of anything else.
    """
    if not path.startswith("$"):
        raise ValueError(f"JSON path {path!r} does not start with '$'")
    components: list[str | int] = []
    position = 1
    while position < len(path):
        char = path[position]
        component: str | int
        if char == ".":
            component, position = _dotted_name(path, position)
        elif char == "[":
            component, position = _bracket_selector(path, position)
        else:
            raise ValueError(f"JSON path {path!r} has an unexpected {char!r} at offset {position}")
        components.append(component)
    return tuple(components)


def _dotted_name(path: str, start: int) -> tuple[str, int]:
    """The name after the ``.`` at ``path[start]`` and the offset after it."""
    end = start + 1
    while end < len(path) and path[end] not in ".[":
        end += 1
    if end == start + 1:
        raise ValueError(f"JSON path {path!r} has an empty name at offset {start}")
    return path[start + 1 : end], end


def _bracket_selector(path: str, start: int) -> tuple[str | int, int]:
    """The quoted name or index in the brackets opened at ``path[start]`` and the offset after them."""
    end = path.find("]", start)
    if end < 0:
        raise ValueError(f"JSON path {path!r} has an unclosed '[' at offset {start}")
    if path[start + 1 : start + 2] in ("'", '"'):
        name, end = _quoted_name(path, start + 1)
        return name, end + 1
    index = path[start + 1 : end]
    if not index.isdigit():
        raise ValueError(f"JSON path {path!r} has a bad selector at offset {start}")
    return int(index), end + 1


def _quoted_name(path: str, start: int) -> tuple[str, int]:
    """The name quoted at ``path[start]`` and the offset of the ``]`` after it."""
    quote = path[start]
    pieces: list[str] = []
    position = start + 1
    while position < len(path):
        char = path[position]
        if char == "\\" and position + 1 < len(path):
            pieces.append(path[position + 1])
            position += 2
            continue
        if char == quote:
            if path[position + 1 : position + 2] != "]":
                break
            return "".join(pieces), position + 1
        pieces.append(char)
        position += 1
    raise ValueError(f"JSON path {path!r} has a bad quoted name at offset {start}")


class _Container:
    """An object or array whose closing bracket is not written yet."""

    __slots__ = ("count", "is_array", "keys")

    def __init__(self, is_array: bool) -> None:
        self.is_array = is_array
        self.count = 0
        self.keys: set[str] = set()


class PartialArgsWriter:
    """Writes a streamed call's arguments as JSON text, value by value, in the order they arrive.

    Values come with their JSON path. The writer keeps the chain of open containers from the root object
    to the last value: a path that leaves it closes containers, one that goes deeper opens them, and a
    string value can stay open for more pieces. Work is proportional to the text written (plus the path
    length per value); nothing is re-read.

    Gemini sends values in document order. A path that goes back into a container already closed, repeats
    a key, skips an array index or mixes object and array cannot be written as JSON text without taking
    text back, so it raises `ValueError`.
    """

    __slots__ = ("_closed", "_open_string", "_path", "_stack")

    def __init__(self) -> None:
        self._stack: list[_Container] = [_Container(is_array=False)]
        self._path: list[str | int] = []
        """The keys leading from the root to ``_stack[-1]``."""
        self._open_string: JSONPath | None = None
        self._closed = False

    def start(self) -> str:
        """The text before any value: the root object's ``{``."""
        return "{"

    def write(self, path: JSONPath, value: Any, *, will_continue: bool = False) -> str:
        """The text that puts ``value`` at ``path``; ``will_continue`` leaves a string value open."""
        if self._closed:
            raise ValueError("the arguments object is already closed")
        pieces: list[str] = []
        if self._open_string is not None:
            if path == self._open_string and isinstance(value, str):
                return self._more_string(value, will_continue)
            pieces.append('"')
            self._open_string = None
        if not path:
            raise ValueError("a value for the root '$': the arguments must be an object")
        self._move_to(path, pieces)
        if isinstance(value, str) and will_continue:
            pieces.append('"')
            pieces.append(_string_body(value))
            self._open_string = path
        else:
            pieces.append(json_text(value))
        return "".join(pieces)

    def _more_string(self, value: str, will_continue: bool) -> str:
        """The next piece of the string value left open, and its closing quote if it ends here."""
        if will_continue:
            return _string_body(value)
        self._open_string = None
        return _string_body(value) + '"'

    def _move_to(self, path: JSONPath, pieces: list[str]) -> None:
        """Close the containers ``path`` leaves, open those it enters, and start its last member."""
        parent = path[:-1]
        open_path = self._path
        common = 0
        while common < len(open_path) and common < len(parent) and open_path[common] == parent[common]:
            common += 1
        while len(open_path) > common:
            pieces.append("]" if self._stack.pop().is_array else "}")
            open_path.pop()
        for depth in range(common, len(parent)):
            key = parent[depth]
            self._member(pieces, key, path)
            is_array = isinstance(path[depth + 1], int)
            pieces.append("[" if is_array else "{")
            self._stack.append(_Container(is_array))
            open_path.append(key)
        self._member(pieces, path[-1], path)

    def close(self) -> str:
        """The text that ends the arguments: an open string's quote and every open bracket."""
        if self._closed:
            return ""
        pieces = ['"'] if self._open_string is not None else []
        self._open_string = None
        pieces.extend("]" if container.is_array else "}" for container in reversed(self._stack))
        self._stack.clear()
        self._path.clear()
        self._closed = True
        return "".join(pieces)

    def _member(self, pieces: list[str], key: str | int, path: JSONPath) -> None:
        """Start a new member ``key`` of the innermost open container."""
        container = self._stack[-1]
        if container.is_array:
            if not isinstance(key, int):
                raise ValueError(f"path {_format_path(path)} names key {key!r} inside an array")
            if key != container.count:
                raise ValueError(
                    f"path {_format_path(path)} has index {key} where index {container.count} comes next"
                )
        else:
            if not isinstance(key, str):
                raise ValueError(f"path {_format_path(path)} has index {key} inside an object")
            if key in container.keys:
                raise ValueError(f"path {_format_path(path)} goes back to key {key!r}, already written")
            container.keys.add(key)
        if container.count:
            pieces.append(",")
        container.count += 1
        if isinstance(key, str):
            pieces.append(json_text(key))
            pieces.append(":")


def _string_body(text: str) -> str:
    """``text`` escaped for the inside of a JSON string (without the quotes)."""
    return json_text(text)[1:-1]


def _format_path(path: JSONPath) -> str:
    return "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path)
