"""The OpenAI chat converter's one decode, and its one shortcut, change nothing.

- An event's bytes (a framed :class:`Payload`) and the same event as a dict give the same chunks, the same
  errors and the same state after: on generated chunks (mistyped fields included) and on every recorded
  chat stream.
- The plain route (a delta of only text, or only the next arguments of an announced call) gives exactly
  what gathering the choice gives; a text event whose metadata changes, or that carries usage or an error,
  leaves it with nothing lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.adapter.sse import SSEDecoder
from operators.convert.openai_chat import OpenAIChatConverter
from pipeline.models import ChunkResponse, Payload, TokenUsage, ToolCallDelta
from tests.core_runs import each_item
from tests.reference import FIXTURES

Results = list[tuple[list[ChunkResponse], str | None]]


def ids(position: int) -> str:
    return f"gen_{position}"


def run(items: list[Any], converter: OpenAIChatConverter | None = None) -> Results:
    """What each item gives (its chunks, and its error if it fails: the stream goes on after it), then
    what ``finish`` gives."""
    return each_item(converter or OpenAIChatConverter(id_factory=ids), items)


def payloads(events: list[Any]) -> list[Payload]:
    return [Payload(msgspec.json.encode(event), 0) for event in events]


def without_plain_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(OpenAIChatConverter, "_plain", lambda self, choice: None)


TEXT = st.sampled_from(["", " fox", "é", "{", None, 7])
FALSY: st.SearchStrategy[object] = st.sampled_from([None, "", [], {}])
TOOL = st.fixed_dictionaries(
    {},
    optional={
        "index": st.sampled_from([0, 1, True, 0.0, None, "0"]),
        "id": st.sampled_from(["call_a", "call_b", "", None]),
        "type": st.sampled_from(["function", "custom"]),
        "function": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": st.sampled_from(["get_weather", "", None]),
                    "arguments": st.sampled_from(['{"a"', ": 1}", "", None, 3, {"x": 1}]),
                },
            ),
            st.sampled_from([None, "f"]),
        ),
    },
)
DELTA = st.fixed_dictionaries(
    {},
    optional={
        "content": st.one_of(TEXT, st.just([{"type": "text", "text": "part"}])),
        "role": st.just("assistant"),
        "refusal": st.one_of(FALSY, st.just("no")),
        "reasoning_content": st.one_of(FALSY, st.just("hmm")),
        "reasoning": st.sampled_from([None, "", "so"]),
        "reasoning_details": st.sampled_from([None, [], [{"type": "reasoning.text", "text": "t"}]]),
        "tool_calls": st.one_of(FALSY, st.lists(TOOL, min_size=1, max_size=2), st.just("x")),
        "function_call": FALSY,
    },
)
CHOICE = st.fixed_dictionaries(
    {"delta": st.one_of(DELTA, st.sampled_from([None, "d"]))},
    optional={
        "index": st.sampled_from([0, 1, None, True]),
        "finish_reason": st.sampled_from([None, "", "stop", "tool_calls"]),
        "logprobs": st.none(),
    },
)
EVENT = st.fixed_dictionaries(
    {"choices": st.one_of(st.lists(CHOICE, min_size=1, max_size=2), st.just([]), st.just("c"))},
    optional={
        "id": st.sampled_from(["chatcmpl-1", "chatcmpl-2", ""]),
        "model": st.sampled_from(["gpt-4o", None]),
        "usage": st.sampled_from([None, {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}]),
        "error": st.sampled_from([None, {"message": "boom"}]),
        "x_groq": st.sampled_from([{"id": "req"}]),
    },
)


@settings(max_examples=600, deadline=None)
@given(events=st.lists(EVENT, max_size=12))
def test_bytes_and_dicts_give_the_same(events: list[dict[str, Any]]) -> None:
    assert run(payloads(events)) == run(events)


@settings(max_examples=600, deadline=None)
@given(events=st.lists(EVENT, max_size=12))
def test_the_plain_route_gives_what_gathering_gives(events: list[dict[str, Any]]) -> None:
    expected = run(events)
    with pytest.MonkeyPatch.context() as monkeypatch:
        without_plain_route(monkeypatch)
        assert run(events) == expected


def chunk(delta: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


ANNOUNCE = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}


def test_text_reasoning_and_argument_chunks_come_out_whole() -> None:
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hi", "refusal": None}),
        chunk({"reasoning_content": "hmm", "content": None}),
        chunk({"tool_calls": [ANNOUNCE]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}),
    ]
    expected: Results = [
        ([ChunkResponse(metadata={"id": "c", "model": "m"})], None),
        ([ChunkResponse(content="Hi")], None),
        ([ChunkResponse(reasoning="hmm")], None),
        ([ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "f")])], None),
        ([ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"a": 1}')])], None),
        ([ChunkResponse(is_complete=True)], None),
    ]
    assert run(payloads(events)) == run(events) == expected


@pytest.mark.parametrize(
    "delta",
    [
        {"tool_calls": [{"index": 0, "function": {"arguments": "x", "name": "g"}}]},
        {"tool_calls": [{"index": 0, "id": "call_2", "function": {"arguments": "x"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "x"}}], "content": "y"},
        {"tool_calls": [{"index": 1, "function": {"arguments": "x"}}]},
        {"content": "y", "reasoning_content": "r", "refusal": "no"},
        {"content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "y"}]},
        {"reasoning": "r", "reasoning_details": [{"type": "reasoning.text", "text": "r", "signature": "s"}]},
        {"images": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
        {"function_call": {"name": "f", "arguments": "{}"}},
    ],
)
def test_deltas_near_the_plain_route(delta: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    events = [chunk({"tool_calls": [ANNOUNCE]}), chunk(delta), chunk({"content": "z"})]
    expected = run(events)
    assert run(payloads(events)) == expected
    without_plain_route(monkeypatch)
    assert run(events) == expected


def chat_fixtures() -> list[Path]:
    return sorted(
        path
        for folder in ("openai_chat", "openai_compatible")
        for path in (FIXTURES / folder).iterdir()
        if path.suffix in {".sse", ".jsonl"}
    )


def raw_events(path: Path) -> list[bytes]:
    """The bytes of each event of a recording as a framer hands them on: SSE data fields, JSON lines."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return [line.strip() for line in data.splitlines() if line.strip()]
    decoder = SSEDecoder()
    events = [event.data.encode() for event in [*decoder.feed(data), *decoder.finish()]]
    return [event for event in events if event.strip() != b"[DONE]"]


