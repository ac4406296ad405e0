"""The stage API: a sans-IO core, `drive`, which makes it an async operator, and `chain`, which
fuses cores into one core.

A core knows nothing of asyncio: ``feed(item)`` returns the outputs the item completes, ``finish()`` those
the end of the input completes; it may also have ``abort(exc)``, called when its input fails, returning what
it closes (the segment emitter closes open segments), and ``passes(item)``, which tells a chain the items it
would pass on unchanged, so that the chain does not feed them (see `Core`). Tests feed a core at every chunk
boundary; ``drive`` runs it in the consumer's task (``operator_stream`` is ``drive`` as an aiostream operator
returns it); ``chain`` runs several in one flat loop. ``process()``, the piped operators, the proxy and the
seeds' handlers all run their cores this way, so they give the same events.

The error contract (h11's): a core raises a `StreamfoldError` for bad input, with the
outputs it produced before the failure in ``partial_outputs``. Any other exception is a bug and passes
through untouched (nothing is salvaged from it). Nothing already received is lost: `drive` yields the
partial outputs, then raises.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from aiostream import operator
from aiostream.core import Operator, Streamer

from pipeline.errors import ConfigurationError, StreamfoldError

__all__ = ["Core", "GeneratorStreamer", "chain", "drive", "operator_stream", "source_operator"]

In_contra = TypeVar("In_contra", contravariant=True)
In = TypeVar("In")
Out = TypeVar("Out")
P = ParamSpec("P")
_Passes = Callable[[Any], bool]


class Core(Protocol[In_contra, Out]):
    """A sans-IO stage: ``feed`` and ``finish``, and three optional methods.

    - ``abort(exc: BaseException) -> list[Out]``: its input failed; return what that closes.
    - ``passes(item) -> bool``: the pass-through contract. True only when ``feed(item)`` would return
      ``[item]`` and change nothing in the core; a `chain` then passes ``item`` on without calling
      ``feed`` (the argument splitter passes chunks without tool calls this way, the invocation folder
      content events). It runs for every item that reaches the core in a chain, so it should be cheaper
      than ``feed``, and it must not raise. A core without it is fed every item; ``drive`` always feeds.
    - ``flatten(replace)``, on the first core of a `chain`: the chain passes it a function that the core
      calls once, at the end of a ``feed``, with the cores it has become (the auto adapter, once it knows
      its framer and converter); the chain then runs those itself.
    """

    def feed(self, item: In_contra, /) -> list[Out]:
        """Take the next input item; return the outputs it completes (often none, sometimes several)."""
        ...

    def finish(self) -> list[Out]:
        """The input has ended: return what was held back, or the errors of what is left unfinished."""
        ...


def _abort_of(core: object) -> Callable[[BaseException], list[Any]] | None:
    abort: Callable[[BaseException], list[Any]] | None = getattr(core, "abort", None)
    return abort


def _passes_of(core: object) -> _Passes | None:
    passes: _Passes | None = getattr(core, "passes", None)
    return passes


def _take(exc: StreamfoldError) -> list[Any]:
    """``exc.partial_outputs``, emptied on the exception so that they are delivered once."""
    outputs, exc.partial_outputs = exc.partial_outputs, []
    return outputs


async def drive(source: AsyncIterable[In], core: Core[In, Out]) -> AsyncGenerator[Out, None]:
    """Run ``core`` over ``source`` in the caller's task, yielding its outputs.

    Backpressure is the pull: the source is read only as fast as the consumer asks. Closing the returned
    iterator closes the source at once. A failing core's ``partial_outputs`` are yielded before its error;
    when the source fails, what the core's ``abort`` returns is yielded before the source's error (a core
    without ``abort`` is left as it is). An exception thrown in at a ``yield`` is never caught here.

    Args:
        source: the items to feed.
        core: the sans-IO stage.
    """
    feed, chained = core.feed, core if type(core) is _Chain else None
    iterator = aiter(source)
    context = await _entered(iterator)
    failure: BaseException | None = None
    try:
        # Whether an exception now comes from the source (not from a feed, nor thrown in at a yield).
        pulling = True
        # The core after the first that a chain runs now: none between items.
        later: Callable[[Any], list[Any]] | None = None
        try:
            async for item in iterator:
                pulling = False
                try:
                    if chained is None:
                        outputs = feed(item)
                    else:
                        # The chain's one-item loop (`_Chain.feed`), run here: one Python call less per item.
                        rest = chained.rest
                        outputs = chained.head.feed(item)
                        if len(outputs) == 1:
                            one = outputs[0]
                            for passes, later in rest:
                                if passes is None or not passes(one):
                                    outputs = later(one)
                                    if len(outputs) != 1:
                                        outputs, failure = chained.onwards(outputs, later, rest)
                                        break
                                    one = outputs[0]
                            later = None
                        else:
                            outputs, failure = chained.onwards(outputs, None, rest)
                except StreamfoldError as exc:
                    failure = exc if chained is None else chained.failed(exc, later)
                    outputs = _take(failure)
                for out in outputs:
                    yield out
                if failure is not None:
                    raise failure
                pulling = True
        except Exception as exc:
            if not pulling:
                raise
            outputs, failure = _aborted(core, exc)
            for out in outputs:
                yield out
            raise failure  # noqa: B904  # exc itself, or abort's error whose context is exc
        outputs, failure = _finished(core)
        for out in outputs:
            yield out
        if failure is not None:
            raise failure
    finally:
        await _close(iterator, context)


async def _entered(iterator: AsyncIterator[Any]) -> AbstractAsyncContextManager[Any] | None:
    """The context ``iterator`` is iterated in, entered: an aiostream Streamer's (an operator's output piped
    into the next), or none."""
    if not isinstance(iterator, AbstractAsyncContextManager):
        return None
    await iterator.__aenter__()
    return iterator


def _aborted(core: Core[Any, Any], exc: Exception) -> tuple[list[Any], BaseException]:
    """The outputs of ``core.abort(exc)`` (none if it has no ``abort``), and the error to raise after them:
    ``exc``, or abort's own error."""
    abort = _abort_of(core)
    if abort is None:
        return [], exc
    try:
        return abort(exc), exc
    except StreamfoldError as inner:
        return _take(inner), inner


