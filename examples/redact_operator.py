"""Writing your own stage: a sans-IO core plus a thin operator, like every stage of streamfold.

The core follows :class:`pipeline.stage.Core` (``feed`` / ``finish``); :func:`pipeline.stage.operator_stream`
makes it an async operator, and :func:`pipeline.stage.chain` would fuse it with other cores into one.

``redact_secrets`` masks known secret strings (API keys, tokens) in the text and reasoning the model
streams, even when a secret is split across deltas: the core holds back the end of a delta while it could
still be the start of a secret, and releases it as soon as it cannot. Its tests are in
``examples/test_redact_operator.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable

from aiostream import pipable_operator

from pipeline import PipelineEvent, SegmentEvent, SegmentEventType, SegmentType
from pipeline.stage import operator_stream

MASK = "[redacted]"


class SecretRedactor:
    """Sans-IO core: ``feed(event)`` / ``finish()`` return the events with every secret replaced by MASK."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
        self._held: dict[str, str] = {}  # segment id -> text held back at the end of that segment
        self._redacted_segments: set[str] = set()

    def feed(self, event: PipelineEvent) -> list[PipelineEvent]:
        if not isinstance(event, SegmentEvent):
            return [event]
        if event.event_type is SegmentEventType.START:
            if event.segment_type in (SegmentType.TEXT, SegmentType.REASONING):
                self._redacted_segments.add(event.segment_id)
            return [event]
        if event.segment_id not in self._redacted_segments:
            return [event]
        if event.event_type is SegmentEventType.CONTENT:
            text = self._held.pop(event.segment_id, "") + event.payload["delta"]
            safe, held = self._split(text)
            if held:
                self._held[event.segment_id] = held
            return [SegmentEvent.content(event.segment_id, safe)] if safe else []
        if event.event_type is SegmentEventType.END:
            rest = self._held.pop(event.segment_id, "")
            self._redacted_segments.discard(event.segment_id)
            return [SegmentEvent.content(event.segment_id, rest), event] if rest else [event]
        return [event]

    def finish(self) -> list[PipelineEvent]:
        return []

    def _split(self, text: str) -> tuple[str, str]:
        """Mask whole secrets; hold back a tail that is still the start of one."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        longest = max((len(secret) for secret in self._secrets), default=0)
        for size in range(min(len(text), longest - 1), 0, -1):
            tail = text[-size:]
            if any(secret.startswith(tail) for secret in self._secrets):
                return text[:-size], tail
        return text, ""


@pipable_operator
def redact_secrets(
    source: AsyncIterable[PipelineEvent], *, secrets: Iterable[str]
) -> AsyncIterator[PipelineEvent]:
    """Mask ``secrets`` in text and reasoning segments: ``events | redact_secrets.pipe(secrets=[key])``."""
    return operator_stream(source, SecretRedactor(secrets))