@pytest.mark.parametrize("path", chat_fixtures(), ids=lambda path: path.name)
@pytest.mark.parametrize("choice", [0, 1])
def test_recorded_streams_as_bytes_give_what_their_dicts_give(path: Path, choice: int) -> None:
    events = raw_events(path)
    assert events

    def converter() -> OpenAIChatConverter:
        return OpenAIChatConverter(id_factory=ids, choice=choice)

    as_bytes = run([Payload(event, 0) for event in events], converter())
    decode: Callable[[bytes], Any] = msgspec.json.decode
    assert as_bytes == run([decode(event) for event in events], converter())
    assert any(chunks for chunks, _ in as_bytes)


METADATA = {
    "id": "chatcmpl-1",
    "model": "gpt-4o",
    "created": 1700000000,
    "system_fingerprint": "fp_1",
    "service_tier": "default",
}
CHANGED = {"id": "chatcmpl-2", "model": "gpt-4o-mini", "created": 1700000001, "system_fingerprint": "fp_2"}


@pytest.mark.parametrize(
    ("key", "value"), [*CHANGED.items(), ("service_tier", "flex"), ("created", 1700000000.5)]
)
def test_a_metadata_change_on_a_text_event_comes_out_with_its_text(key: str, value: object) -> None:
    """Each metadata field is compared on the plain route: a change comes out on the event that brings it."""

    def text(content: str, **changes: object) -> dict[str, Any]:
        return {**METADATA, **changes, "choices": [{"index": 0, "delta": {"content": content}}]}

    events = [text("a"), text("b"), text("c", **{key: value}), text("d", **{key: value})]
    expected: Results = [
        ([ChunkResponse(content="a", metadata=METADATA)], None),
        ([ChunkResponse(content="b")], None),
        ([ChunkResponse(content="c", metadata={key: value})], None),
        ([ChunkResponse(content="d")], None),
        ([ChunkResponse(is_complete=True)], None),
    ]
    assert run(payloads(events)) == run(events) == expected


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
COUNTED = ChunkResponse(content="c", usage=TokenUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5))


@pytest.mark.parametrize(
    ("extra", "outcome"),
    [
        ({"usage": USAGE}, ([COUNTED], None)),
        ({"x_groq": {"usage": USAGE}}, ([COUNTED], None)),
        ({"error": {"message": "overloaded"}}, ([], "ProviderError: event 2: provider error: overloaded")),
    ],
)
def test_usage_and_errors_on_a_text_event_are_read(extra: dict[str, Any], outcome: Any) -> None:
    """A text event that also carries usage or an error leaves the plain route: neither is lost."""

    def text(content: str, **fields: object) -> dict[str, Any]:
        return {"id": "c", "model": "m", **fields, "choices": [{"index": 0, "delta": {"content": content}}]}

    events = [text("a"), text("b"), text("c", **extra)]
    results = run(payloads(events))
    assert results == run(events)
    assert results[1:3] == [([ChunkResponse(content="b")], None), outcome]
