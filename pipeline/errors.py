"""The exceptions streamfold raises.

::

    StreamfoldError
    ├── ProviderError        the provider reported an error in the stream (an in-band error event)
    ├── StreamDecodeError    the bytes or events could not be decoded (not UTF-8, bad JSON, bad framing)
    ├── ConverterError       a provider event does not have the shape its wire format promises
    ├── ConfigurationError   an unknown provider, tool format or option (e.g. the legacy parser ``native``)
    ├── SubscriberError      a hub subscriber was cut off (overflow under ``disconnect``, hub closed)
    │   └── HubClosedError   the hub closed before its source ended
    ├── ReplayUnavailableError  a late subscriber asked for items the hub no longer keeps
    ├── ServingError         a served response (pipeline.fanout.serving) cannot be read or written
    │   ├── ResponseNotFound     no response has this id (HTTP 404)
    │   ├── ResponseExists       a response with this id was already created
    │   ├── ResponseGone         expired, or the cursor is older than what is retained (HTTP 410)
    │   ├── ProducerLost         a running response's producer stopped sending heartbeats
    │   └── EventLogUnavailable  the log's server could not be reached within the retry bound
    └── MissingExtraError    an optional dependency is missing (also an ImportError); names the extra

Every message says what went wrong and where (event number, byte or character offset).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ConfigurationError",
    "ConverterError",
    "EventLogUnavailable",
    "HubClosedError",
    "MissingExtraError",
    "ProducerLost",
    "ProviderError",
    "ReplayUnavailableError",
    "ResponseExists",
    "ResponseGone",
    "ResponseNotFound",
    "ServingError",
    "StreamDecodeError",
    "StreamfoldError",
    "SubscriberError",
]


class StreamfoldError(Exception):
    """Base class of every error streamfold raises."""


class ProviderError(StreamfoldError):
    """An error the provider sent in the middle of the stream (``event: error``, ``{"type": "error"}``).

    ``kind`` is the provider's error type or code, ``payload`` the error event as received.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        status: int | None = None,
        payload: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.payload = dict(payload) if payload is not None else {}


class StreamDecodeError(StreamfoldError):
    """Bytes or events that cannot be decoded; ``offset`` is where, in bytes or events of the stream."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class ConverterError(StreamfoldError):
    """A provider event that does not fit its wire format; ``event_number`` counts from 0."""

    def __init__(self, message: str, *, event_number: int | None = None) -> None:
        super().__init__(message)
        self.event_number = event_number


class ConfigurationError(StreamfoldError, ValueError):
    """An option streamfold does not know."""


class SubscriberError(StreamfoldError):
    """A hub subscriber was cut off: it fell behind under the ``disconnect`` policy, or the hub closed."""


class HubClosedError(SubscriberError):
    """The hub was closed (its ``async with`` block left or cancelled) before its source ended."""


class ReplayUnavailableError(StreamfoldError):
    """A subscriber asked for replay, but the hub no longer has every item since the start."""


class ServingError(StreamfoldError):
    """A served response cannot be read or written; ``response_id`` names it."""

    def __init__(self, message: str, *, response_id: str) -> None:
        super().__init__(message)
        self.response_id = response_id


class ResponseNotFound(ServingError):
    """No response has this id (never created, or forgotten long ago): HTTP 404."""


class ResponseExists(ServingError):
    """A response with this id was already created: ids are never reused."""


class ResponseGone(ServingError):
    """The response expired, or the reader's cursor is older than what is retained: HTTP 410.

    ``first_id`` is the oldest id still retained (None when the whole response expired): a client can
    restart from ``first_id - 1`` knowingly; nothing is replayed partially behind its back.
    """

    def __init__(self, message: str, *, response_id: str, first_id: int | None = None) -> None:
        super().__init__(message, response_id=response_id)
        self.first_id = first_id


class ProducerLost(ServingError):
    """A running response's producer sent no heartbeat for the log's ``heartbeat_timeout``: its process
    died or hangs. Readers get this as a terminal error instead of waiting for ever."""


class EventLogUnavailable(ServingError):
    """The log's server (Redis, NATS) could not be reached within the retry bound; the message says
    which operation failed and how often it was tried."""


class MissingExtraError(StreamfoldError, ImportError):
    """A feature needs an optional dependency that is not installed; ``extra`` names what to install
    (``pip install 'streamfold[EXTRA]'``), ``name`` the missing module."""

    def __init__(self, message: str, *, extra: str, name: str | None = None) -> None:
        super().__init__(message, name=name)
        self.extra = extra
