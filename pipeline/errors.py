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
    │   ├── EventLogUnavailable  the log's server could not be reached within the retry bound
    │   └── EventLogFull         the log runs as many responses as it may (HTTP 503, Retry-After)
    └── MissingExtraError    an optional dependency is missing (also an ImportError); names the extra

Every message says what went wrong and where (event number, byte or character offset). A stage that fails
part-way through its input puts what it had produced before the failure in ``partial_outputs``: the stage
runtime (`pipeline.stage`) delivers those first, then raises, so nothing already received is lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ConfigurationError",
    "ConverterError",
    "EventLogFull",
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
    "TurnError",
]


class StreamfoldError(Exception):
    """Base class of every error streamfold raises."""

    partial_outputs: list[Any]
    """What the failing stage (or chain of stages) had produced before the failure, in order: delivered to
    the consumer before the error by `pipeline.stage.drive`. Empty when nothing was."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partial_outputs = []


class ProviderError(StreamfoldError):
    """An error the provider sent in the middle of the stream (``event: error``, ``{"type": "error"}``).

    Args:
        message: what went wrong, where.
        kind: the provider's error type or code.
        status: the HTTP-like status the provider gave, if any.
        payload: the error event as received.
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

    @classmethod
    def from_payload(
        cls, details: Mapping[str, Any], payload: Mapping[str, Any], where: str
    ) -> ProviderError:
        """The error for an error object found in a payload: the one wording of every in-band error.

        The message reads ``{where}: provider error ({kind}): {message}``. ``kind`` is the most specific
        word the provider gave (a string ``code``, else ``type``, else ``status``); ``status`` the
        HTTP-like number (``status_code``, or a numeric ``code``: Gemini).

        Args:
            details: the error object.
            payload: the event it was found in.
            where: where the event was (``event 3``, ``frame 0``, ``HTTP 429 from URL``).
        """
        message = details.get("message") or details.get("error") or "the provider reported an error"
        code = details.get("code")
        kind = next(
            (
                word
                for word in (code, details.get("type"), details.get("status"))
                if isinstance(word, str) and word
            ),
            None,
        )
        status = details.get("status_code", code)
        return cls(
            f"{where}: provider error{f' ({kind})' if kind else ''}: {message}",
            kind=kind,
            status=status if isinstance(status, int) and not isinstance(status, bool) else None,
            payload=payload,
        )


class StreamDecodeError(StreamfoldError):
    """Bytes or events that cannot be decoded.

    Args:
        message: what could not be decoded, and where.
        offset: where, in bytes or events of the stream; None when unknown.
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class ConverterError(StreamfoldError):
    """A provider event that does not fit its wire format.

    Args:
        message: what does not fit, naming the event and field.
        event_number: the event's number, from 0; None when unknown.
    """

    def __init__(self, message: str, *, event_number: int | None = None) -> None:
        super().__init__(message)
        self.event_number = event_number


class ConfigurationError(StreamfoldError, ValueError):
    """An option streamfold does not know."""


class SubscriberError(StreamfoldError):
    """A hub subscriber was cut off: it fell behind under the ``disconnect`` policy, or the hub closed."""


class HubClosedError(SubscriberError):
    """The hub was closed (its ``async with`` block left or cancelled) before its source ended."""


class TurnError(StreamfoldError):
    """A turn cannot be built: an event that is not a pipeline event, the same events fed twice, or tool
    outputs that do not answer exactly the turn's client calls."""


class ReplayUnavailableError(StreamfoldError):
    """A subscriber asked for replay, but the hub no longer has every item since the start."""


class ServingError(StreamfoldError):
    """A served response cannot be read or written.

    Args:
        message: what failed.
        response_id: the response.
    """

    def __init__(self, message: str, *, response_id: str) -> None:
        super().__init__(message)
        self.response_id = response_id


class ResponseNotFound(ServingError):
    """No response has this id (never created, or forgotten long ago): HTTP 404."""


class ResponseExists(ServingError):
    """A response with this id was already created: ids are never reused."""


class ResponseGone(ServingError):
    """The response expired, or the reader's cursor is older than what is retained: HTTP 410.

    A client can restart from ``first_id - 1`` knowingly; nothing is replayed partially behind its back.

    Args:
        message: what is gone.
        response_id: the response.
        first_id: the oldest id still retained; None when the whole response expired.
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


class EventLogFull(ServingError):
    """The log runs as many responses as it may (``MemoryEventLog``'s ``max_responses``): no new one
    until one ends.

    Args:
        message: what was refused.
        response_id: the response that could not be created.
        retry_after: the seconds a client is told to wait (HTTP 503, ``Retry-After``).
    """

    def __init__(self, message: str, *, response_id: str, retry_after: int) -> None:
        super().__init__(message, response_id=response_id)
        self.retry_after = retry_after


class MissingExtraError(StreamfoldError, ImportError):
    """A feature needs an optional dependency that is not installed.

    Args:
        message: what is missing and what to install.
        extra: the extra to install (``pip install 'streamfold[EXTRA]'``).
        name: the missing module.
    """

    def __init__(self, message: str, *, extra: str, name: str | None = None) -> None:
        super().__init__(message, name=name)
        self.extra = extra