def _finished(core: Core[Any, Any]) -> tuple[list[Any], StreamfoldError | None]:
    """The outputs of ``core.finish()``, and its error if it failed."""
    try:
        return core.finish(), None
    except StreamfoldError as exc:
        return _take(exc), exc


async def _close(iterator: AsyncIterator[Any], context: AbstractAsyncContextManager[Any] | None) -> None:
    """Leave the source's context, or close the source if it can be closed."""
    if context is not None:
        await context.__aexit__(None, None, None)
    else:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def operator_stream(source: AsyncIterable[In], core: Core[In, Out]) -> Streamer[Out]:
    """`drive` as an aiostream operator returns it: ``return operator_stream(source, core)`` from a
    ``@pipable_operator`` function gives the same items, and ``async for`` inside the stream's context runs
    on `drive`'s generator itself (see `GeneratorStreamer`).

    Args:
        source: the items to feed.
        core: the sans-IO stage.
    """
    return GeneratorStreamer(drive(source, core))


def source_operator(generator: Callable[P, AsyncIterator[Out]]) -> Operator[P, Out]:
    """aiostream's ``@operator`` for an async generator function (a source), whose stream hands the stage
    reading it, inside the stream's context, the generator itself (see `GeneratorStreamer`)."""

    @functools.wraps(generator)
    def stream(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Out]:
        return GeneratorStreamer(generator(*args, **kwargs))

    return operator(stream)


class GeneratorStreamer(Streamer[Out]):
    """aiostream's streamer context around an async generator (leaving ``async with`` closes it, and so
    its source), whose ``async for`` inside the context iterates the generator itself. aiostream's own
    ``__anext__`` makes four Python calls per item to check that it runs in its context, close to half of
    what one operator adds per item (``benchmarks/bench_stages``). Outside the context (before
    entering it, or after leaving it) it is aiostream's streamer, which warns or raises."""

    def __aiter__(self) -> AsyncIterator[Out]:  # type: ignore[override]  # the generator, not a wrapper
        if self._state == self._RUNNING:
            return self._aiterator
        return self


