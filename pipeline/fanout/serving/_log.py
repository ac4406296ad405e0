"""The event log every serving backend implements: entries with ids, response status, retention.

A response is a log of entries with ids 1, 2, 3, ... (contiguous, assigned by the log at append), ending
with one terminal entry (``end=True``). A producer appends; any number of readers, in any process, read
from any id on (catch-up, then live). The log never waits for readers: each reader applies its own policy
at its edge (see `pipeline.fanout.web`).

Changes from the interface in the issue brief (decided while writing this module):

- ``response_id`` must match `RESPONSE_ID_PATTERN` (letters, digits, ``_`` and ``-``, 1 to 128
  characters): safe as a URL segment, inside a Redis hash tag and as a NATS subject token. Every backend
  refuses any other id alike: ``create`` with ``ConfigurationError``, the others as an unknown id
  (``status`` None, else ``ResponseNotFound``), without asking its server.
- The terminal entry has an id of its own (``last_id`` counts it), so a reader that saw it can resume
  after it and gets nothing more.
- ``create`` raises `ResponseExists` for an id already used; ``append``, ``end``
  and ``heartbeat`` on an ended response raise `ResponseGone` (unknown:
  `ResponseNotFound`).
- ``stop_requested`` yields once when a stop is requested (at once if one was requested before), and ends
  when the response ends.
- ``check_create`` raises what a ``create`` would (``ResponseExists``, or
  `EventLogFull` for want of room), so that a start is refused before its
  model is called.
- The errors share a base, `ServingError`, with ``response_id``; a backend whose
  server stays unreachable past its retry bound raises `EventLogUnavailable`.
- Retention keeps at least the newest entry even if it alone is over ``max_bytes`` (an item's size is
  bounded upstream by the pipeline's own caps); `MAX_ITEM_BYTES` bounds one item in any case.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeGuard

import msgspec

from pipeline.errors import ConfigurationError, ProviderError, ResponseNotFound, StreamfoldError

__all__ = [
    "DEFAULT_HEARTBEAT_TIMEOUT",
    "DEFAULT_RETENTION",
    "MAX_ITEM_BYTES",
    "RESPONSE_ID_PATTERN",
    "TERMINAL_STATES",
    "Entry",
    "EventLog",
    "ResponseState",
    "ResponseStatus",
    "Retention",
    "check_lookup_id",
    "check_response_id",
    "error_to_entry",
    "is_response_id",
]

ResponseState: TypeAlias = Literal["running", "done", "failed", "stopped"]
"""``running`` until the terminal entry; then ``done`` (the source ended), ``failed`` (it raised, or its
producer was lost), or ``stopped`` (an explicit stop)."""

TERMINAL_STATES: Final = frozenset({"done", "failed", "stopped"})

RESPONSE_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")

DEFAULT_HEARTBEAT_TIMEOUT: Final = 15.0
"""Seconds without a heartbeat after which a running response's producer is taken as lost."""

MAX_ITEM_BYTES: Final = 8 * 1024 * 1024
"""The largest single item an append accepts (bytes of its JSON)."""


class Entry(msgspec.Struct, frozen=True):
    """One entry of a response's log."""

    id: int
    """1, 2, 3, ... contiguous per response, assigned by the log at append."""
    data: bytes | None = None
    """One item as JSON (``PipelineEvent.to_dict()`` or any JSON the source gives); None on the end."""
    end: bool = False
    """The terminal entry: the response ended."""
    error: dict[str, Any] | None = None
    """On the terminal entry of a failed or stopped response: ``{"type", "message", "kind"}``."""


class ResponseStatus(msgspec.Struct, frozen=True):
    """A response as the log knows it."""

    response_id: str
    state: ResponseState
    last_id: int
    """Id of the last entry appended (0 before any)."""
    first_id: int
    """Oldest id still retained (1 until trimming)."""
    created: float
    """Unix seconds."""
    updated: float
    """Unix seconds of the last append, end or heartbeat."""
    meta: dict[str, Any] = msgspec.field(default_factory=dict)


class Retention(msgspec.Struct, frozen=True):
    """What a log keeps of each response.

    ``max_items`` and ``max_bytes`` (the sum of the items' JSON) cap a response's retained entries: the
    oldest are trimmed first, so a reader whose cursor falls behind them gets
    `ResponseGone`. ``ttl_after_end`` is how many seconds an ended response stays
    readable; after that it is gone (410), and later forgotten (404).
    """

    max_items: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    ttl_after_end: float = 600.0

    def __post_init__(self) -> None:
        if self.max_items < 1:
            raise ConfigurationError(f"Retention.max_items must be at least 1, got {self.max_items}")
        if self.max_bytes < 1:
            raise ConfigurationError(f"Retention.max_bytes must be at least 1, got {self.max_bytes}")
        if not self.ttl_after_end >= 0:
            raise ConfigurationError(
                f"Retention.ttl_after_end must be a number of seconds >= 0, got {self.ttl_after_end}"
            )


