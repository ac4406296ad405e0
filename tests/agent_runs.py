"""What the tool runner's tests share: a response's events made by hand, and a run collected under the
hang guard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio

from pipeline.agent import ToolRegistry, run_tools
from pipeline.models import PipelineEvent, ResponseEnd, ToolInvocation
from tests.guards import GUARD

__all__ = ["END", "call", "collect", "items"]

END = ResponseEnd(finish_reason="tool_calls")
"""A safe finish: the held calls of its response run."""


def call(call_id: str, name: str, **arguments: Any) -> ToolInvocation:
    return ToolInvocation(call_id, name, arguments)


async def items(*events: PipelineEvent) -> AsyncIterator[PipelineEvent]:
    for event in events:
        yield event


async def collect(source: Any, tools: ToolRegistry, **options: Any) -> list[Any]:
    """Every item :func:`run_tools` gives for ``source``, within the hang guard."""
    with anyio.fail_after(GUARD):
        async with run_tools(source, tools, **options) as run:
            return [item async for item in run]