class _Chain:
    """Cores in a row as one core: each one's outputs are the next one's inputs, in one flat loop.

    `drive` runs the one-item loop of `feed` itself, reading ``head`` and ``rest``, and leaves the rest of
    the work to `onwards` and `failed`."""

    __slots__ = ("_aborts", "_cores", "_feeds", "_passes", "head", "rest")

    def __init__(self, cores: Sequence[Core[Any, Any]]) -> None:
        self._use(tuple(cores), tuple(core.feed for core in cores), tuple(_passes_of(core) for core in cores))
        flatten: Callable[[Callable[[Sequence[Core[Any, Any]]], None]], None] | None = getattr(
            cores[0], "flatten", None
        )
        if flatten is not None:
            flatten(self._replace_head)

    def _use(
        self,
        cores: tuple[Core[Any, Any], ...],
        feeds: tuple[Callable[[Any], list[Any]], ...],
        passes: tuple[_Passes | None, ...],
    ) -> None:
        self._cores, self._feeds, self._passes = cores, feeds, passes
        self.head: Core[Any, Any] = cores[0]
        """The first core. Its ``feed`` is looked up at each item: a first core may replace it once it
        knows more."""
        self.rest: tuple[tuple[_Passes | None, Callable[[Any], list[Any]]], ...] = tuple(
            zip(passes[1:], feeds[1:], strict=True)
        )
        """The ``passes`` and ``feed`` of each later core. Read before the first core runs: a first core
        that flattens itself into this chain does so at the end of its feed, and what it returned goes on
        through the cores after it."""
        self._aborts = tuple(_abort_of(core) for core in cores)

    def _replace_head(self, cores: Sequence[Core[Any, Any]]) -> None:
        """The first core has become ``cores`` in a row: run them here, one loop for all. The later cores
        keep their feeds (an error's position is found by the feed's identity)."""
        self._use(
            (*cores, *self._cores[1:]),
            (*(core.feed for core in cores), *self._feeds[1:]),
            (*(_passes_of(core) for core in cores), *self._passes[1:]),
        )

    def feed(self, item: Any) -> list[Any]:
        feed = None
        rest = self.rest
        try:
            items = self.head.feed(item)
            if len(items) == 1:
                # The usual case, one item at a time: a core whose ``passes`` accepts it is not fed.
                one = items[0]
                for passes, feed in rest:
                    if passes is None or not passes(one):
                        items = feed(one)
                        if len(items) != 1:
                            break
                        one = items[0]
                else:
                    return items
        except StreamfoldError as exc:
            raise self.failed(exc, feed)  # noqa: B904  # exc itself, or a later core's error whose context is exc
        items, failure = self.onwards(items, feed, rest)
        if failure is not None:
            failure.partial_outputs = items  # (`onwards` takes them out, for `drive`)
            raise failure
        return items

    def onwards(
        self, items: list[Any], fed: Callable[[Any], list[Any]] | None, rest: tuple[Any, ...]
    ) -> tuple[list[Any], StreamfoldError | None]:
        """``items`` (not one) through the cores after the one whose feed is ``fed`` (``None``: the first,
        followed by ``rest``), each fed them in turn, and no error; or, when one fails, the partial
        outputs taken out of its error (`_salvage`), and the error."""
        if not items:
            return items, None
        first = len(self._feeds) - len(rest) if fed is None else _position(self._feeds, fed, 1) + 1
        position = first
        try:
            for position in range(first, len(self._feeds)):
                items = _feed_each(self._passes[position], self._feeds[position], items)
        except StreamfoldError as exc:
            failure = self._salvaged(exc, position)
            return _take(failure), failure
        return items, None

    def failed(self, exc: StreamfoldError, feed: Callable[[Any], list[Any]] | None) -> StreamfoldError:
        """The core whose feed is ``feed`` (``None``: the first) raised ``exc``: the error to raise, with
        the partial outputs `_salvage` gives."""
        return self._salvaged(exc, 0 if feed is None else _position(self._feeds, feed, 1))

    def finish(self) -> list[Any]:
        items: list[Any] = []
        position = 0
        try:
            for core, passes in zip(self._cores, self._passes, strict=True):
                outputs = _feed_each(passes, core.feed, items)
                try:
                    outputs += core.finish()
                except StreamfoldError as exc:
                    exc.partial_outputs = outputs + exc.partial_outputs
                    raise
                items = outputs
                position += 1
        except StreamfoldError as exc:
            self._salvage(exc, position)
            raise
        return items

    def abort(self, exc: BaseException) -> list[Any]:
        """The input failed: each core with an ``abort`` closes what it has open, downstream of the rest."""
        return self._closing(exc, 0, [])

    def _closing(self, exc: BaseException, first: int, items: list[Any]) -> list[Any]:
        """``items`` through the cores from ``first`` on, each closing what it has open after them. A core
        that fails on the way raises its own error (salvaged in turn), as it would driven on its own."""
        for position in range(first, len(self._cores)):
            try:
                outputs = _feed_each(self._passes[position], self._feeds[position], items)
                abort = self._aborts[position]
                if abort is not None:
                    try:
                        outputs += abort(exc)
                    except StreamfoldError as inner:
                        inner.partial_outputs = outputs + inner.partial_outputs
                        raise
            except StreamfoldError as inner:
                self._salvage(inner, position)
                raise
            items = outputs
        return items

    def _salvaged(self, exc: StreamfoldError, failed: int) -> StreamfoldError:
        """`_salvage`, returning the error to raise: ``exc``, or that of a core after it that failed in
        turn while closing."""
        try:
            self._salvage(exc, failed)
        except StreamfoldError as inner:
            return inner
        return exc

    def _salvage(self, exc: StreamfoldError, failed: int) -> None:
        """Core ``failed`` raised ``exc``: what it produced before flows on through the cores after it,
        which then close what they have open; the result replaces ``exc.partial_outputs``."""
        exc.partial_outputs = self._closing(exc, failed + 1, _take(exc))


