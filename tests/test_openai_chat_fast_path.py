"""The OpenAI chat converter's fast path (a chunk of only text content, or only the next arguments of an
announced call) gives exactly what the general path gives: the same chunks, the same errors, the same
state after. The general path is what a chunk that is a Mapping but not a dict takes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.convert.openai_chat import OpenAIChatConverter
from pipeline.errors import StreamfoldError
from pipeline.models import ChunkResponse, ToolCallDelta


def run(events: list[dict[str, Any]], *, general: bool) -> list[tuple[list[ChunkResponse], str | None]]:
    """What each event gives (its chunks, and its error if it fails: the stream goes on after it), then
    what ``finish`` gives."""
    converter = OpenAIChatConverter(id_factory=lambda position: f"gen_{position}")
    results: list[tuple[list[ChunkResponse], str | None]] = []
    for event in [*events, None]:
        try:
            if event is None:
                results.append((converter.finish(), None))
            else:
                results.append((converter.feed(MappingProxyType(event) if general else event), None))
        except StreamfoldError as error:
            results.append((error.partial_outputs, f"{type(error).__name__}: {error}"))
    return results


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
        "content": TEXT,
        "role": st.just("assistant"),
        "refusal": st.one_of(FALSY, st.just("no")),
        "reasoning_content": st.one_of(FALSY, st.just("hmm")),
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
def test_the_fast_path_gives_what_the_general_path_gives(events: list[dict[str, Any]]) -> None:
    assert run(events, general=False) == run(events, general=True)


def chunk(delta: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_text_and_argument_chunks_come_out_whole() -> None:
    announce = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hi", "refusal": None}),
        chunk({"tool_calls": [announce]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}),
    ]
    assert run(events, general=False) == [
        (
            [ChunkResponse(metadata={"id": "c", "model": "m"})],
            None,
        ),
        ([ChunkResponse(content="Hi")], None),
        ([ChunkResponse(tool_calls=[ToolCallDelta(0, "call_1", "f")])], None),
        ([ChunkResponse(tool_calls=[ToolCallDelta(0, arguments_delta='{"a": 1}')])], None),
        ([ChunkResponse(is_complete=True)], None),
    ]


ANNOUNCE = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}


@pytest.mark.parametrize(
    "delta",
    [
        {"tool_calls": [{"index": False, "function": {"arguments": "x"}}]},
        {"tool_calls": [{"index": 0.0, "function": {"arguments": "x"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "x", "name": "g"}}]},
        {"tool_calls": [{"index": 0, "id": "call_2", "function": {"arguments": "x"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "x"}}], "content": "y"},
        {"content": "y", "reasoning_content": "r"},
        {"content": "y", "tool_calls": [{"index": 0, "function": {"arguments": "x"}}]},
    ],
)
def test_deltas_near_the_fast_path_take_the_general_one(delta: dict[str, Any]) -> None:
    events = [chunk({"tool_calls": [ANNOUNCE]}), chunk(delta), chunk({"content": "z"})]
    assert run(events, general=False) == run(events, general=True)
