"""What of a response can go to the next request of another provider, and what is dropped, with why.

Text and client tool calls travel between every pair of wire formats. What a provider signed or keeps on
its side does not: a signature or encrypted reasoning checks only against the provider that made it, a
Responses reasoning id names an item only OpenAI holds, and a provider-executed call ran on that
provider's servers. Reasoning text goes where the target can carry it unsigned (Gemini thought parts,
OpenAI Chat under a ``reasoning_key``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.models import SegmentType

__all__ = ["Dropped", "Segment", "portable_segments"]

_OPAQUE = ("signature", "encrypted_content", "reasoning_id")
"""Segment metadata that only the provider that made it accepts."""


@dataclass(slots=True)
class Segment:
    """One segment of a response as a turn builder keeps it: its START metadata, text and END metadata."""

    kind: SegmentType
    id: str
    start: dict[str, Any]
    pieces: list[str] = field(default_factory=list)
    end: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)


@dataclass(frozen=True, slots=True)
class Dropped:
    """Something of the response that the turn leaves out, because the target format cannot carry it."""

    segment_id: str
    """The segment it was in."""
    what: str
    """``reasoning``, ``signature``, ``encrypted_content``, ``reasoning_id``, ``provider_executed_call``,
    ``tool_result`` or ``citations``."""
    why: str
    """Why the target format cannot carry it."""


def portable_segments(
    segments: list[Segment], target: str, source: str | None, reasoning_key: str | None
) -> tuple[list[Segment], list[Dropped]]:
    """The segments a turn for ``target`` is built from, and what is left out.

    ``source`` is the wire format of the provider that answered (None: ``target`` itself), whose signed
    and server-side parts are dropped when it differs. Reasoning that ``target`` cannot carry at all is
    reported either way: the builder leaves it out."""
    kept: list[Segment] = []
    dropped: list[Dropped] = []
    for segment in segments:
        portable = segment if source is None else _strip(segment, target, source, dropped)
        if portable is None:
            continue
        if portable.kind is SegmentType.REASONING:
            why = _reasoning_refused(portable, target, reasoning_key)
            if why is not None:
                dropped.append(Dropped(segment.id, "reasoning", why))
        kept.append(portable)
    return kept, dropped


def _strip(segment: Segment, target: str, source: str, dropped: list[Dropped]) -> Segment | None:
    """``segment`` without what only ``source`` accepts; None when nothing of it can go."""
    if segment.start.get("provider_executed") or segment.kind is SegmentType.TOOL_RESULT:
        what = "tool_result" if segment.kind is SegmentType.TOOL_RESULT else "provider_executed_call"
        dropped.append(Dropped(segment.id, what, f"it ran on {source}'s side; {target} cannot replay it"))
        return None
    end = dict(segment.end or {})
    start = dict(segment.start)
    for key in (*_OPAQUE, "citations"):
        if key in end or key in start:
            end.pop(key, None)
            start.pop(key, None)
            dropped.append(Dropped(segment.id, key, f"{source}'s {key} means nothing to {target}"))
    return replace(segment, start=start, end=end if segment.end is not None else None)


def _reasoning_refused(segment: Segment, target: str, reasoning_key: str | None) -> str | None:
    """Why a turn for ``target`` leaves this reasoning segment out, or None when it goes."""
    meta = {**segment.start, **(segment.end or {})}
    if target == "openai_chat" and reasoning_key is None:
        return "OpenAI Chat takes reasoning back only under a reasoning_key"
    if target == "anthropic" and not (meta.get("signature") or meta.get("encrypted_content")):
        return "Anthropic refuses a thinking block without its signature"
    if target == "openai_responses" and not meta.get("reasoning_id"):
        return "a Responses reasoning item needs the id OpenAI gave it"
    return None
