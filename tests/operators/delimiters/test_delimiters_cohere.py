"""Cohere Command tool calls: ``<|START_ACTION|>[...]<|END_ACTION|>`` (Command A / R7B) and
``Action: ```json [...] ``` `` (Command R / R+)."""

from __future__ import annotations

import pytest

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"


def test_fixture_thinking_then_two_calls_keep_the_models_ids() -> None:
    text = (RAW / "vllm-test_cohere-command_thinking_then_2_tool_calls.txt").read_text()
    result = assert_chunking_invariant("cohere_command", text)
    assert (result.content, result.reasoning) == ("", "first I think about foo")
    assert result.calls == [Call(0, "0", "foo", '{"query": "query1"}'), Call(1, "1", "bar", '{"x": 42}')]


def test_fixture_reasoning_and_response_with_citations() -> None:
    text = (RAW / "vllm-test_cohere-command_citations_no_tool_calls.txt").read_text()
    result = assert_chunking_invariant("cohere_command", text)
    assert result.reasoning == "This is a rainbow <co>emoji: 🌈</co: 0:[1]>"
    assert (result.content, result.calls) == ("\nfoo <co>bar</co: 0:[1,2],1:[3,4]>", [])


def test_command_r_action_block() -> None:
    text = (
        'I will search.\nAction: ```json\n[\n    {\n        "tool_name": "internet_search",\n'
        '        "parameters": {\n            "query": "streamfold"\n        }\n    }\n]\n```'
    )
    result = assert_chunking_invariant("cohere_command", text)
    assert result.content == "I will search.\n"
    assert result.parsed() == [("internet_search", {"query": "streamfold"})]


@pytest.mark.parametrize("prose", ["Action: none needed.", "Action: ```python\nprint(1)\n```", "Action:"])
def test_prose_with_action_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("cohere_command", prose)
    assert (result.content, result.calls) == (prose, [])


def test_detection() -> None:
    cohere = get_format("cohere_command")
    assert cohere.detect_after("<|START_ACTION|>", "", False) is True
    assert cohere.detect_after("Action:", " ```json\n[", False) is True
    assert cohere.detect_after("Action:", " none", False) is False
