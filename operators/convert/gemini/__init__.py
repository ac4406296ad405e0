"""The Gemini converter: ``streamGenerateContent`` chunks or Interactions API events -> chunks.

`GeminiConverter` reads either API, told apart by the first event (Interactions API events carry an
``event_type``), each event a framed `Payload` or a dict, decoded in one step into
the Structs of ``_schema.py``: ``generate.py`` converts ``generateContent`` (Gemini API and Vertex AI),
with ``_calls.py`` for its function calls (whole or streamed) and server calls and ``_chunks.py`` for the
order of its parts; ``interactions.py`` converts the Interactions API; ``_partial_args.py`` writes
Vertex's streamed ``partialArgs`` as JSON text.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from aiostream import pipable_operator

from operators.convert._base import EventDecoder as _EventDecoder
from operators.convert._base import IdFactory as _IdFactory
from operators.convert._base import is_mapping as _is_mapping
from operators.convert.gemini._schema import APIProbe as _APIProbe
from operators.convert.gemini.generate import GenerateContentConverter as _GenerateContentConverter
from operators.convert.gemini.generate import normalize_gemini_finish_reason
from operators.convert.gemini.interactions import InteractionsConverter as _InteractionsConverter
from pipeline.models import ChunkResponse as _ChunkResponse
from pipeline.models import Payload as _Payload
from pipeline.stage import operator_stream as _operator_stream

__all__ = ["GeminiConverter", "convert_gemini", "normalize_gemini_finish_reason"]


class GeminiConverter:
    """Sans-IO core: a Gemini event (framed bytes or a dict) in, the chunks it carries out, for either API.

    The first event decides: one with an ``event_type`` starts an Interactions API stream, any other a
    ``generateContent`` stream. ``id_factory`` names the calls sent without an ``id``.
    """

    def __init__(self, *, id_factory: _IdFactory | None = None) -> None:
        self._id_factory = id_factory
        self._core: _GenerateContentConverter | _InteractionsConverter | None = None

    def feed(self, item: _Payload | Mapping[str, Any], /) -> list[_ChunkResponse]:
        """Convert one event (see the two APIs' converters)."""
        core = self._core
        if core is None:
            api = _InteractionsConverter if _has_event_type(item) else _GenerateContentConverter
            core = self._core = api(id_factory=self._id_factory)
            # Later events go straight to the chosen converter (a chain reads ``feed`` once it is set).
            self.feed = core.feed  # type: ignore[method-assign]
        return core.feed(item)

    def finish(self) -> list[_ChunkResponse]:
        """Nothing is held back; a call never closed stays unfinished on purpose."""
        return [] if self._core is None else self._core.finish()


_PROBE = _EventDecoder(_APIProbe).decode


def _has_event_type(first: _Payload | Mapping[str, Any]) -> bool:
    """Whether the first event of a stream is an Interactions API event."""
    if type(first) is _Payload:
        return _PROBE(first, 0).event_type is not None
    return _is_mapping(first) and first.get("event_type") is not None


@pipable_operator
def convert_gemini(
    source: AsyncIterable[_Payload | Mapping[str, Any]], *, id_factory: _IdFactory | None = None
) -> AsyncIterator[_ChunkResponse]:
    """Gemini ``streamGenerateContent`` chunks or Interactions API events (bytes or dicts) -> chunks.

    Args:
        source: the provider's events, as `Payload`s from a framer or as dicts.
        id_factory: makes the ids of calls the stream sends without one (`new_call_id` by default).

    Raises:
        StreamDecodeError: an event's bytes are not JSON (naming the byte offset).
        ConverterError: an event does not fit the provider's schema (naming the event and field).
        ProviderError: the stream carries an in-band error.
    """
    return _operator_stream(source, GeminiConverter(id_factory=id_factory))
