"""The one loop every stage runs: pull an item, feed the synchronous core, yield what it returns."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any, Protocol, TypeVar

from aiostream import streamcontext

__all__ = ["Chain", "Core", "drive"]

In = TypeVar("In")
Out = TypeVar("Out")
In_contra = TypeVar("In_contra", contravariant=True)
Out_co = TypeVar("Out_co", covariant=True)


class Core(Protocol[In_contra, Out_co]):
    """A sans-IO stage: knows nothing of asyncio, so tests can feed it at every chunk boundary."""

    def feed(self, item: In_contra, /) -> Iterable[Out_co]:
        """Take the next input item; return the outputs it completes (often none, sometimes several)."""
        ...

    def finish(self) -> Iterable[Out_co]:
        """The input has ended: return what was held back, or the errors of what is left unfinished."""
        ...


async def drive(source: AsyncIterable[In], core: Core[In, Out]) -> AsyncIterator[Out]:
    """Run ``core`` over ``source`` in the caller's task.

    Backpressure is the pull: the source is read only as fast as the consumer asks. Closing the returned
    iterator closes the source at once (``streamcontext`` guarantees ``aclose``).
    """
    async with streamcontext(source) as items:
        async for item in items:
            for out in core.feed(item):
                yield out
    for out in core.finish():
        yield out


class Chain:
    """Cores in a row, as one core: what one returns is fed to the next (the seeds' synchronous handlers,
    and pipelines that pick their stages from the first item, are built from it)."""

    def __init__(self, *cores: Core[Any, Any]) -> None:
        if not cores:
            raise ValueError("Chain needs at least one core")
        self.cores = cores

    def feed(self, item: object) -> list[object]:
        items: list[object] = [item]
        for core in self.cores:
            items = [out for each in items for out in core.feed(each)]
            if not items:
                break
        return items

    def finish(self) -> list[object]:
        outputs: list[object] = []
        for position, core in enumerate(self.cores):
            items = list(core.finish())
            for later in self.cores[position + 1 :]:
                items = [out for each in items for out in later.feed(each)]
            outputs.extend(items)
        return outputs
