"""How to test an operator: the core at every chunk boundary, the operator with async fixtures.

Run: ``pytest examples/test_redact_operator.py`` (the project's own suite runs it too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiostream import stream
from redact_operator import MASK, SecretRedactor, redact_secrets

from pipeline import ChunkResponse, PipelineEvent, SegmentEvent, SegmentEventType, ToolInvocation
from pipeline.compose import process
from pipeline.fanout.hub import Hub, fan_out
from pipeline.testing import collect, counter_segment_ids

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    """streamfold runs on asyncio (aiostream is asyncio-only): run the async tests there."""
    return "asyncio"


TEXT = f"Your key is {SECRET}, keep it safe. Not sk-live-nope."


def text_of(events: list[PipelineEvent]) -> str:
    return "".join(
        event.payload["delta"]
        for event in events
        if isinstance(event, SegmentEvent) and event.event_type is SegmentEventType.CONTENT
    )


def events_for(pieces: list[str]) -> list[PipelineEvent]:
    """The segment events of a response whose text arrives in ``pieces`` (through the real emitter)."""
    from operators.segments import SegmentEmitter

    emitter = SegmentEmitter(segment_ids=counter_segment_ids())
    events: list[PipelineEvent] = []
    for piece in pieces:
        events.extend(emitter.feed(ChunkResponse(content=piece)))
    events.extend(emitter.finish())
    return events


@pytest.mark.parametrize("cut", range(len(TEXT) + 1))
def test_the_core_masks_a_secret_cut_at_every_position(cut: int) -> None:
    redactor = SecretRedactor([SECRET])
    out: list[PipelineEvent] = []
    for event in events_for([TEXT[:cut], TEXT[cut:]]):
        out.extend(redactor.feed(event))
    out.extend(redactor.finish())
    assert text_of(out) == TEXT.replace(SECRET, MASK)


def test_the_core_one_character_at_a_time() -> None:
    redactor = SecretRedactor([SECRET])
    out = [item for event in events_for(list(TEXT)) for item in redactor.feed(event)]
    assert text_of(out) == TEXT.replace(SECRET, MASK)


async def response() -> AsyncIterator[dict[str, object]]:
    """A tiny OpenAI Chat Completions stream, as provider dicts."""
    for piece in (TEXT[:15], TEXT[15:30], TEXT[30:]):
        yield {"id": "c1", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
    yield {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.fixture
async def hub() -> AsyncIterator[Hub[PipelineEvent]]:
    """An async fixture that owns a task group across its yield: this needs anyio's pytest plugin."""
    events = process(response(), provider="openai") | redact_secrets.pipe(secrets=[SECRET])
    async with fan_out(events) as hub:
        yield hub


@pytest.mark.anyio
async def test_the_operator_in_a_pipeline() -> None:
    events = await collect(process(response(), provider="openai") | redact_secrets.pipe(secrets=[SECRET]))
    assert text_of(events) == TEXT.replace(SECRET, MASK)
    assert not any(isinstance(event, ToolInvocation) for event in events)


@pytest.mark.anyio
async def test_a_ui_subscriber_never_sees_the_secret(hub: Hub[PipelineEvent]) -> None:
    seen = await collect(hub.subscribe(policy="coalesce", max_buffer=2))
    assert SECRET not in text_of(seen)
    assert MASK in text_of(seen)


@pytest.mark.anyio
async def test_events_that_are_not_text_pass_through() -> None:
    invocation = ToolInvocation("c", "f", {"key": SECRET})
    assert await collect(stream.iterate([invocation]) | redact_secrets.pipe(secrets=[SECRET])) == [invocation]
