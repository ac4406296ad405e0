"""Phi-4-mini ``functools[...]`` tool calls."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"


def test_fixture_parallel_calls() -> None:
    text = (RAW / "vllm-test_phi4-mini_parallel_tool_calls.txt").read_text()
    result = assert_chunking_invariant("phi4_mini", text)
    assert result.content == ""
    assert result.calls == [
        Call(0, "call_0", "get_weather", '{"city": "Tokyo"}'),
        Call(1, "call_1", "get_time", '{"timezone": "Asia/Tokyo"}'),
    ]


def test_fixture_text_around_the_call() -> None:
    result = assert_chunking_invariant(
        "phi4_mini", (RAW / "vllm-test_phi4-mini_surrounding_text.txt").read_text()
    )
    assert result.content == "Let me check the weather for you.\n\nWould you like to know more?"
    assert result.calls == [Call(0, "call_0", "get_weather", '{"city": "Tokyo"}')]


@pytest.mark.parametrize(
    "prose",
    [
        "import functools\nfunctools.partial(f)",
        'functools{"name": "func"}',
        "functools[ This is just text ]",
        "use functools[0]",
    ],
)
def test_prose_stays_text(prose: str) -> None:
    result = assert_chunking_invariant("phi4_mini", prose)
    assert (result.content, result.calls) == (prose, [])


def test_parameters_key_and_empty_list() -> None:
    result = assert_chunking_invariant("phi4_mini", 'functools[{"name": "f", "parameters": {"a": 1}}]')
    assert result.calls == [Call(0, "call_0", "f", '{"a": 1}')]
    result = assert_chunking_invariant("phi4_mini", "functools[] This is just text")
    assert (result.content, result.calls) == (" This is just text", [])
