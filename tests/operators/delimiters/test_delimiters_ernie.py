"""ERNIE 4.5 writes Hermes's ``<tool_call>{json}</tool_call>``: ``ernie45`` is an alias of ``hermes``."""

from __future__ import annotations

from operators.delimiters import get_format
from tests.conftest import FIXTURES
from tests.delimiter_cases import Call, assert_chunking_invariant

RAW = FIXTURES / "raw_model_output"


def test_ernie45_is_hermes() -> None:
    assert get_format("ernie45") is get_format("hermes")


def test_fixture_reasoning_end_then_two_calls() -> None:
    text = (RAW / "vllm-test_ernie-4.5_think_end_then_2_tools.txt").read_text()
    result = assert_chunking_invariant("ernie45", text)
    assert result.content == "I need to call two tools to handle these two issues separately.\n</think>\n\n"
    assert result.calls == [
        Call(0, "call_0", "get_current_temperature", '{"location": "Beijing"}'),
        Call(1, "call_1", "get_temperature_unit", '{"location": "Guangzhou", "unit": "c"}'),
    ]
