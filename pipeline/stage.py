"""The one loop every stage runs: pull an item, feed the synchronous core, yield what it returns."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any, Protocol, TypeVar

from aiostream import streamcontext

__all__ = ["Chain", "Core", "drive", "feed_each", "partial_outputs"]

In = TypeVar("In")
Out = TypeVar("Out")
In_contra = TypeVar("In_contra", contravariant=True)
Out_co = TypeVar("Out_co", covariant=True)


class Core(Protocol[In_contra, Out_co]):
    """A sans-IO stage: knows nothing of asyncio, so tests can feed it at every chunk boundary.

    A core may also have ``abort(exc) -> Iterable[Out]``, called by :func:`drive` when the source fails.
    """

    def feed(self, item: In_contra, /) -> Iterable[Out_co]:
        """Take the next input item; return the outputs it completes (often none, sometimes several)."""
        ...

    def finish(self) -> Iterable[Out_co]:
        """The input has ended: return what was held back, or the errors of what is left unfinished."""
        ...


def partial_outputs(exc: BaseException) -> list[Any]:
    """What the feed (or finish) that raised ``exc`` had produced before it failed."""
    outputs: list[Any] = getattr(exc, "streamfold_partial_outputs", [])
    return outputs


def feed_each(core: Core[In, Out], items: Iterable[In]) -> list[Out]:
    """Feed several items to ``core``. If one fails, the outputs of those before it are not lost: they
    travel on the exception (see :func:`partial_outputs`), and :func:`drive` yields them before raising."""
    outputs: list[Out] = []
    feed = core.feed
    try:
        for item in items:
            outputs.extend(feed(item))
    except Exception as exc:
        exc.streamfold_partial_outputs = outputs + partial_outputs(exc)  # type: ignore[attr-defined]
        raise
    return outputs


def _salvage(exc: Exception) -> list[Any]:
    """What the failed feed or finish produced before ``exc``, taken off the exception (to yield once)."""
    salvaged = partial_outputs(exc)
    exc.streamfold_partial_outputs = []  # type: ignore[attr-defined]
    return salvaged


async def drive(source: AsyncIterable[In], core: Core[In, Out]) -> AsyncIterator[Out]:
    """Run ``core`` over ``source`` in the caller's task.

    Backpressure is the pull: the source is read only as fast as the consumer asks. Closing the returned
    iterator closes the source at once (``streamcontext`` guarantees ``aclose``). When the core fails,
    what it produced before the failure is yielded first: nothing already received is lost. When the
    source fails, a core with an ``abort(exc)`` method (the segment emitter) closes what it has open, and
    what that returns is yielded before the exception propagates; other cores are left as they are. An
    exception thrown in at a yield is never caught here.
    """
    feed = core.feed
    abort: Callable[[Exception], Iterable[Out]] | None = getattr(core, "abort", None)
    failure: Exception | None = None
    async with streamcontext(source) as items:
        next_item = items.__anext__
        while True:
            try:
                item = await next_item()
            except StopAsyncIteration:
                break
            except Exception as exc:
                if abort is None:
                    raise
                outputs, failure = list(abort(exc)), exc
            else:
                # The per-item path: a plain call, no allocation but the core's own.
                try:
                    produced = feed(item)
                    outputs = produced if isinstance(produced, list) else list(produced)
                except Exception as exc:
                    outputs, failure = _salvage(exc), exc
            for out in outputs:
                yield out
            if failure is not None:
                raise failure
    try:
        outputs = list(core.finish())
    except Exception as exc:
        outputs, failure = _salvage(exc), exc
    for out in outputs:
        yield out
    if failure is not None:
        raise failure


class Chain:
    """Cores in a row, as one core: what one returns is fed to the next (the seeds' synchronous handlers,
    and pipelines that pick their stages from the first item, are built from it).

    If a core fails, what the cores before it produced still flows through the cores after it, and the
    result travels on the exception (:func:`partial_outputs`).
    """

    def __init__(self, *cores: Core[Any, Any]) -> None:
        if not cores:
            raise ValueError("Chain needs at least one core")
        self.cores = cores

    def feed(self, item: object) -> list[object]:
        return self._through([item], 0, finish=False)

    def finish(self) -> list[object]:
        return self._through([], 0, finish=True)

    def _through(self, items: list[object], first: int, *, finish: bool) -> list[object]:
        """Feed ``items`` to cores ``first``.. in turn (finishing each after its input when ``finish``)."""
        outputs: list[object] = []
        for position in range(first, len(self.cores)):
            core = self.cores[position]
            try:
                items = feed_each(core, items)
                if finish:
                    items.extend(core.finish())
            except Exception as exc:
                salvaged = partial_outputs(exc)
                try:
                    rest = self._through(salvaged, position + 1, finish=False) if salvaged else []
                except Exception:
                    rest = []  # the first failure is the one to report
                exc.streamfold_partial_outputs = rest  # type: ignore[attr-defined]
                raise
            if not items and not finish:
                break
        outputs.extend(items)
        return outputs