def _position(
    feeds: tuple[Callable[[Any], list[Any]], ...], feed: Callable[[Any], list[Any]], start: int
) -> int:
    """The position of ``feed`` in ``feeds`` from ``start`` on, by identity (a core chained twice has two
    bound methods)."""
    return next(position for position in range(start, len(feeds)) if feeds[position] is feed)


def _feed_each(passes: _Passes | None, feed: Callable[[Any], list[Any]], items: list[Any]) -> list[Any]:
    """``items`` fed in turn, those ``passes`` accepts passed on as they are; if one fails, the outputs of
    those before it go first in its error."""
    outputs: list[Any] = []
    try:
        if passes is None:
            for each in items:
                outputs += feed(each)
        else:
            for each in items:
                if passes(each):
                    outputs.append(each)
                else:
                    outputs += feed(each)
    except StreamfoldError as exc:
        exc.partial_outputs = outputs + exc.partial_outputs
        raise
    return outputs


def chain(*cores: Core[Any, Any]) -> Core[Any, Any]:
    """Fuse ``cores`` into one core that feeds each one's outputs to the next.

    An item that a core's ``passes`` accepts goes on to the next core without that core's ``feed``
    (see `Core`): the events are the same, for less work per item.

    When a core raises `StreamfoldError`, its ``partial_outputs`` flow on through
    the cores after it, each of which then closes what it has open (``abort``), and the result becomes the
    error's ``partial_outputs`` (if one of those cores fails in turn, its error is the one raised): the
    same events and error as the cores run by one `drive` each, piped. When the
    chain's input fails, its ``abort`` aborts the cores in order, each one's outputs fed to the next.

    Raises:
        ConfigurationError: no cores.
    """
    if not cores:
        raise ConfigurationError("chain() needs at least one core")
    if len(cores) == 1:
        return cores[0]
    return cast(Core[Any, Any], _Chain(cores))
