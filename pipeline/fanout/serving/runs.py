"""Durable runs queued on an event log: what `pipeline.fanout.protocols.chat_routes` writes when
a chat request starts a run that a worker process runs (`pipeline.agent.durable.serve_runs`).

A queued run is a response of the log (its id is the run id) whose meta has ``"durable": true`` and
whose first entry is ``{"type": "RUN_START", "messages", "approvals"?}``: the conversation the run
starts from, and the decisions on tool approvals the request brought (each a
`pipeline.models.ToolApproval` as JSON). The web worker that queued it only reads it back; a
worker that takes the run's lease runs it (`pipeline.agent.durable.run_durable`), so no model is
called in the web tier and a run outlives the web worker that queued it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final

import anyio
import msgspec

from pipeline._jsonenc import encode_json
from pipeline.errors import ConfigurationError
from pipeline.fanout.serving._log import EventLog, ResponseStatus, check_response_id, error_to_entry
from pipeline.models import ToolApproval

__all__ = ["DURABLE", "RUN_START", "DurableRuns", "run_start"]

DURABLE: Final = "durable"
"""The meta key that marks a response as a durable run."""

RUN_START: Final = "RUN_START"
"""The type of a durable run's first entry."""


def run_start(messages: Sequence[Any], approvals: Sequence[ToolApproval] = ()) -> dict[str, Any]:
    """A durable run's first entry.

    Args:
        messages: the conversation the run starts from.
        approvals: the approval decisions it brings; none: no ``approvals`` key.
    """
    entry: dict[str, Any] = {"type": RUN_START, "messages": list(messages)}
    if approvals:
        entry["approvals"] = msgspec.to_builtins(list(approvals))
    return entry


class DurableRuns:
    """Durable runs queued on ``log`` for worker processes: pass it to
    `pipeline.fanout.protocols.chat_routes` in place of a ``ResponseManager``.

    ``log`` is shared by the web workers and the run workers (a
    `pipeline.fanout.serving.redis.RedisEventLog` or
    `pipeline.fanout.serving.nats.NatsEventLog` across processes).
    """

    def __init__(self, log: EventLog) -> None:
        self.log = log

    async def queue(
        self,
        messages: Callable[[], Awaitable[Any]],
        *,
        response_id: str,
        meta: Mapping[str, Any] = {},
        approvals: Sequence[ToolApproval] = (),
    ) -> str:
        """Queue a run; it exists, with its ``RUN_START``, when this returns.

        Args:
            messages: ``await messages()`` gives the run's conversation (a list); called only once the log
                has room and the id is free.
            response_id: the run's id.
            meta: kept with the run and shown in its status.
            approvals: the tool approval decisions the request brings.

        Returns:
            ``response_id``.

        Raises:
            ResponseExists: ``response_id`` was used before.
            EventLogFull: the log has no room for another running response.
            ConfigurationError: an invalid ``response_id``; ``messages()`` gave no list, or one that
                is not JSON.
        """
        check_response_id(response_id)
        await self.log.check_create(response_id)
        conversation = await messages()
        if not isinstance(conversation, list | tuple):
            kind = type(conversation).__name__
            raise ConfigurationError(f"a durable run starts from a list of messages, got {kind}")
        try:
            first = encode_json(run_start(conversation, approvals))
        except (TypeError, msgspec.EncodeError) as exc:
            raise ConfigurationError(f"a durable run's messages must be JSON: {exc}") from None
        await self.log.create(response_id, meta={**meta, DURABLE: True})
        try:
            await self.log.append(response_id, [first])
        except BaseException as exc:  # a run without its start is of no use to any worker
            with anyio.CancelScope(shield=True), suppress(Exception):
                await self.log.end(response_id, error=error_to_entry(exc), state="failed")
            raise
        return response_id

    async def queued(self) -> list[ResponseStatus]:
        """The durable runs still running (new, held by a worker, or whose worker died), oldest first;
        a run whose ``RUN_START`` is not in the log yet is left out."""
        return [
            status
            for status in await self.log.active()
            if status.state == "running" and status.meta.get(DURABLE) is True and status.last_id > 0
        ]
