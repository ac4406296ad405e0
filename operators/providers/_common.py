"""Helpers shared by every converter: tool-call id generation and call positions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeAlias, TypeGuard

__all__ = ["CallIndexer", "IdFactory", "is_mapping", "new_call_id"]

IdFactory: TypeAlias = Callable[[int], str]
"""Makes the id of a tool call the provider sent without one, from the call's position (0, 1, ...)."""


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, fast for the dicts a JSON decoder makes: checking a dict against the
    ``Mapping`` ABC costs several times a plain type check, on every field of every event."""
    return type(value) is dict or isinstance(value, Mapping)


def new_call_id(index: int) -> str:
    """The default :data:`IdFactory`: ``call_`` + 24 hex characters of a uuid4 (``index`` is unused)."""
    del index
    return "call_" + uuid.uuid4().hex[:24]


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