DEFAULT_RETENTION: Final = Retention()


class EventLog(Protocol):
    """One serving backend; every method is safe to call from many tasks at once."""

    async def create(self, response_id: str, *, meta: Mapping[str, Any] = ...) -> None:
        """Start a response: ``running``, no entries.

        Args:
            response_id: the new response's id.
            meta: kept with the response and shown in its status (such as its owner).

        Raises:
            ResponseExists: the id was used.
        """

    async def check_create(self, response_id: str) -> None:
        """Raise what ``create(response_id)`` would raise now, creating nothing.

        The manager asks before it makes a source (calls the model).

        Raises:
            ResponseExists: the id is in use, or remembered as expired.
            EventLogFull: no room (a log without a cap on responses never is full).
        """

    async def append(self, response_id: str, items: Sequence[bytes]) -> int:
        """Append ``items`` in order (ids assigned by the log) and return the last id.

        Never waits for readers.

        Args:
            response_id: the running response.
            items: the items' bytes (JSON), in order.

        Raises:
            ResponseNotFound: the log does not know the response.
            ResponseGone: the response ended or expired.
            EventLogUnavailable: the server stayed unreachable within the retry bound.
        """

    async def end(
        self,
        response_id: str,
        *,
        error: Mapping[str, Any] | None = None,
        state: Literal["done", "failed", "stopped"] = "done",
    ) -> None:
        """Append the terminal entry; retention's ``ttl_after_end`` starts.

        Args:
            response_id: the running response.
            error: the error the response ended with, as JSON-ready data; None: none.
            state: how it ended: ``done``, ``failed`` or ``stopped``.
        """

    async def heartbeat(self, response_id: str) -> None:
        """The producer is alive (appends count as heartbeats too)."""

    def read(self, response_id: str, *, after: int = 0) -> AsyncIterator[Entry]:
        """Entries with id > ``after``: what is retained, then live ones, ending after the terminal entry.

        Args:
            response_id: the response.
            after: the last id the reader has; 0: from the start.

        Raises:
            ResponseNotFound: from the first ``__anext__``: the log does not know the response.
            ResponseGone: from the first ``__anext__``: expired, or ``after < first_id - 1`` (it carries
                ``first_id``).
            ProducerLost: no heartbeat for ``heartbeat_timeout`` while running.
        """

    async def status(self, response_id: str) -> ResponseStatus | None:
        """The response's status, or None if the log does not know it (or it expired)."""

    async def active(self) -> list[ResponseStatus]:
        """Running responses and ended ones still retained, oldest first."""

    async def request_stop(self, response_id: str) -> None:
        """Ask the producer (in any process) to stop; nothing once the response ended.

        Raises:
            ResponseNotFound: the log does not know the response.
        """

    def stop_requested(self, response_id: str) -> AsyncIterator[None]:
        """Wait for a stop request: the producer's manager cancels the source at the first item.

        Yields:
            Once when a stop is requested (at once if already requested); ends when the response ends.
        """

    async def aclose(self) -> None:
        """Release connections; readers still open end with an error."""


def is_response_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` matches `RESPONSE_ID_PATTERN`: what every backend can hold (a NATS subject
    cannot hold ``.``, ``*``, ``>``, ``$JS`` or non-ASCII; a Redis hash tag cannot hold braces)."""
    return isinstance(value, str) and RESPONSE_ID_PATTERN.fullmatch(value) is not None


def check_response_id(response_id: object) -> str:
    """``response_id`` for creating a response: a ``ConfigurationError`` (HTTP 400) unless it matches
    `RESPONSE_ID_PATTERN`."""
    if is_response_id(response_id):
        return response_id
    raise ConfigurationError(f"a response id is 1 to 128 letters, digits, '_' or '-', got {response_id!r}")


def check_lookup_id(response_id: str) -> str:
    """``response_id`` for looking a response up: one no backend can hold names no response, so
    `ResponseNotFound` (HTTP 404), on every backend alike."""
    if not is_response_id(response_id):
        raise ResponseNotFound(f"no response {response_id!r}", response_id=response_id)
    return response_id


def error_to_entry(error: BaseException) -> dict[str, Any]:
    """The ``error`` of a terminal entry: ``{"type", "message", "kind"}``.

    Messages of exceptions that are not streamfold's are withheld (they may carry internals): the
    entry is read by browsers.
    """
    message = str(error) if isinstance(error, StreamfoldError) else "the response's source failed"
    kind = error.kind if isinstance(error, ProviderError) else None
    return {"type": type(error).__name__, "message": message, "kind": kind}
