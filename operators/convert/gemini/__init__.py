"""The Gemini converter: ``streamGenerateContent`` chunks or Interactions API events -> chunks.

:class:`GeminiConverter` reads either API, told apart by the first event (Interactions API events carry an
``event_type``): ``generate.py`` converts ``generateContent`` (Gemini API and Vertex AI, whole or
streamed function calls), ``interactions.py`` the Interactions API, ``_partial_args.py`` writes Vertex's
streamed ``partialArgs`` as JSON text.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from aiostream import pipable_operator

from operators.convert._base import IdFactory as _IdFactory
from operators.convert.gemini.generate import GenerateContentConverter as _GenerateContentConverter
from operators.convert.gemini.generate import normalize_gemini_finish_reason
from operators.convert.gemini.interactions import InteractionsConverter as _InteractionsConverter
from pipeline.models import ChunkResponse as _ChunkResponse
from pipeline.stage import operator_stream as _operator_stream

__all__ = ["GeminiConverter", "convert_gemini", "normalize_gemini_finish_reason"]


class GeminiConverter:
    """Sans-IO core: a Gemini event (a dict) in, the chunks it carries out, for either API.

    The first event that is an object decides: one with an ``event_type`` starts an Interactions API
    stream, any other a ``generateContent`` stream. ``id_factory`` names the calls sent without an ``id``.
    """

    __slots__ = ("_core", "_id_factory")

    def __init__(self, *, id_factory: _IdFactory | None = None) -> None:
        self._id_factory = id_factory
        self._core: _GenerateContentConverter | _InteractionsConverter | None = None

    def feed(self, event: Mapping[str, Any], /) -> list[_ChunkResponse]:
        """Convert one event (see the two APIs' converters)."""
        core = self._core
        if core is None:
            interactions = isinstance(event, Mapping) and event.get("event_type") is not None
            api = _InteractionsConverter if interactions else _GenerateContentConverter
            core = self._core = api(id_factory=self._id_factory)
        return core.feed(event)

    def finish(self) -> list[_ChunkResponse]:
        """Nothing is held back; a call never closed stays unfinished on purpose."""
        return [] if self._core is None else self._core.finish()


@pipable_operator
def convert_gemini(
    source: AsyncIterable[Mapping[str, Any]], *, id_factory: _IdFactory | None = None
) -> AsyncIterator[_ChunkResponse]:
    """Gemini ``streamGenerateContent`` chunks or Interactions API events (dicts) -> chunks."""
    return _operator_stream(source, GeminiConverter(id_factory=id_factory))
