"""The Gemini ``generateContent`` converter's one shortcut changes nothing.

The plain route (an event whose one part of candidate 0 is text or a thought, with nothing new but the
usage) gives exactly what gathering the candidate gives: on generated events (mistyped fields included)
and on every recorded ``generateContent`` stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.convert.gemini.generate import GenerateContentConverter
from pipeline.models import ChunkResponse, Payload
from tests.core_runs import each_item
from tests.reference import FIXTURES

Results = list[tuple[list[ChunkResponse], str | None]]


def ids(position: int) -> str:
    return f"gen_{position}"


def run(items: list[Any]) -> Results:
    """What each item gives (its chunks, and its error if it fails: the stream goes on after it), then
    what ``finish`` gives."""
    return each_item(GenerateContentConverter(id_factory=ids), items)


def run_gathered(items: list[Any]) -> Results:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(GenerateContentConverter, "_plain", lambda self, event: None)
        return run(items)


PART = st.fixed_dictionaries(
    {},
    optional={
        "text": st.sampled_from(["", " fox", "é", None, 7]),
        "thought": st.sampled_from([True, False, None]),
        "thoughtSignature": st.sampled_from(["c2ln", "", None]),
        "functionCall": st.sampled_from([None, {"name": "f", "args": {"a": 1}}, {"name": "g", "id": "c1"}]),
        "inlineData": st.sampled_from([None, {"mimeType": "image/png", "data": "AAAA"}]),
    },
)
CANDIDATE = st.fixed_dictionaries(
    {},
    optional={
        "content": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "parts": st.one_of(st.lists(PART, max_size=2), st.none()),
                    "role": st.just("model"),
                },
            ),
            st.none(),
        ),
        "index": st.sampled_from([0, 1]),
        "finishReason": st.sampled_from([None, "STOP", "MAX_TOKENS", 1]),
        "citationMetadata": st.sampled_from([None, {"citations": [{"uri": "https://example.com"}]}]),
        "groundingMetadata": st.sampled_from([None, {"groundingChunks": [{"web": {"uri": "u"}}]}]),
    },
)
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "candidates": st.one_of(st.lists(CANDIDATE, max_size=2), st.none()),
        "usageMetadata": st.sampled_from([None, {"promptTokenCount": 3, "candidatesTokenCount": 2}]),
        "modelVersion": st.sampled_from(["gemini-2.5-flash", "gemini-3-pro", None]),
        "responseId": st.sampled_from(["r1", "r2", None]),
        "promptFeedback": st.sampled_from([None, {"blockReason": "SAFETY"}, {}]),
    },
)


@settings(max_examples=600, deadline=None)
@given(events=st.lists(EVENT, max_size=10))
def test_the_plain_route_gives_what_gathering_gives(events: list[dict[str, Any]]) -> None:
    payloads = [Payload(msgspec.json.encode(event), 0) for event in events]
    assert run(payloads) == run_gathered(payloads)


def test_text_and_thought_parts_come_out_whole() -> None:
    first = {"candidates": [{"content": {"parts": [{"text": "a"}]}}], "responseId": "r", "modelVersion": "m"}
    text = {"candidates": [{"content": {"parts": [{"text": " b"}], "role": "model"}, "index": 0}]}
    thought = {"candidates": [{"content": {"parts": [{"text": "hm", "thought": True}]}}], "responseId": "r"}
    results = run([first, text, thought])
    assert results[1:3] == [
        ([ChunkResponse(content=" b")], None),
        ([ChunkResponse(reasoning="hm")], None),
    ]


PLAIN_PART = {"text": " fox"}
NEAR_PLAIN: list[dict[str, Any]] = [
    {"candidates": [{"content": {"parts": [PLAIN_PART]}}]},
    {"candidates": [{"content": {"parts": [{"text": " fox", "thought": True}]}}]},
    {"candidates": [{"content": {"parts": [{"text": ""}]}}]},
    {"candidates": [{"content": {"parts": [{"text": " fox", "thoughtSignature": "c2ln"}]}}]},
    {"candidates": [{"content": {"parts": [{"text": " fox", "functionCall": {"name": "f"}}]}}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART, PLAIN_PART]}}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}}, {"content": {"parts": [PLAIN_PART]}, "index": 1}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}, "index": 1}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}, "finishReason": "STOP"}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}, "citationMetadata": {"citations": [{"uri": "u"}]}}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}, "groundingMetadata": {"groundingSupports": [{}]}}]},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}}], "promptFeedback": {"blockReason": "SAFETY"}},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}}], "responseId": "r2"},
    {"candidates": [{"content": {"parts": [PLAIN_PART]}}], "usageMetadata": {"promptTokenCount": 3}},
]


@pytest.mark.parametrize("event", NEAR_PLAIN)
def test_events_near_the_plain_route(event: dict[str, Any]) -> None:
    first = {"candidates": [{"content": {"parts": [PLAIN_PART]}}]}
    payloads = [Payload(msgspec.json.encode(item), 0) for item in (first, event)]
    assert run(payloads) == run_gathered(payloads)


def generate_fixtures() -> list[Path]:
    return sorted(
        path
        for path in (FIXTURES / "gemini").iterdir()
        if "interactions" not in path.name and path.suffix in (".sse", ".jsonl")
    )


def raw_events(path: Path) -> list[bytes]:
    lines = [line.strip() for line in path.read_bytes().splitlines()]
    if path.suffix == ".sse":
        return [line.removeprefix(b"data:").strip() for line in lines if line.startswith(b"data:")]
    return [line for line in lines if line]


@pytest.mark.parametrize("path", generate_fixtures(), ids=lambda path: path.name)
def test_recorded_streams_through_the_plain_route_give_what_gathering_gives(path: Path) -> None:
    payloads = [Payload(event, 0) for event in raw_events(path)]
    assert payloads
    results = run(payloads)
    assert results == run_gathered(payloads)
    assert any(chunks for chunks, _ in results)
